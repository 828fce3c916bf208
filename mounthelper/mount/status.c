/* SPDX-License-Identifier: MIT */
/* The status text of a mount. */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "cache.h"
#include "fill.h"
#include "image.h"
#include "imgsrc.h"
#include "inodes.h"
#include "metapages.h"
#include "readfail.h"
#include "warm.h"

struct text {
	char *buf;
	size_t len, used;
	int overflow;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->len - t->used)
		t->overflow = 1;
	else
		t->used += (size_t)n;
}

/* A URL mount's network and disk cache; nothing for a local image. */
static void add_network(struct text *t, struct stp_imgsrc *src)
{
	struct stp_imgsrc_stats ns;

	if (stp_imgsrc_stats(src, &ns))
		return;
	add(t, "net_requests=%llu\nnet_retries=%llu\nnet_failures=%llu\nnet_bytes=%llu\n",
	    (unsigned long long)ns.requests, (unsigned long long)ns.retries,
	    (unsigned long long)ns.failures, (unsigned long long)ns.bytes);
	add(t, "disk_cache=%d\ndisk_cache_hits=%llu\ndisk_cache_bytes=%llu\n"
	    "disk_cache_rejected=%llu\n", ns.disk_cache, (unsigned long long)ns.cache_hits,
	    (unsigned long long)ns.cache_bytes, (unsigned long long)ns.cache_rejected);
}

/* Reads that failed, and the lines that said so (readfail.h). */
static void add_read_failures(struct text *t, struct stp_readfail *readfail)
{
	struct stp_readfail_stats rs;

	stp_readfail_stats(readfail, &rs);
	add(t, "read_failures=%llu\nread_failures_logged=%llu\nread_failures_suppressed=%llu\n"
	    "read_failures_unsent=%llu\n", (unsigned long long)rs.failures,
	    (unsigned long long)rs.logged, (unsigned long long)rs.suppressed,
	    (unsigned long long)rs.unsent);
}

int stp_status_format(const struct stp_image *img, struct stp_cache *cache,
		      struct stp_warmer *warmer, struct stp_filler *filler,
		      struct stp_inodes *inodes, struct stp_readfail *readfail, unsigned workers_set,
		      char *buf, size_t len)
{
	struct text t = { buf, len, 0, 0 };
	struct stp_cache_stats cs;
	struct stp_warm_status ws;
	struct stp_fill_status fs;
	struct stp_metapages_stats ms;

	if (!len)
		return -ERANGE;
	buf[0] = 0;
	stp_cache_stats(cache, &cs);
	stp_warm_status(warmer, &ws);
	stp_fill_status(filler, &fs);
	stp_image_meta_stats(img, &ms);
	add(&t, "image=%s\npid=%d\nblock_size=%u\nmetadata_bytes=%zu\n", stp_image_path(img),
	    (int)getpid(), stp_image_block_size(img), stp_image_meta_bytes(img));
	add(&t, "meta_pages_loaded=%llu\nmeta_page_hits=%llu\nmeta_peak_bytes=%zu\n",
	    (unsigned long long)ms.loads, (unsigned long long)ms.hits, ms.peak);
	add(&t, "cache_budget=%u\ncache_resident=%u\ncache_pinned=%u\ncache_hits=%llu\n"
		"cache_misses=%llu\nblocks_decoded=%llu\nblocks_ahead=%llu\ncache_parked=%u\n",
	    cs.budget, cs.resident, cs.pinned, (unsigned long long)cs.hits,
	    (unsigned long long)cs.misses, (unsigned long long)cs.decoded,
	    (unsigned long long)cs.ahead, cs.parked);
	add(&t, "cache_decode_ns=%llu\ncache_early=%llu\n", (unsigned long long)cs.decode_ns,
	    (unsigned long long)cs.early);
	add(&t, "warm_workers_set=%u\nhot_bytes=%llu\n", workers_set,
	    (unsigned long long)stp_image_sb(img)->hot_size);
	add(&t, "warm_workers=%u\nhot_blocks=%llu\nwarmed=%llu\nwarm_held=%llu\n"
		"warm_stored_bytes=%llu\nwarm_done=%d\nwarm_full=%d\n", ws.workers,
	    (unsigned long long)ws.hot_blocks, (unsigned long long)ws.warmed,
	    (unsigned long long)ws.held, (unsigned long long)ws.store.stored_bytes, ws.done, ws.full);
	add(&t, "warm_ahead=%llu\ncache_waits=%llu\nwarm_store_failures=%llu\nwarm_store_ns=%llu\n"
		"warm_store_retries=%llu\n", (unsigned long long)ws.ahead,
	    (unsigned long long)cs.waits, (unsigned long long)ws.store.failures,
	    (unsigned long long)ws.store.ns, (unsigned long long)ws.store.retries);
	add(&t, "fill=%d\nfill_jobs=%llu\nfill_dropped=%llu\nfill_stored_bytes=%llu\n"
		"fill_cpu_ns=%llu\nfill_known=%llu\nfill_pieces=%llu\n", filler != NULL,
	    (unsigned long long)fs.jobs, (unsigned long long)fs.dropped,
	    (unsigned long long)fs.store.stored_bytes, (unsigned long long)fs.cpu_ns,
	    (unsigned long long)fs.known, (unsigned long long)fs.pieces);
	add(&t, "fill_store_retries=%llu\nfill_store_failures=%llu\n",
	    (unsigned long long)fs.store.retries, (unsigned long long)fs.store.failures);
	add(&t, "inodes_known=%llu\n", (unsigned long long)stp_inodes_count(inodes));
	add_read_failures(&t, readfail);
	add_network(&t, stp_image_src(img));
	return t.overflow ? -ERANGE : (int)t.used;
}
