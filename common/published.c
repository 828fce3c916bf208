/* SPDX-License-Identifier: MIT */
/* A published image served from its index and its blocks (published.h). */
#include "published.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "delta.h"
#include "format.h"
#include "hash.h"
#include "hasher.h"
#include "http.h"
#include "imgsrc.h"
#include "pubindex.h"
#include "util.h"

/* Blocks are fetched one thread at a time per stripe (block number modulo STRIPES): a
 * block two reads want at once is fetched once, then read back from the store. */
#define STRIPES 64u
/* Block buffers kept for the next block rather than freed: a fresh one costs its
 * zero-filled pages, which on a loaded machine costs more than the block's hash. */
#define SPARES 4u
/* Content buffers kept (a delta's block's decoded size each, 32 MiB at the defaults): few,
 * as they stay resident once the rebuilds are over. */
#define CONTENT_SPARES 2u

struct stp_published {
	struct stp_http *h;
	uint8_t *idx;             /* the index file */
	size_t len;
	struct stp_pubindex_header hdr;
	const uint8_t *sb;        /* the superblock copy in IDX */
	const uint8_t *tail;      /* IMAGE[tail_offset, image_size) in IDX */
	uint64_t *offsets;        /* each block's offset, for the search */
	uint64_t block_max;       /* the largest stored_size, at least 1 */
	int *store;               /* each block's file in the store, or -1: under its stripe */
	char *base, *shown;
	pthread_mutex_t stripes[STRIPES];
	pthread_mutex_t lock;     /* buffered, buffers_max, spares, hits, rejected, room */
	pthread_cond_t freed;
	uint64_t buffered;        /* bytes of block buffers held (block_max each), spares too */
	uint64_t buffers_max;     /* ... at most */
	void *spares[SPARES];     /* buffers given back, for the next block */
	unsigned nspares;
	uint64_t hits, rejected;
	uint64_t room;            /* bytes it may still write into the store */
	/* deltas (index version 2): the distinct base hashes, sorted, and their store
	 * files (under LOCK); the prefix a delta is applied to, one at a time (under
	 * REBUILD) */
	uint8_t (*bases)[STP_PUBINDEX_HASH_LEN];
	uint64_t nbases;
	int *base_fd;
	int *delta_fd;            /* each delta file's in the store, or -1 (under LOCK) */
	int *content_fd;          /* each rebuilt content's, or -1 (under LOCK) */
	/* the slots past the bases as offered to the store, kind << 62 | number
	 * (stp_published_order_slots; used by the thread that hands the store alone) */
	uint64_t *order, norder;
	uint64_t content_max, delta_max;
	pthread_mutex_t rebuild;
	uint8_t *prefix, *base_buf;
	/* the bases whose contents the prefix holds, in order, from the last rebuild (under
	 * REBUILD): a delta that shares a base with the one before decodes it once */
	uint8_t held[STP_PUBINDEX_BASES_MAX][STP_PUBINDEX_HASH_LEN];
	size_t held_len[STP_PUBINDEX_BASES_MAX];
	unsigned nheld;
	void *content_spares[CONTENT_SPARES]; /* content buffers given back (under LOCK) */
	unsigned ncontent_spares;
};

static int why_set(char *why, size_t whylen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int why_set(char *why, size_t whylen, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return err;
}

bool stp_published_is_index(const void *head, size_t len)
{
	return len >= STP_PUBINDEX_MAGIC_LEN &&
	       !memcmp(head, STP_PUBINDEX_MAGIC, STP_PUBINDEX_MAGIC_LEN);
}

static int by_hash(const void *a, const void *b)
{
	return memcmp(a, b, STP_PUBINDEX_HASH_LEN);
}

/* Kinds of store slots (published.h), as the order table holds them. */
enum slot_kind { SLOT_BASE, SLOT_BLOCK, SLOT_DELTA, SLOT_CONTENT, SLOT_NONE };
#define SLOT_SHIFT 62

/* The slots past the bases, in the order a store is offered them until
 * stp_published_order_slots knows better: the blocks, the delta files, the contents. */
static int slot_table(struct stp_published *p)
{
	uint64_t n = p->hdr.block_count, nd = p->hdr.delta_count;

	p->order = calloc(n + 2 * nd ? n + 2 * nd : 1, sizeof(*p->order));
	if (!p->order)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		p->order[p->norder++] = (uint64_t)SLOT_BLOCK << SLOT_SHIFT | i;
	for (uint64_t j = 0; j < nd; j++)
		p->order[p->norder++] = (uint64_t)SLOT_DELTA << SLOT_SHIFT | j;
	for (uint64_t j = 0; j < nd; j++)
		p->order[p->norder++] = (uint64_t)SLOT_CONTENT << SLOT_SHIFT | j;
	return 0;
}

/* The distinct bases the delta entries name, sorted, each with a store slot; and the
 * largest content and delta, which size a rebuild's buffers. */
static int base_table(struct stp_published *p)
{
	uint64_t nd = p->hdr.delta_count, n = 0;

	p->bases = calloc(nd ? 2 * nd : 1, sizeof(*p->bases));
	p->base_fd = calloc(nd ? 2 * nd : 1, sizeof(*p->base_fd));
	p->delta_fd = calloc(nd ? nd : 1, sizeof(*p->delta_fd));
	p->content_fd = calloc(nd ? nd : 1, sizeof(*p->content_fd));
	if (!p->bases || !p->base_fd || !p->delta_fd || !p->content_fd)
		return -ENOMEM;
	for (uint64_t i = 0; i < nd; i++) {
		struct stp_pubindex_delta d;

		if (stp_pubindex_delta_at(p->idx, &p->hdr, i, &d))
			return -EUCLEAN;
		for (uint32_t k = 0; k < d.base_count; k++)
			memcpy(p->bases[n++], d.base_sha256[k], STP_PUBINDEX_HASH_LEN);
		if (d.content_size > p->content_max)
			p->content_max = d.content_size;
		if (d.delta_size > p->delta_max)
			p->delta_max = d.delta_size;
		p->delta_fd[i] = p->content_fd[i] = -1;
	}
	qsort(p->bases, n, sizeof(*p->bases), by_hash);
	for (uint64_t i = 0; i < n; i++)
		if (!p->nbases || memcmp(p->bases[p->nbases - 1], p->bases[i], STP_PUBINDEX_HASH_LEN))
			memmove(p->bases[p->nbases++], p->bases[i], STP_PUBINDEX_HASH_LEN);
	for (uint64_t i = 0; i < p->nbases; i++)
		p->base_fd[i] = -1;
	return slot_table(p);
}

/* The table of offsets and the store slots, from the index stp_pubindex_check passed. */
static int index_tables(struct stp_published *p)
{
	uint64_t n = p->hdr.block_count;

	p->block_max = 1;
	p->offsets = calloc(n ? n : 1, sizeof(*p->offsets));
	p->store = calloc(n ? n : 1, sizeof(*p->store));
	if (!p->offsets || !p->store)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		struct stp_pubindex_entry e;

		if (stp_pubindex_entry_at(p->idx, i, &e))
			return -EUCLEAN;
		p->offsets[i] = e.offset;
		p->store[i] = -1;
		if (e.stored_size > p->block_max)
			p->block_max = e.stored_size;
	}
	p->sb = p->idx + stp_pubindex_sb_offset(n);
	p->tail = p->idx + stp_pubindex_tail_file_offset(n);
	return base_table(p);
}

