/* SPDX-License-Identifier: MIT */
/* The memory a mount may take (budget.h). */
#include "budget.h"

#include <errno.h>
#include <sys/sysinfo.h>
#include <zstd.h>

#include "cache.h"
#include "fetcher.h"
#include "fill.h"
#include "inodes.h"
#include "image.h"
#include "monlog.h"
#include "mountopts.h"
#include "prime.h"
#include "pubindex.h"
#include "published.h"
#include "warm.h"

/* Besides blocks, metadata and the bookkeeping sized by the image (stp_daemon_memory),
 * what a daemon may allocate: its threads' stacks, libfuse's request buffers, zstd
 * contexts. */
#define MEM_SLACK (256ull << 20)

/* Bytes a daemon keeps by inode beyond the warmer and the filler: a bit of opened_dirs and
 * one of a tree walk's marks; priming, a slot and a hot file (prime.c); recording, a file
 * record (record.c). Generous by a few bytes, so that neither module is reached into. */
#define INODE_BYTES 1u
#define PRIME_INODE_BYTES 24u
#define RECORD_INODE_BYTES 16u

/* The kernel's memory for a store file a fetcher holds: its struct file, dentry, inode
 * and lock (store.h). */
#define STORE_FILE_BYTES 2048u

uint64_t stp_budget_books(const struct stp_mount_opts *o, const struct stp_superblock *sb)
{
	uint64_t per_inode = INODE_BYTES + (stp_prime_wanted(o) ? PRIME_INODE_BYTES : 0) +
			     (o->record ? RECORD_INODE_BYTES : 0);
	uint64_t n = per_inode * sb->inode_count + stp_inodes_memory(sb);

	if (o->warm_workers)
		n += stp_warm_memory(sb);
	if (stp_mountopts_fills(o))
		n += stp_fill_memory(sb);
	return n;
}

uint64_t stp_budget_fetcher(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			    uint64_t index_len)
{
	uint64_t buffers = (uint64_t)stp_fetcher_channels(o) * stp_cache_buffer_bytes(sb);
	/* as the store hands them (store.h; not called: the store links libcrypto) */
	uint64_t files = sb->block_count * STP_PUBINDEX_FILES_PER_BLOCK;

	if (!index_len)
		return 0;
	if (files > STP_FETCH_STORE_MAX)
		files = STP_FETCH_STORE_MAX;
	return index_len + (buffers < STP_PUBLISHED_BUFFERS_MAX ? buffers : STP_PUBLISHED_BUFFERS_MAX) +
	       files * STORE_FILE_BYTES;
}

/* What the fetcher may hold beyond its fixed part, as its hard RLIMIT_DATA DATA_MAX
 * allows (0: no fetcher), or as its HELLO says if that is more. */
static uint64_t fetcher_bound(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			      uint64_t index_len, uint64_t data_max)
{
	uint64_t said = stp_budget_fetcher(o, sb, index_len);
	uint64_t fixed = stp_fetcher_data_fixed(stp_fetcher_channels(o));
	uint64_t may = data_max > fixed ? data_max - fixed : 0;

	if (may > stp_fetcher_data_variable_max()) /* the most it is started with */
		may = stp_fetcher_data_variable_max();
	return may > said ? may : said;
}

int stp_budget_check(const struct stp_mount_opts *o, const struct stp_superblock *sb,
		     uint64_t index_len, uint64_t data_max, const char *prog, uint64_t *limit)
{
	uint64_t fetcher = fetcher_bound(o, sb, index_len, data_max);
	uint64_t blocks = (uint64_t)stp_mountopts_cache_budget(o, sb) + stp_mountopts_cache_extra(o);
	uint64_t meta = stp_image_meta_memory(sb, o->meta_cache > STP_IMAGE_WALK_BUDGET ?
						  o->meta_cache : STP_IMAGE_WALK_BUDGET);
	/* each a whole buffer, whatever its block's size: the block and zstd's margin */
	uint64_t books = stp_budget_books(o, sb);
	uint64_t need = blocks * stp_cache_buffer_bytes(sb) + meta + 2 * sb->dict_size + books +
			MEM_SLACK;

	/* verified, each decode in flight holds its block's stored bytes apart (decompress.c) */
	if (o->verify)
		need += blocks * ZSTD_COMPRESSBOUND((uint64_t)1 << sb->block_log);
	struct sysinfo si;

	if (!sysinfo(&si) && need + fetcher > (uint64_t)si.totalram * si.mem_unit / 2) {
		stp_monlog_say(prog, "%s: this mount may need %llu MiB (%llu blocks of %u KiB, %llu MiB "
		    "of metadata and %llu MiB to track %llu blocks and %u inodes, %llu MiB for the "
		    "fetcher's index and blocks), more than half of this machine's memory; lower "
		    "cache_budget= or warm_workers=",
		    stp_monlog_image(o), (unsigned long long)((need + fetcher) >> 20),
		    (unsigned long long)blocks, (1u << sb->block_log) >> 10,
		    (unsigned long long)(meta >> 20), (unsigned long long)(books >> 20),
		    (unsigned long long)sb->block_count, sb->inode_count,
		    (unsigned long long)(fetcher >> 20));
		return -ENOMEM;
	}
	*limit = need;
	return 0;
}
