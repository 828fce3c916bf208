/* SPDX-License-Identifier: MIT */
/* Metadata pages: compressed in parallel, written in order, then their table. */
#include "metastore.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util.h"

/* Above level 14 zstd finds little more in a page this small: on a million-file tree's
 * metadata, level 19 stored 0.16 % less at a fifth of the speed (about 50 s of CPU
 * against 10); level 9 stored 0.6 % more. */
#define PAGE_LEVEL_MAX 14

struct stored_page {
	uint8_t *bytes;  /* the page as stored: a zstd frame, or the page itself when raw */
	uint32_t size;
	uint8_t codec;
};

struct job {
	int level;
	const uint8_t *meta;
	size_t len;
	uint64_t npages;
	struct stored_page *pages;
	atomic_uint_fast64_t next;
	atomic_int err;
};

static size_t page_len(const struct job *j, uint64_t p)
{
	size_t start = (size_t)p * STP_META_PAGE_SIZE;

	return j->len - start < STP_META_PAGE_SIZE ? j->len - start : STP_META_PAGE_SIZE;
}

/* Compresses page P, keeping the frame only when it is smaller than the page. */
static int compress_page(struct job *j, ZSTD_CCtx *cc, uint64_t p)
{
	const uint8_t *src = j->meta + (size_t)p * STP_META_PAGE_SIZE;
	size_t len = page_len(j, p), cap = ZSTD_compressBound(len), n;
	struct stored_page *sp = &j->pages[p];

	sp->bytes = malloc(cap);
	if (!sp->bytes)
		return -ENOMEM;
	n = ZSTD_compressCCtx(cc, sp->bytes, cap, src, len, j->level);
	if (!ZSTD_isError(n) && n < len) {
		sp->size = (uint32_t)n;
		sp->codec = STP_CODEC_ZSTD;
	} else {
		memcpy(sp->bytes, src, len);
		sp->size = (uint32_t)len;
		sp->codec = STP_CODEC_RAW;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct job *j = arg;
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	uint64_t p;

	if (!cc) {
		atomic_store(&j->err, -ENOMEM);
		return NULL;
	}
	while (!atomic_load(&j->err) && (p = atomic_fetch_add(&j->next, 1)) < j->npages) {
		int rc = compress_page(j, cc, p);

		if (rc)
			atomic_store(&j->err, rc);
	}
	ZSTD_freeCCtx(cc);
	return NULL;
}

/* Runs WORKER on THREADS threads (the calling one among them). */
static int compress_all(struct job *j, unsigned threads)
{
	pthread_t tid[64];
	unsigned started = 0;

	if (threads > 64)
		threads = 64;
	if (threads > j->npages)
		threads = (unsigned)j->npages;
	while (started + 1 < threads && !pthread_create(&tid[started], NULL, worker, j))
		started++;
	worker(j);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	return atomic_load(&j->err);
}

/* The pages, then the table that says where each went. */
static int write_pages(const struct job *j, int fd, uint64_t pos, struct stp_superblock *sb,
		       uint64_t *end)
{
	size_t tlen = (size_t)j->npages * STP_BLOCKENT_SIZE;
	uint8_t *table = malloc(tlen ? tlen : 1);
	int rc = 0;

	if (!table)
		return -ENOMEM;
	for (uint64_t p = 0; !rc && p < j->npages; p++) {
		const struct stored_page *sp = &j->pages[p];
		struct stp_blockent e = { .offset = pos, .stored_size = sp->size, .codec = sp->codec,
					  .checksum = stp_checksum(sp->bytes, sp->size) };

		stp_blockent_encode(&e, table + p * STP_BLOCKENT_SIZE);
		rc = stp_pwrite_full(fd, sp->bytes, sp->size, pos);
		pos += sp->size;
	}
	if (!rc)
		rc = stp_pwrite_full(fd, table, tlen, pos);
	if (!rc) {
		sb->feat_incompat |= STP_FEAT_INCOMPAT_META_PAGES;
		sb->meta_codec = STP_META_CODEC_PAGES;
		sb->meta_offset = pos;
		sb->meta_stored_size = tlen;
		sb->meta_checksum = stp_checksum(table, tlen);
		*end = pos + tlen;
	}
	free(table);
	return rc;
}

int meta_store(const uint8_t *meta, size_t len, int level, unsigned threads, int fd,
	       uint64_t pos, struct stp_superblock *sb, uint64_t *end)
{
	struct job j = { .level = level < PAGE_LEVEL_MAX ? level : PAGE_LEVEL_MAX,
			 .meta = meta, .len = len,
			 .npages = (len + STP_META_PAGE_SIZE - 1) / STP_META_PAGE_SIZE };
	int rc;

	j.pages = calloc(j.npages ? j.npages : 1, sizeof(*j.pages));
	if (!j.pages)
		return -ENOMEM;
	rc = compress_all(&j, threads ? threads : 1);
	if (!rc)
		rc = write_pages(&j, fd, pos, sb, end);
	for (uint64_t p = 0; p < j.npages; p++)
		free(j.pages[p].bytes);
	free(j.pages);
	sb->meta_size = len;
	return rc;
}

/* The level of the whole metadata: one frame, so its window reaches across tables. */
#define WHOLE_LEVEL 19

int meta_store_whole(const uint8_t *meta, size_t len, int fd, uint64_t pos,
		     struct stp_superblock *sb, uint64_t *end)
{
	size_t cap = ZSTD_compressBound(len), zlen = 0;
	uint8_t *z = malloc(cap);
	const uint8_t *out = meta;
	int rc;

	if (z)
		zlen = ZSTD_compress(z, cap, meta, len, WHOLE_LEVEL);
	if (z && !ZSTD_isError(zlen) && zlen < len) {
		sb->meta_codec = STP_CODEC_ZSTD;
		out = z;
	} else {
		sb->meta_codec = STP_CODEC_RAW;
		zlen = len;
	}
	sb->meta_offset = pos;
	sb->meta_stored_size = zlen;
	sb->meta_size = len;
	sb->meta_checksum = stp_checksum(out, zlen);
	*end = pos + zlen;
	rc = stp_pwrite_full(fd, out, zlen, pos);
	free(z);
	return rc;
}