static int load_index(struct stp_published *p, bool no_deltas, char *why, size_t whylen)
{
	uint64_t size = stp_http_size(p->h);
	const char *reason = NULL;
	int err;

	if (size > STP_PUBLISHED_INDEX_MAX)
		return why_set(why, whylen, -EFBIG, "an index of %llu bytes, over the %llu MiB "
			       "a mount takes", (unsigned long long)size,
			       (unsigned long long)(STP_PUBLISHED_INDEX_MAX >> 20));
	p->len = (size_t)size;
	p->idx = malloc(p->len ? p->len : 1);
	if (!p->idx)
		return why_set(why, whylen, -ENOMEM, "out of memory for the index");
	err = stp_http_get(p->h, p->idx, p->len, 0, NULL, why, whylen);
	if (err)
		return err;
	/* bounded by the bytes fetched, never by the count the header claims */
	err = stp_pubindex_check(p->idx, p->len, &p->hdr, NULL, &reason);
	if (err)
		return why_set(why, whylen, err, "a damaged published index: %s",
			       reason ? reason : stp_strerror(err));
	if (no_deltas) /* checked all the same; then no table, slot or rebuild sees one */
		p->hdr.delta_count = 0;
	err = index_tables(p);
	return err ? why_set(why, whylen, err, "the index: %s", stp_strerror(err)) : 0;
}

static int load(struct stp_http *h, const char *base, const char *shown, bool no_deltas,
		struct stp_published **out, char *why, size_t whylen)
{
	struct stp_published *p = calloc(1, sizeof(*p));
	int err;

	if (!p || !(p->base = strdup(base)) || !(p->shown = strdup(shown))) {
		if (p)
			free(p->base);
		free(p);
		return why_set(why, whylen, -ENOMEM, "out of memory");
	}
	p->h = h;
	p->buffers_max = STP_PUBLISHED_BUFFERS_MAX;
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_init(&p->stripes[i], NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->rebuild, NULL);
	pthread_cond_init(&p->freed, NULL);
	err = load_index(p, no_deltas, why, whylen);
	if (err) {
		stp_published_free(p);
		return err;
	}
	*out = p;
	return 0;
}

int stp_published_load(struct stp_http *h, const char *base, const char *shown,
		       struct stp_published **out, char *why, size_t whylen)
{
	return load(h, base, shown, false, out, why, whylen);
}

/* URL's directory with its '/', without the query or fragment (the blocks lie there):
 * "scheme://authority/" when the path is empty, so that a block's URL always names the
 * index's host, never one made of the path (the credentials go where it says). */
static char *url_dir(const char *url)
{
	const char *sep = strstr(url, "://");
	size_t auth = sep ? (size_t)(sep - url) + 3 : 0;
	size_t path = auth + strcspn(url + auth, "/?#"), n = strcspn(url, "?#");
	char *dir;

	if (url[path] != '/')
		return asprintf(&dir, "%.*s/", (int)path, url) < 0 ? NULL : dir;
	dir = strndup(url, n);
	if (dir)
		strrchr(dir, '/')[1] = '\0'; /* the path's '/' at least */
	return dir;
}

int stp_published_open(struct stp_http *h, const char *url, const char *shown,
		       bool no_deltas, struct stp_published **out, char *why, size_t whylen)
{
	uint8_t head[STP_PUBINDEX_MAGIC_LEN];
	char *base, *shown_dir;
	int err;

	*out = NULL;
	if (stp_http_size(h) < sizeof(head) ||
	    stp_http_get(h, head, sizeof(head), 0, NULL, why, whylen) ||
	    !stp_published_is_index(head, sizeof(head)))
		return 0; /* not an index: the one-file image reader says what is wrong */
	base = url_dir(url);
	shown_dir = url_dir(shown);
	err = base && shown_dir ? load(h, base, shown_dir, no_deltas, out, why, whylen) :
		why_set(why, whylen, -ENOMEM, "out of memory");
	free(base);
	free(shown_dir);
	return err;
}

void stp_published_free(struct stp_published *p)
{
	if (!p)
		return;
	for (uint64_t i = 0; p->store && i < p->hdr.block_count; i++)
		if (p->store[i] >= 0)
			close(p->store[i]);
	for (uint64_t i = 0; p->base_fd && i < p->nbases; i++)
		if (p->base_fd[i] >= 0)
			close(p->base_fd[i]);
	for (uint64_t i = 0; p->delta_fd && i < p->hdr.delta_count; i++)
		if (p->delta_fd[i] >= 0)
			close(p->delta_fd[i]);
	for (uint64_t i = 0; p->content_fd && i < p->hdr.delta_count; i++)
		if (p->content_fd[i] >= 0)
			close(p->content_fd[i]);
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&p->stripes[i]);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->rebuild);
	free(p->bases);
	free(p->base_fd);
	free(p->delta_fd);
	free(p->content_fd);
	free(p->order);
	free(p->prefix);
	free(p->base_buf);
	for (unsigned k = 0; k < p->ncontent_spares; k++)
		free(p->content_spares[k]);
	pthread_cond_destroy(&p->freed);
	for (unsigned i = 0; i < p->nspares; i++)
		free(p->spares[i]);
	free(p->offsets);
	free(p->store);
	free(p->idx);
	free(p->base);
	free(p->shown);
	free(p);
}

uint64_t stp_published_size(const struct stp_published *p)
{
	return p->hdr.image_size;
}

uint64_t stp_published_blocks(const struct stp_published *p)
{
	return p->hdr.block_count;
}

uint64_t stp_published_index_len(const struct stp_published *p)
{
	return p->len;
}

void stp_published_set_buffers(struct stp_published *p, uint64_t bytes)
{
	if (bytes < p->block_max)
		bytes = p->block_max;
	pthread_mutex_lock(&p->lock);
	p->buffers_max = bytes < STP_PUBLISHED_BUFFERS_MAX ? bytes : STP_PUBLISHED_BUFFERS_MAX;
	pthread_mutex_unlock(&p->lock);
}

uint64_t stp_published_block_max(const struct stp_published *p)
{
	return p->block_max;
}

/* Slot I as the store is offered it (published.h): *KIND which, *AT its number among
 * them. */
static enum slot_kind slot_of(const struct stp_published *p, uint64_t i, uint64_t *at)
{
	*at = i;
	if (i < p->nbases)
		return SLOT_BASE;
	i -= p->nbases;
	if (i >= p->norder)
		return SLOT_NONE;
	*at = p->order[i] & ((1ull << SLOT_SHIFT) - 1);
	return (enum slot_kind)(p->order[i] >> SLOT_SHIFT);
}

const uint8_t *stp_published_hash(const struct stp_published *p, uint64_t i)
{
	const uint8_t *delta;
	uint64_t at;
	enum slot_kind kind = slot_of(p, i, &at);

	switch (kind) {
	case SLOT_BASE:
		return p->bases[at];
	case SLOT_BLOCK:
		return p->idx + STP_PUBINDEX_HDR_SIZE + at * STP_PUBINDEX_ENTRY_SIZE + 16;
	case SLOT_DELTA:
	case SLOT_CONTENT:
		/* the delta entry's delta_sha256, then its content_sha256 (stipple(5)) */
		delta = p->idx + stp_pubindex_delta_offset(&p->hdr) + at * STP_PUBINDEX_DELTA_SIZE;
		return delta + (kind == SLOT_DELTA ? 24 : 56);
	default:
		return NULL;
	}
}

uint64_t stp_published_slots(const struct stp_published *p)
{
	return p->nbases + p->norder;
}

bool stp_published_has_deltas(const struct stp_published *p)
{
	return p->hdr.delta_count > 0;
}

uint64_t stp_published_base_slots(const struct stp_published *p)
{
	return p->nbases;
}

uint64_t stp_published_file_max(const struct stp_published *p)
{
	return p->content_max > p->block_max ? p->content_max : p->block_max;
}

uint64_t stp_published_delta_memory(const struct stp_published *p, unsigned n)
{
	if (!p->nbases)
		return 0;
	/* the prefix (two bases) and a base's stored bytes, held by one rebuild at a time;
	 * the content served and its delta, by each channel at once */
	return 2 * p->content_max + stp_block_stored_max(p->content_max) +
	       n * (p->content_max + p->delta_max);
}

/* A store file of slot I (a base's, a delta file's or a content's): the first kept. */
static void set_extra(struct stp_published *p, enum slot_kind kind, uint64_t at, int fd)
{
	int *slot = kind == SLOT_BASE ? &p->base_fd[at] : kind == SLOT_DELTA ?
		    &p->delta_fd[at] : kind == SLOT_CONTENT ? &p->content_fd[at] : NULL;

	pthread_mutex_lock(&p->lock);
	if (slot && *slot < 0) {
		*slot = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&p->lock);
	if (fd >= 0)
		close(fd);
}

void stp_published_set_store(struct stp_published *p, uint64_t i, int fd)
{
	pthread_mutex_t *stripe;
	enum slot_kind kind = slot_of(p, i, &i);

	if (kind != SLOT_BLOCK) {
		set_extra(p, kind, i, fd);
		return;
	}
	stripe = &p->stripes[i % STRIPES];
	pthread_mutex_lock(stripe);
	if (p->store[i] < 0) {
		p->store[i] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(stripe);
	if (fd >= 0)
		close(fd);
}

void stp_published_set_store_room(struct stp_published *p, uint64_t bytes)
{
	pthread_mutex_lock(&p->lock);
	p->room = bytes;
	pthread_mutex_unlock(&p->lock);
}

void stp_published_store_stats(struct stp_published *p, uint64_t *hits, uint64_t *rejected)
{
	pthread_mutex_lock(&p->lock);
	*hits = p->hits;
	*rejected = p->rejected;
	pthread_mutex_unlock(&p->lock);
}

/* The block holding OFF (within [256, tail_offset)). */
static uint64_t block_at(const struct stp_published *p, uint64_t off)
{
	uint64_t lo = 0, hi = p->hdr.block_count;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (p->offsets[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The time STP_HTTP_TICK_MS from now, for a timed wait. */
static struct timespec tick_deadline(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += STP_HTTP_TICK_MS / 1000;
	return ts;
}

static void tick_now(const struct stp_http_tick *tick)
{
	if (tick)
		tick->fn(tick->ctx);
}

/* Locks M, ticking while it waits. */
static void lock_ticking(pthread_mutex_t *m, const struct stp_http_tick *tick)
{
	for (;;) {
		struct timespec ts = tick_deadline();

		if (pthread_mutex_timedlock(m, &ts) != ETIMEDOUT)
			return;
		tick_now(tick);
	}
}

/* Gives BUF (NULL: a buffer buffer_take counted but could not allocate) back: kept as a
 * spare while there is room for one, else freed. */
static void buffer_give(struct stp_published *p, void *buf)
{
	pthread_mutex_lock(&p->lock);
	if (buf && p->nspares < SPARES) {
		p->spares[p->nspares++] = buf;
		buf = NULL;
	} else {
		p->buffered -= p->block_max;
	}
	pthread_cond_broadcast(&p->freed);
	pthread_mutex_unlock(&p->lock);
	free(buf);
}

/* A block buffer of p->block_max bytes: a spare, else a new one once it fits the bound. */
static void *buffer_take(struct stp_published *p, const struct stp_http_tick *tick)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct timespec ts = tick_deadline();

		if (p->nspares) {
			buf = p->spares[--p->nspares];
			break;
		}
		if (!p->buffered || p->buffered + p->block_max <= p->buffers_max) {
			p->buffered += p->block_max;
			break;
		}
		if (pthread_cond_timedwait(&p->freed, &p->lock, &ts) == ETIMEDOUT)
			tick_now(tick);
	}
	pthread_mutex_unlock(&p->lock);
	if (!buf && !(buf = malloc(p->block_max)))
		buffer_give(p, NULL);
	return buf;
}

void stp_published_put(struct stp_published *p, struct stp_published_part *part)
{
	if (!part->owned)
		return;
	buffer_give(p, part->owned);
	part->owned = NULL;
}

static bool hash_matches(const void *buf, size_t len, const uint8_t want[32])
{
	uint8_t have[STP_SIG_HASH_SIZE];

	stp_sign_hash(buf, len, have);
	return !CRYPTO_memcmp(have, want, sizeof(have));
}

/* Block E from its file in the store FD into BUF, when the file holds exactly its bytes;
 * a file of another size or with other bytes is counted, and the block fetched again
 * (such a file is read-only to the fetcher: it stays until trimmed, store.h).
 * Read, never mapped: the store's owner may cut the file short or change it at any time,
 * which must cost a fetch, not a SIGBUS or bytes changed after their check. An empty
 * file is a block not stored yet. */
static bool from_store(struct stp_published *p, int fd, const struct stp_pubindex_entry *e,
		       void *buf)
{
	struct stat st;
	bool ok;

	if (fd < 0 || stp_fd_stat(fd, &st) || st.st_size == 0) /* confined: util.h */
		return false;
	ok = (uint64_t)st.st_size == e->stored_size &&
	     !stp_pread_full(fd, buf, e->stored_size, 0) &&
	     hash_matches(buf, e->stored_size, e->sha256);
	pthread_mutex_lock(&p->lock);
	if (ok)
		p->hits++;
	else
		p->rejected++;
	pthread_mutex_unlock(&p->lock);
	return ok;
}

/* What a block of LEN bytes costs the store's disk: whole file system blocks, as the
 * trim counts them (st_blocks), never less than one. */
static uint64_t disk_cost(uint32_t len)
{
	const uint64_t unit = STP_PUBLISHED_STORE_UNIT;

	return ((uint64_t)len + unit - 1) / unit * unit;
}

/* Keeps a checked block in its store file while the room lasts (a failure only costs a
 * later fetch). */
static void to_store(struct stp_published *p, int fd, const void *buf, uint32_t len)
{
	uint64_t cost = disk_cost(len);
	bool room;

	pthread_mutex_lock(&p->lock);
	room = fd >= 0 && p->room >= cost;
	if (room)
		p->room -= cost;
	pthread_mutex_unlock(&p->lock);
	if (room && !stp_pwrite_full(fd, buf, len, 0) && !ftruncate(fd, len))
		return;
	if (room) { /* not written (a read-only file: store.h): the room is still there */
		pthread_mutex_lock(&p->lock);
		p->room += cost;
		pthread_mutex_unlock(&p->lock);
	}
}

/* Block E from the server, whole, checked against its hash. */
static int fetch_block(struct stp_published *p, const struct stp_pubindex_entry *e, void *buf,
		       const struct stp_http_tick *tick, unsigned *tries, char *why, size_t whylen)
{
	/* one deadline for the block, the ask past the caches included */
	uint64_t deadline = stp_http_whole_deadline(p->h, e->stored_size);
	char name[STP_PUBINDEX_NAME_MAX], *url = NULL;
	int err;

	stp_pubindex_block_name(e->sha256, name);
	if (asprintf(&url, "%sblocks/%s", p->base, name) < 0)
		return why_set(why, whylen, -ENOMEM, "out of memory");
	err = stp_http_get_whole(p->h, url, buf, e->stored_size, deadline, tick, false, tries,
				 why, whylen);
	/* bytes a proxy kept may be what did not match: asked once more, past the caches */
	if (!err && !hash_matches(buf, e->stored_size, e->sha256)) {
		unsigned more = 0;

		err = stp_http_get_whole(p->h, url, buf, e->stored_size, deadline, tick, true, &more,
					 why, whylen);
		if (tries)
			*tries += more;
		if (!err && !hash_matches(buf, e->stored_size, e->sha256))
			err = why_set(why, whylen, -EIO, "its bytes do not match its SHA-256, asked "
				      "again past the caches; refused");
	}
	free(url);
	if (err) {
		char cause[160];

		snprintf(cause, sizeof(cause), "%s", why);
		return why_set(why, whylen, err, "block %sblocks/%s: %s", p->shown, name, cause);
	}
	return 0;
}

/* Block I whole into PART: from the store, else from the server (then kept). One thread
 * per stripe at a time: a block two reads want at once is fetched once, the second read
 * finding it in the store. */
static int get_block(struct stp_published *p, uint64_t i, const struct stp_http_tick *tick,
		     struct stp_published_part *part, char *why, size_t whylen)
{
	pthread_mutex_t *stripe = &p->stripes[i % STRIPES];
	struct stp_pubindex_entry e;
	int err;

	if (stp_pubindex_entry_at(p->idx, i, &e))
		return why_set(why, whylen, -EIO, "block %llu: a damaged entry", (unsigned long long)i);
	/* the buffer is taken before the stripe: never wait for buffers holding one */
	part->owned = buffer_take(p, tick);
	if (!part->owned)
		return why_set(why, whylen, -ENOMEM, "out of memory for a block of %u bytes",
			       e.stored_size);
	part->owned_len = e.stored_size;
	lock_ticking(stripe, tick);
	part->stored = from_store(p, p->store[i], &e, part->owned);
	err = part->stored ? 0 : fetch_block(p, &e, part->owned, tick, &part->tries, why, whylen);
	if (!err && !part->stored)
		to_store(p, p->store[i], part->owned, e.stored_size);
	pthread_mutex_unlock(stripe);
	if (err)
		stp_published_put(p, part);
	return err;
}

int stp_published_get(struct stp_published *p, uint64_t off, uint64_t max,
		      const struct stp_http_tick *tick, struct stp_published_part *part,
		      char *why, size_t whylen)
{
	const struct stp_pubindex_header *h = &p->hdr;
	uint64_t i, start, end;
	int err;

	*part = (struct stp_published_part){ NULL, 0, NULL, 0, 0, false };
	if (off >= h->image_size)
		return why_set(why, whylen, STP_IMGSRC_END, "byte %llu lies past the end",
			       (unsigned long long)off);
	if (off < STP_SB_SIZE) {
		part->ptr = p->sb + off;
		part->len = STP_SB_SIZE - off;
	} else if (off >= h->tail_offset) {
		part->ptr = p->tail + (off - h->tail_offset);
		part->len = h->image_size - off;
	} else {
		i = block_at(p, off);
		err = get_block(p, i, tick, part, why, whylen);
		if (err)
			return err;
		start = p->offsets[i];
		end = start + part->owned_len;
		part->ptr = (const uint8_t *)part->owned + (off - start);
		part->len = end - off;
	}
	if (part->len > max)
		part->len = max;
	return 0;
}

/* The delta entry of block I, by a search of the table (ascending by block). */
static bool find_delta(const struct stp_published *p, uint64_t i, struct stp_pubindex_delta *d,
		       uint64_t *at)
{
	uint64_t lo = 0, hi = p->hdr.delta_count;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (stp_pubindex_delta_at(p->idx, &p->hdr, mid, d))
			return false;
		if (d->block == i) {
			*at = mid;
			return true;
		}
		if (d->block < i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* The store file of the base hashing to SHA, or -1. */
static int base_file(struct stp_published *p, const uint8_t sha[STP_PUBINDEX_HASH_LEN])
{
	const uint8_t (*at)[STP_PUBINDEX_HASH_LEN] = bsearch(sha, p->bases, p->nbases,
							      sizeof(*p->bases), by_hash);
	int fd;

	if (!at)
		return -1;
	pthread_mutex_lock(&p->lock);
	fd = p->base_fd[at - p->bases];
	pthread_mutex_unlock(&p->lock);
	return fd;
}

/* The buffers of a rebuild, made on the first (under REBUILD); those a lack of memory
 * left unmade are tried again on the next. */
static int rebuild_buffers(struct stp_published *p)
{
	if (!p->prefix)
		p->prefix = malloc(2 * p->content_max);
	if (!p->base_buf)
		p->base_buf = malloc(stp_block_stored_max(p->content_max));
	return p->prefix && p->base_buf ? 0 : -ENOMEM;
}

/* Base SHA's content into DST (DCAP bytes at most), *LEN bytes, from its store file read
 * into STORED (CAP bytes) and checked against SHA: -ENOENT when the store does not hold
 * it whole. Thread-safe. */
static int decode_base(struct stp_published *p, const uint8_t sha[STP_PUBINDEX_HASH_LEN],
		       uint8_t *stored, size_t cap, uint8_t *dst, size_t dcap, size_t *len)
{
	int fd = base_file(p, sha);
	struct stat st;

	if (fd < 0 || stp_fd_stat(fd, &st) || st.st_size == 0 || (uint64_t)st.st_size > cap ||
	    stp_pread_full(fd, stored, (size_t)st.st_size, 0) ||
	    !hash_matches(stored, (size_t)st.st_size, sha) ||
	    stp_delta_content(stored, (size_t)st.st_size, dst, dcap, len))
		return -ENOENT;
	return 0;
}

/* Base SHA's content after the PLEN bytes of the prefix (decode_base). */
static int load_base(struct stp_published *p, const uint8_t sha[STP_PUBINDEX_HASH_LEN],
		     size_t *plen)
{
	size_t got;

	if (decode_base(p, sha, p->base_buf, stp_block_stored_max(p->content_max),
			p->prefix + *plen, p->content_max, &got))
		return -ENOENT;
	*plen += got;
	return 0;
}

/* The store file of delta J's slot of KIND (a delta file or a rebuilt content). */
static int extra_fd(struct stp_published *p, enum slot_kind kind, uint64_t j)
{
	int fd;

	pthread_mutex_lock(&p->lock);
	fd = kind == SLOT_DELTA ? p->delta_fd[j] : p->content_fd[j];
	pthread_mutex_unlock(&p->lock);
	return fd;
}

/* Delta J (entry D) into BUF: from its file in the store, else from the server (then
 * kept there), checked against its hash either way. */
static int get_delta(struct stp_published *p, uint64_t j, const struct stp_pubindex_delta *d,
		     void *buf, const struct stp_http_tick *tick, unsigned *tries, char *why,
		     size_t whylen)
{
	struct stp_pubindex_entry e = { .stored_size = d->delta_size };
	int fd = extra_fd(p, SLOT_DELTA, j), err;

	memcpy(e.sha256, d->delta_sha256, sizeof(e.sha256));
	if (from_store(p, fd, &e, buf))
		return 0;
	err = fetch_block(p, &e, buf, tick, tries, why, whylen);
	if (!err)
		to_store(p, fd, buf, d->delta_size);
	return err;
}

/* Whether the store holds a file with bytes for each of D's bases (each is checked when
 * read): else its delta is not worth fetching. */
static bool bases_held(struct stp_published *p, const struct stp_pubindex_delta *d)
{
	struct stat st;

	for (uint32_t k = 0; k < d->base_count; k++) {
		int fd = base_file(p, d->base_sha256[k]);

		if (fd < 0 || stp_fd_stat(fd, &st) || st.st_size == 0)
			return false;
	}
	return true;
}

/* Which of the last rebuild's bases SHA is (0 at the prefix's start, 1 right after
 * it), or -1. */
static int held_as(const struct stp_published *p, const uint8_t *sha)
{
	for (unsigned k = 0; k < p->nheld; k++)
		if (!memcmp(p->held[k], sha, STP_PUBINDEX_HASH_LEN))
			return (int)k;
	return -1;
}

static void hold_base(struct stp_published *p, unsigned k, const uint8_t *sha, size_t len)
{
	memcpy(p->held[k], sha, STP_PUBINDEX_HASH_LEN);
	p->held_len[k] = len;
	p->nheld = k + 1;
}

/* D's first base at the prefix's start: kept from the last rebuild where it can be
 * (moved down when it was second), else read, checked and decoded. A second base the
 * last rebuild also held is parked in the prefix's upper half meanwhile (each content
 * fits half): *PARKED its length, else 0. Publish puts first the base with the most
 * bytes, so a file read in order needs [k+1, k] after [k, k-1]. */
static int place_first(struct stp_published *p, const struct stp_pubindex_delta *d,
		       size_t *plen, size_t *parked)
{
	int h0 = held_as(p, d->base_sha256[0]);
	int h1 = d->base_count > 1 ? held_as(p, d->base_sha256[1]) : -1;
	size_t len0 = p->nheld ? p->held_len[0] : 0;

	*plen = 0;
	*parked = 0;
	if (h0 == 0) {
		*plen = p->held_len[0];
	} else if (h0 == 1) { /* a second base held at the start is overwritten: read again */
		memmove(p->prefix, p->prefix + len0, p->held_len[1]);
		*plen = p->held_len[1];
	} else {
		if (h1 >= 0) {
			*parked = p->held_len[h1];
			memmove(p->prefix + p->content_max, p->prefix + (h1 ? len0 : 0), *parked);
		}
		p->nheld = 0;
		if (load_base(p, d->base_sha256[0], plen))
			return -ENOENT;
	}
	hold_base(p, 0, d->base_sha256[0], *plen);
	return 0;
}

/* A second base decoded beside the first, on a thread of its own (both CPUs of a small
 * machine): its stored bytes go into the content's buffer, unused until the apply, its
 * content into the prefix's upper half. */
struct second_base {
	struct stp_published *p;
	const uint8_t *sha;
	uint8_t *stored;
	size_t cap, len;
	int err;
};

#define SECOND_BASE_STACK ((size_t)256 << 10)

static void *decode_second(void *arg)
{
	struct second_base *b = arg;

	b->err = decode_base(b->p, b->sha, b->stored, b->cap, b->p->prefix + b->p->content_max,
			     b->p->content_max, &b->len);
	return NULL;
}

/* D's two bases, neither held, decoded at once (SCRATCH, SCRATCH_LEN bytes: the content's
 * buffer); where no thread can be started, one after the other. */
static int place_both(struct stp_published *p, const struct stp_pubindex_delta *d,
		      uint8_t *scratch, size_t scratch_len, size_t *plen)
{
	struct second_base b = { p, d->base_sha256[1], scratch, scratch_len, 0, 0 };
	pthread_t t;
	bool apart = !stp_thread_create_blocked(&t, SECOND_BASE_STACK, decode_second, &b);
	int err;

	if (!apart)
		decode_second(&b);
	p->nheld = 0;
	*plen = 0;
	err = load_base(p, d->base_sha256[0], plen);
	if (apart)
		pthread_join(t, NULL);
	if (err)
		return -ENOENT;
	hold_base(p, 0, d->base_sha256[0], *plen);
	if (b.err) { /* stored bytes larger than SCRATCH, say: the usual way */
		size_t at = *plen;

		if (load_base(p, d->base_sha256[1], plen))
			return -ENOENT;
		b.len = *plen - at;
	} else {
		memmove(p->prefix + *plen, p->prefix + p->content_max, b.len);
		*plen += b.len;
	}
	hold_base(p, 1, d->base_sha256[1], b.len);
	return 0;
}

/* The bases of D in order into the prefix, *PLEN bytes (under REBUILD): what the last
 * rebuild decoded is kept, so that the bases two deltas share are decoded once, and two
 * new ones are decoded side by side (SCRATCH: place_both). */
static int place_bases(struct stp_published *p, const struct stp_pubindex_delta *d,
		       uint8_t *scratch, size_t scratch_len, size_t *plen)
{
	bool in_place = d->base_count > 1 && p->nheld == 2 &&
			!memcmp(p->held[0], d->base_sha256[0], STP_PUBINDEX_HASH_LEN) &&
			!memcmp(p->held[1], d->base_sha256[1], STP_PUBINDEX_HASH_LEN);
	size_t parked, at;
	int err;

	if (in_place) {
		*plen = p->held_len[0] + p->held_len[1];
		return 0;
	}
	if (d->base_count > 1 && held_as(p, d->base_sha256[0]) < 0 &&
	    held_as(p, d->base_sha256[1]) < 0)
		return place_both(p, d, scratch, scratch_len, plen);
	if ((err = place_first(p, d, plen, &parked)) || d->base_count < 2)
		return err;
	at = *plen;
	if (parked) {
		memmove(p->prefix + at, p->prefix + p->content_max, parked);
		*plen = at + parked;
	} else if (load_base(p, d->base_sha256[1], plen)) {
		return -ENOENT;
	}
	hold_base(p, 1, d->base_sha256[1], *plen - at);
	return 0;
}

/* A stp_delta_step: the content's first N bytes are final, its hasher may take them. */
static void content_ready(void *ctx, size_t n)
{
	(void)ctx;
	stp_hasher_ready(n);
}

/* The bases of D into the prefix and DELTA applied to it, into OUT (under REBUILD), the
 * content hashed on this thread's helper as the apply writes it (hasher.h): *HASHING
 * says the caller has that hash to wait for. */
static int apply(struct stp_published *p, const struct stp_pubindex_delta *d,
		 const void *delta, void *out, bool *hashing)
{
	size_t plen = 0;
	int err = rebuild_buffers(p);

	*hashing = false;
	if (!err && (err = place_bases(p, d, out, d->content_size, &plen)))
		p->nheld = 0;
	if (err)
		return err;
	stp_hasher_follow(out, d->content_size); /* OUT was the bases' scratch until now */
	*hashing = true;
	if (stp_delta_apply_steps(delta, d->delta_size, p->prefix, plen, out, d->content_size,
				  content_ready, NULL)) {
		stp_hasher_ready(d->content_size); /* the helper ends; its hash is of no use */
		return -EILSEQ;
	}
	return 0;
}

/* Block D.block's content into OUT from delta J and its bases: -ENOENT for anything
 * that does not give exactly the content the index hashes. The delta is fetched before
 * REBUILD is taken (a slow server holds up this block alone), which is held only to
 * apply it. */
static int rebuild(struct stp_published *p, uint64_t j, const struct stp_pubindex_delta *d,
		   void *out, const struct stp_http_tick *tick, unsigned *tries, char *why,
		   size_t whylen)
{
	uint8_t have[STP_SIG_HASH_SIZE];
	bool hashing;
	uint8_t *delta;
	int err;

	if (!bases_held(p, d))
		return why_set(why, whylen, -ENOENT, "a base is not in the store");
	delta = malloc(d->delta_size ? d->delta_size : 1);
	if (!delta)
		return why_set(why, whylen, -ENOMEM, "out of memory for a delta");
	if (get_delta(p, j, d, delta, tick, tries, why, whylen)) {
		free(delta);
		return -ENOENT; /* WHY names the delta's URL */
	}
	lock_ticking(&p->rebuild, tick);
	err = apply(p, d, delta, out, &hashing);
	pthread_mutex_unlock(&p->rebuild);
	free(delta);
	if (hashing)
		stp_hasher_wait(have); /* mostly done: the helper followed the apply */
	if (err == -ENOMEM)
		return why_set(why, whylen, err, "out of memory for a rebuild");
	if (err == -ENOENT)
		return why_set(why, whylen, err, "a base is not in the store");
	if (err || CRYPTO_memcmp(have, d->content_sha256, sizeof(have)))
		return why_set(why, whylen, -ENOENT, "the delta of block %llu did not rebuild it",
			       (unsigned long long)d->block);
	return 0;
}

/* Block I's stored bytes are in its store file (as long as a block's: checked when
 * read, published.h), so reading it costs no rebuild. Under its stripe. */
static bool block_in_store(struct stp_published *p, uint64_t i)
{
	struct stp_pubindex_entry e;
	struct stat st;

	return p->store[i] >= 0 && !stp_pubindex_entry_at(p->idx, i, &e) &&
	       !stp_fd_stat(p->store[i], &st) && (uint64_t)st.st_size == e.stored_size;
}

/* Hands SINK the checked content OUT (D's) once. */
static void deliver(struct stp_published_sink *sink, const struct stp_pubindex_delta *d,
		    const void *out, unsigned tries)
{
	sink->rc = sink->deliver(sink->ctx, out, d->content_size, tries,
				 tries ? d->delta_size : 0);
}

/* Block I's content (delta J, entry D) into OUT and to SINK, under the block's stripe:
 * the content kept in the store, else nothing when the block's own file is there
 * (-ENOENT: the caller reads it), else rebuilt, delivered, then kept: the reader does
 * not wait for the store's write. The stripe is held while SINK sends, so the blocks
 * that share it wait for that too; the daemon reads a reply holding no lock, and a
 * broken channel fails the send, so the wait ends. */
static int content_locked(struct stp_published *p, uint64_t i, uint64_t j,
			  const struct stp_pubindex_delta *d, void *out,
			  const struct stp_http_tick *tick, struct stp_published_sink *sink,
			  unsigned *tries, char *why, size_t whylen)
{
	struct stp_pubindex_entry e = { .stored_size = d->content_size };
	int fd = extra_fd(p, SLOT_CONTENT, j), err;

	memcpy(e.sha256, d->content_sha256, sizeof(e.sha256));
	if (from_store(p, fd, &e, out)) {
		deliver(sink, d, out, 0);
		return 0;
	}
	if (block_in_store(p, i))
		return why_set(why, whylen, -ENOENT, "block %llu is in the store",
			       (unsigned long long)i);
	err = rebuild(p, j, d, out, tick, tries, why, whylen);
	if (!err) {
		deliver(sink, d, out, *tries);
		to_store(p, fd, out, d->content_size);
	}
	return err;
}

void *stp_published_content_buffer(struct stp_published *p, uint64_t len)
{
	void *buf = NULL;

	if (!len || len > p->content_max)
		return NULL;
	pthread_mutex_lock(&p->lock);
	if (p->ncontent_spares)
		buf = p->content_spares[--p->ncontent_spares];
	pthread_mutex_unlock(&p->lock);
	return buf ? buf : malloc(p->content_max);
}

void stp_published_content_done(struct stp_published *p, void *buf)
{
	if (!buf)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->ncontent_spares < CONTENT_SPARES) {
		p->content_spares[p->ncontent_spares++] = buf;
		buf = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	free(buf);
}

int stp_published_content(struct stp_published *p, uint64_t i, void *out, uint64_t len,
			  const struct stp_http_tick *tick, struct stp_published_sink *sink,
			  unsigned *tries, char *why, size_t whylen)
{
	pthread_mutex_t *stripe = &p->stripes[i % STRIPES];
	struct stp_pubindex_delta d;
	uint64_t j;
	int err;

	*tries = 0;
	if (!find_delta(p, i, &d, &j) || d.content_size != len)
		return why_set(why, whylen, -ENOENT, "block %llu has no delta",
			       (unsigned long long)i);
	/* as a block is fetched: two reads of it at once rebuild it once */
	lock_ticking(stripe, tick);
	err = content_locked(p, i, j, &d, out, tick, sink, tries, why, whylen);
	pthread_mutex_unlock(stripe);
	return err;
}

/* Appends to the order the slots of KIND (deltas' or blocks') whose flag in WANT is
 * VALUE. */
static void order_add(struct stp_published *p, enum slot_kind kind, const bool *want,
		      bool value, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++)
		if (want[i] == value)
			p->order[p->norder++] = (uint64_t)kind << SLOT_SHIFT | i;
}

void stp_published_order_slots(struct stp_published *p)
{
	uint64_t n = p->hdr.block_count, nd = p->hdr.delta_count;
	bool *usable = calloc(nd ? nd : 1, 1), *rebuilt = calloc(n ? n : 1, 1);

	for (uint64_t j = 0; usable && rebuilt && j < nd; j++) {
		struct stp_pubindex_delta d;

		if (!stp_pubindex_delta_at(p->idx, &p->hdr, j, &d) && bases_held(p, &d))
			usable[j] = rebuilt[d.block] = true;
	}
	if (usable && rebuilt) { /* else the order stays as it was */
		p->norder = 0;
		order_add(p, SLOT_CONTENT, usable, true, nd);
		order_add(p, SLOT_DELTA, usable, true, nd);
		order_add(p, SLOT_BLOCK, rebuilt, false, n);
		order_add(p, SLOT_BLOCK, rebuilt, true, n);
		/* one an earlier mount kept needs no base; made, it waits for a later one */
		order_add(p, SLOT_CONTENT, usable, false, nd);
	}
	free(usable);
	free(rebuilt);
}
