/* SPDX-License-Identifier: MIT */
/*
 * The block cache under load: many threads pin distinct blocks of a small image, and
 * others read a file across blocks through stp_file_read, with a budget of one block.
 * Every byte read must be the byte written, and the buffers that exist at once must never
 * exceed BUDGET + EXTRA. A get that finds every buffer pinned must wait until a release,
 * and a block that fails to decode must give its buffer back.
 *
 * The image is written here field by field with the format.c encoders, its blocks stored
 * raw but block 0, compressed (decoded in place, in the one buffer), so that
 * nothing but common/ is under test. Every stream byte is a hash of its
 * offset: a wrong block or a wrong offset inside one shows.
 *
 * The watermark: a second image of 2 MiB blocks, decoded as a stream, whose decoder is
 * held at each step by an observer, shows readers let go in order as the watermark
 * passes the end of their range, a decode that fails halfway waking every waiter with
 * its error. Filtered blocks of real code stream too: test_filtered, test_filtered_load.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_frameHeaderSize */
#include <zstd.h>

#include "bcj.h"
#include "cache.h"
#include "fileread.h"
#include "format.h"
#include "image.h"
#include "image_internal.h"
#include "imgsrc.h"
#include "log.h"

#include "check.h"

#define BLOCK_LOG 16u                          /* 64 KiB, the smallest the format allows */
#define BS (1u << BLOCK_LOG)
#define NBLOCKS 12u
#define DATA_SIZE ((NBLOCKS - 1) * (uint64_t)BS + BS / 2 + 123) /* the last block is short */
#define BAD_BLOCK (NBLOCKS - 2)                /* its table checksum is wrong */
#define EXT_A (3 * (uint64_t)BS + 777)         /* the file: stream [0, EXT_A), a hole, */
#define HOLE 1000u                             /* then stream [EXT_A, BAD_BLOCK * BS) */
#define FILE_SIZE (BAD_BLOCK * (uint64_t)BS + HOLE)
#define BLOCK_THREADS 8u
#define FILE_THREADS 4u
#define ROUNDS 300u

static uint8_t stream_byte(uint64_t s)
{
	uint64_t z = (s >> 3) + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint8_t)(z >> (8 * (s & 7)));
}

/* The file's byte at FILE_OFF, from the layout above. */
static uint8_t file_byte(uint64_t off)
{
	if (off < EXT_A)
		return stream_byte(off);
	if (off < EXT_A + HOLE)
		return 0;
	return stream_byte(off - HOLE);
}

static unsigned corrupt_reports;

static void quiet_log(enum stp_log_level level, const char *msg)
{
	(void)msg;
	if (level == STP_LOG_ERR)
		__atomic_add_fetch(&corrupt_reports, 1, __ATOMIC_RELAXED);
}

static int write_all(int fd, const void *p, size_t len)
{
	return write(fd, p, len) == (ssize_t)len ? 0 : -1;
}

/* write_image's block table into OUT: block 0 is ZBLOCK (ZLEN bytes) after the
 * superblock, the others DATA's bytes raw after it; BAD_BLOCK's checksum is wrong. */
static void encode_blocks(const uint8_t *data, const uint8_t *zblock, size_t zlen, uint8_t *out)
{
	for (uint32_t b = 0; b < NBLOCKS; b++) {
		uint64_t start = (uint64_t)b * BS, len = DATA_SIZE - start < BS ? DATA_SIZE - start : BS;
		struct stp_blockent be = {
			.offset = STP_SB_SIZE + zlen + start - BS, .stored_size = (uint32_t)len,
			.codec = STP_CODEC_RAW, .filter = STP_FILTER_NONE,
			.checksum = stp_checksum(data + start, len) ^ (b == BAD_BLOCK),
		};

		if (b == 0) {
			be.offset = STP_SB_SIZE;
			be.stored_size = (uint32_t)zlen;
			be.codec = STP_CODEC_ZSTD;
			be.checksum = stp_checksum(zblock, zlen);
		}
		stp_blockent_encode(&be, out + b * STP_BLOCKENT_SIZE);
	}
}

/* Superblock, the raw blocks, block 0 compressed, then raw metadata: header, 2 inodes
 * (the root, empty, and the file), 2 extents, the block table, no strings. */
static int write_image(int fd)
{
	enum { INODE_OFF = STP_META_HDR_SIZE, EXTENT_OFF = INODE_OFF + 2 * STP_INODE_SIZE,
	       BLOCK_OFF = EXTENT_OFF + 2 * STP_EXTENT_SIZE,
	       META_SIZE = BLOCK_OFF + NBLOCKS * STP_BLOCKENT_SIZE };
	static uint8_t data[DATA_SIZE], zblock[BS + BS / 64 + 1024];
	uint8_t sb_raw[STP_SB_SIZE], meta[META_SIZE] = { 0 };
	size_t zlen;
	struct stp_meta_header mh = {
		.inode_count = 2, .extent_count = 2, .block_count = NBLOCKS,
		.inode_off = INODE_OFF, .dirent_off = EXTENT_OFF, .extent_off = EXTENT_OFF,
		.xattr_off = BLOCK_OFF, .block_off = BLOCK_OFF, .strings_off = META_SIZE,
	};
	struct stp_inode root = { .mode = S_IFDIR | 0755, .nlink = 2 };
	struct stp_inode file = { .mode = S_IFREG | 0644, .nlink = 1, .size = FILE_SIZE,
				  .data = 0, .count = 2 };
	struct stp_extent ext[2] = {
		{ 0, 0, EXT_A },
		{ EXT_A + HOLE, EXT_A, BAD_BLOCK * (uint64_t)BS - EXT_A },
	};
	struct stp_superblock sb = {
		.version = STP_FORMAT_VERSION, .block_log = BLOCK_LOG, .data_size = DATA_SIZE,
		.block_count = NBLOCKS, .meta_stored_size = META_SIZE, .meta_size = META_SIZE,
		.meta_codec = STP_CODEC_RAW, .inode_count = 2,
	};

	for (uint64_t s = 0; s < DATA_SIZE; s++)
		data[s] = stream_byte(s);
	zlen = ZSTD_compress(zblock, sizeof(zblock), data, BS, 1);
	if (ZSTD_isError(zlen))
		return -1;
	/* block 0's frame, then blocks 1.. raw: stored ranges in block order (stipple(5)) */
	sb.meta_offset = STP_SB_SIZE + zlen + DATA_SIZE - BS;
	sb.image_size = sb.meta_offset + META_SIZE;
	stp_meta_header_encode(&mh, meta);
	stp_inode_encode(&root, meta + INODE_OFF);
	stp_inode_encode(&file, meta + INODE_OFF + STP_INODE_SIZE);
	for (int i = 0; i < 2; i++)
		stp_extent_encode(&ext[i], meta + EXTENT_OFF + i * STP_EXTENT_SIZE);
	encode_blocks(data, zblock, zlen, meta + BLOCK_OFF);
	sb.meta_checksum = stp_checksum(meta, META_SIZE);
	stp_sb_encode(&sb, sb_raw);
	return write_all(fd, sb_raw, sizeof(sb_raw)) || write_all(fd, zblock, zlen) ||
	       write_all(fd, data + BS, DATA_SIZE - BS) || write_all(fd, meta, META_SIZE) ? -1 : 0;
}

/* An image WRITE makes, opened from a file unlinked once open. */
static struct stp_image *open_written(int (*write)(int fd), const char *what)
{
	char path[] = "/tmp/stipple-test-cache-XXXXXX";
	struct stp_image *img = NULL;
	int fd = mkstemp(path);

	if (fd < 0 || write(fd)) {
		fprintf(stderr, "writing the %s: %s\n", what, strerror(errno));
		exit(2);
	}
	close(fd);
	if (stp_image_open(path, &img)) {
		fprintf(stderr, "%s: does not open\n", path);
		exit(2);
	}
	unlink(path);
	return img;
}

static struct stp_image *open_image(void)
{
	return open_written(write_image, "test image");
}

/* True when REF holds block B's bytes, all of them. */
static int block_right(const struct stp_block_ref *ref, uint64_t b)
{
	uint64_t start = b * BS;
	size_t want = DATA_SIZE - start < BS ? (size_t)(DATA_SIZE - start) : BS;

	if (ref->block != b || ref->size != want)
		return 0;
	for (size_t i = 0; i < want; i++)
		if (ref->data[i] != stream_byte(start + i))
			return 0;
	return 1;
}

struct worker {
	struct stp_cache *cache;
	const struct stp_image *img;
	unsigned id;
	unsigned bad; /* wrong bytes or unexpected errors */
	pthread_t thread;
};

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Pins blocks of its own (id, id + BLOCK_THREADS, ...), skipping the damaged one. */
static void *block_main(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 0x1234567ull + w->id;

	for (unsigned r = 0; r < ROUNDS; r++) {
		uint64_t mine = (NBLOCKS - w->id + BLOCK_THREADS - 1) / BLOCK_THREADS;
		uint64_t b = w->id + BLOCK_THREADS * (next_rand(&seed) % mine);
		struct stp_block_ref ref;

		if (b == BAD_BLOCK)
			continue;
		if (stp_cache_get(w->cache, b, &ref)) {
			w->bad++;
			continue;
		}
		w->bad += !block_right(&ref, b);
		stp_cache_release(w->cache, &ref);
	}
	return NULL;
}

/* Reads random ranges of the file, up to four blocks long, hole included. */
static void *file_main(void *arg)
{
	static const size_t max_len = 4 * BS + 1000;
	struct worker *w = arg;
	uint64_t seed = 0xabcdefull + w->id;
	struct stp_inode in;
	uint8_t *buf = malloc(max_len);

	if (!buf || stp_image_inode(w->img, 1, &in)) {
		w->bad++;
		free(buf);
		return NULL;
	}
	for (unsigned r = 0; r < ROUNDS / 4; r++) {
		uint64_t off = next_rand(&seed) % FILE_SIZE;
		size_t len = 1 + next_rand(&seed) % max_len;
		size_t want = FILE_SIZE - off < len ? (size_t)(FILE_SIZE - off) : len;
		ssize_t got = stp_file_read(w->img, w->cache, &in, off, len, buf);

		if (got != (ssize_t)want) {
			w->bad++;
			continue;
		}
		for (size_t i = 0; i < want; i++)
			if (buf[i] != file_byte(off + i)) {
				w->bad++;
				break;
			}
	}
	free(buf);
	return NULL;
}

/* Budget 1, EXTRA threads' worth of room: many more threads than buffers. */
static void test_load(const struct stp_image *img, uint32_t extra)
{
	struct worker w[BLOCK_THREADS + FILE_THREADS];
	struct stp_cache_stats st;
	struct stp_cache *cache;

	CHECK(stp_cache_new(img, 1, extra, &cache) == 0);
	for (unsigned i = 0; i < BLOCK_THREADS + FILE_THREADS; i++) {
		w[i] = (struct worker){ .cache = cache, .img = img, .id = i % BLOCK_THREADS };
		CHECK(pthread_create(&w[i].thread, NULL, i < BLOCK_THREADS ? block_main : file_main,
				     &w[i]) == 0);
	}
	for (unsigned i = 0; i < BLOCK_THREADS + FILE_THREADS; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].bad)
			fprintf(stderr, "thread %u: %u wrong reads\n", i, w[i].bad);
		CHECK(w[i].bad == 0);
	}
	stp_cache_stats(cache, &st);
	fprintf(stderr, "extra %u: peak %u of %u buffers, %llu decoded, %llu waits\n", extra,
	       st.peak_buffers, st.max_buffers, (unsigned long long)st.decoded,
	       (unsigned long long)st.waits);
	CHECK(st.max_buffers == 1 + extra);
	CHECK(st.peak_buffers <= st.max_buffers);
	CHECK(st.peak_buffers >= 2);      /* the threads did contend */
	CHECK(st.pinned == 0);
	CHECK(st.resident <= 1);          /* idle: back within the budget */
	CHECK(st.buffers <= 2);           /* the budget and the spare */
	CHECK(st.failures == 0);
	stp_cache_free(cache);
}

/* Up to ten seconds for CACHE's stats to count N gets waiting for a buffer (WAITS) or
 * joining a decode (else): a test waits for its threads to get there, not for a time,
 * which a loaded machine outlasts. */
enum arrival { WAITS, JOINING };

static int arrived(struct stp_cache *cache, enum arrival what, uint64_t n)
{
	struct timespec nap = { 0, 2 * 1000000 };
	struct stp_cache_stats st;

	for (int i = 0; i < 5000; i++) {
		stp_cache_stats(cache, &st);
		if ((what == WAITS ? st.waits : st.joining) >= n)
			return 1;
		nanosleep(&nap, NULL);
	}
	return 0;
}

struct waiter {
	struct stp_cache *cache;
	uint64_t block;
	int rc, done, right;
};

static void *wait_main(void *arg)
{
	struct waiter *wt = arg;
	struct stp_block_ref ref;

	wt->rc = stp_cache_get(wt->cache, wt->block, &ref);
	if (!wt->rc) {
		wt->right = block_right(&ref, wt->block);
		stp_cache_release(wt->cache, &ref);
	}
	__atomic_store_n(&wt->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* With every buffer pinned, a get waits for a release and get_resident does not
 * allocate; a failed decode gives its buffer back. */
static void test_wait(const struct stp_image *img)
{
	struct stp_block_ref a, b, c;
	struct waiter wt = { .block = 5 };
	struct stp_cache_stats st;
	pthread_t t;

	CHECK(stp_cache_new(img, 1, 1, &wt.cache) == 0);
	CHECK(stp_cache_get(wt.cache, 0, &a) == 0 && block_right(&a, 0)); /* compressed */
	stp_cache_stats(wt.cache, &st);
	CHECK(st.peak_buffers == 1); /* decoded in place: one buffer for a compressed block */
	CHECK(stp_cache_get(wt.cache, 1, &b) == 0 && block_right(&b, 1));
	CHECK(stp_cache_get_resident(wt.cache, 2, &c) == -ENOENT);
	CHECK(stp_cache_get_resident(wt.cache, 1, &c) == 0 && c.data == b.data);
	stp_cache_release(wt.cache, &c);
	CHECK(pthread_create(&t, NULL, wait_main, &wt) == 0);
	CHECK(arrived(wt.cache, WAITS, 1));
	stp_cache_stats(wt.cache, &st);
	CHECK(!__atomic_load_n(&wt.done, __ATOMIC_ACQUIRE)); /* both buffers are pinned */
	CHECK(st.waits == 1 && st.buffers == 2);
	stp_cache_release(wt.cache, &a);
	pthread_join(t, NULL);
	CHECK(wt.rc == 0 && wt.right);
	stp_cache_stats(wt.cache, &st);
	CHECK(st.peak_buffers == 2 && st.buffers <= 2);

	/* the damaged block: refused, reported, and its buffer not kept */
	corrupt_reports = 0;
	CHECK(stp_cache_get(wt.cache, BAD_BLOCK, &c) == -EUCLEAN);
	CHECK(corrupt_reports == 1);
	CHECK(!stp_cache_contains(wt.cache, BAD_BLOCK));
	stp_cache_stats(wt.cache, &st);
	CHECK(st.failures == 1 && st.buffers <= 2);
	CHECK(stp_cache_get(wt.cache, BAD_BLOCK, &c) == -EUCLEAN); /* tried again, no hang */

	/* the short last block reuses a full buffer; dropping frees a pinned block later */
	CHECK(stp_cache_get(wt.cache, NBLOCKS - 1, &c) == 0 && block_right(&c, NBLOCKS - 1));
	stp_cache_drop(wt.cache, NBLOCKS - 1);
	CHECK(stp_cache_contains(wt.cache, NBLOCKS - 1));
	stp_cache_release(wt.cache, &c);
	CHECK(!stp_cache_contains(wt.cache, NBLOCKS - 1));
	stp_cache_release(wt.cache, &b);
	stp_cache_stats(wt.cache, &st);
	CHECK(st.pinned == 0 && st.peak_buffers == 2 && st.buffers <= 2);
	CHECK(stp_cache_get(wt.cache, NBLOCKS, &c) == -EINVAL);
	stp_cache_free(wt.cache);
}


/* The streaming image: SBLOCKS blocks of 2 MiB, zstd at level 1 on bytes that compress
 * somewhat; block SBAD has a zstd block header made invalid halfway (its checksum over
 * the damaged bytes, so that the damage shows only to the decoder), block SBCJ is x86
 * BCJ filtered, block SSKIP ends in a skippable frame of SKIP_LEN bytes; the others are
 * plain. */
#define SLOG 21u
#define SBS (1u << SLOG)
#define SBLOCKS 6u
#define SBAD 1u
#define SBCJ 2u
#define SSKIP 3u         /* its frame is followed by a skippable one: see test_in_place */
#define SKIP_LEN (200u << 10)
#define SBAD_ZBLOCK 10u /* the zstd block made invalid: after 10 * 128 KiB of output */

static uint8_t soft_byte(uint64_t s)
{
	return (uint8_t)(stream_byte(s) & 0x1f) | 0x40;
}

/* Makes zstd block number K of FRAME (LEN bytes) reserved. 0, or -1 if there is none. */
static int break_zblock(uint8_t *frame, size_t len, unsigned k)
{
	size_t at = ZSTD_frameHeaderSize(frame, len);

	if (ZSTD_isError(at))
		return -1;
	for (unsigned i = 0; at + 3 <= len; i++) {
		uint32_t h = frame[at] | (uint32_t)frame[at + 1] << 8 | (uint32_t)frame[at + 2] << 16;
		size_t csize = ((h >> 1) & 3) == 1 ? 1 : h >> 3;

		if (i == k) {
			frame[at] |= 6; /* block type 3: reserved */
			return 0;
		}
		at += 3 + csize;
	}
	return -1;
}

/* Block B of the stream image, its SBS bytes at SRC, compressed into Z (CAP bytes):
 * SBCJ filtered first, SBAD's frame broken, SSKIP's followed by a skippable frame.
 * Returns the frame's length, 0 on failure. */
static size_t stream_frame(uint32_t b, const uint8_t *src, uint8_t *z, size_t cap)
{
	static const uint8_t magic[4] = { 0x50, 0x2A, 0x4D, 0x18 };
	static uint8_t filtered[SBS];
	size_t zlen;
	uint8_t *at;

	if (b == SBCJ) {
		memcpy(filtered, src, SBS);
		stp_bcj_x86(filtered, SBS, (uint64_t)b * SBS, 1);
		src = filtered;
	}
	zlen = ZSTD_compress(z, cap, src, SBS, 1);
	if (ZSTD_isError(zlen) || (b == SBAD && break_zblock(z, zlen, SBAD_ZBLOCK)))
		return 0;
	if (b != SSKIP)
		return zlen;
	at = z + zlen;
	memcpy(at, magic, 4);
	at[4] = (uint8_t)SKIP_LEN;
	at[5] = (uint8_t)(SKIP_LEN >> 8);
	at[6] = (uint8_t)(SKIP_LEN >> 16);
	at[7] = 0;
	memset(at + 8, 0x5A, SKIP_LEN);
	return zlen + 8 + SKIP_LEN;
}

static int write_stream_image(int fd)
{
	enum { INODE_OFF = STP_META_HDR_SIZE, BLOCK_OFF = INODE_OFF + STP_INODE_SIZE,
	       META_SIZE = BLOCK_OFF + SBLOCKS * STP_BLOCKENT_SIZE };
	static uint8_t data[SBLOCKS * (size_t)SBS], z[SBLOCKS][SBS + SBS / 64 + 1024 + SKIP_LEN];
	uint8_t sb_raw[STP_SB_SIZE], meta[META_SIZE] = { 0 };
	size_t zlen[SBLOCKS];
	uint64_t off = STP_SB_SIZE;
	struct stp_meta_header mh = {
		.inode_count = 1, .block_count = SBLOCKS, .inode_off = INODE_OFF,
		.dirent_off = BLOCK_OFF, .extent_off = BLOCK_OFF, .xattr_off = BLOCK_OFF,
		.block_off = BLOCK_OFF, .strings_off = META_SIZE,
	};
	struct stp_inode root = { .mode = S_IFDIR | 0755, .nlink = 2 };
	struct stp_superblock sb = {
		.version = STP_FORMAT_VERSION, .block_log = SLOG, .data_size = sizeof(data),
		.block_count = SBLOCKS, .meta_stored_size = META_SIZE, .meta_size = META_SIZE,
		.meta_codec = STP_CODEC_RAW, .inode_count = 1,
		.feat_incompat = STP_FEAT_INCOMPAT_BCJ_X86,
	};

	for (uint64_t s = 0; s < sizeof(data); s++)
		data[s] = soft_byte(s);
	for (uint32_t b = 0; b < SBLOCKS; b++) {
		zlen[b] = stream_frame(b, data + (size_t)b * SBS, z[b], sizeof(z[b]));
		if (!zlen[b])
			return -1;
	}
	stp_meta_header_encode(&mh, meta);
	stp_inode_encode(&root, meta + INODE_OFF);
	for (uint32_t b = 0; b < SBLOCKS; b++) {
		struct stp_blockent be = {
			.offset = off, .stored_size = (uint32_t)zlen[b], .codec = STP_CODEC_ZSTD,
			.filter = b == SBCJ ? STP_FILTER_X86 : STP_FILTER_NONE,
			.checksum = stp_checksum(z[b], zlen[b]),
		};

		stp_blockent_encode(&be, meta + BLOCK_OFF + b * STP_BLOCKENT_SIZE);
		off += zlen[b];
	}
	sb.meta_offset = off;
	sb.image_size = off + META_SIZE;
	sb.meta_checksum = stp_checksum(meta, META_SIZE);
	stp_sb_encode(&sb, sb_raw);
	if (write_all(fd, sb_raw, sizeof(sb_raw)))
		return -1;
	for (uint32_t b = 0; b < SBLOCKS; b++)
		if (write_all(fd, z[b], zlen[b]))
			return -1;
	return write_all(fd, meta, META_SIZE);
}

/* Holds the decoder before each watermark step until the test allows it. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned calls, allowed;
	size_t at;      /* the step the decoder waits to publish */
	uint64_t block; /* of which block */
	uint64_t only;  /* the block held: the others decode freely */
};

static void gate_observe(void *ctx, uint64_t block, size_t n)
{
	struct gate *g = ctx;
	unsigned me;

	if (block != g->only)
		return;
	pthread_mutex_lock(&g->lock);
	me = ++g->calls;
	g->at = n;
	g->block = block;
	pthread_cond_broadcast(&g->cond);
	while (me > g->allowed)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_allow(struct gate *g, unsigned n)
{
	pthread_mutex_lock(&g->lock);
	g->allowed = n;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Waits until the decoder stands at step N; its watermark is then at the step before. */
static size_t gate_reach(struct gate *g, unsigned n)
{
	size_t at;

	pthread_mutex_lock(&g->lock);
	while (g->calls < n)
		pthread_cond_wait(&g->cond, &g->lock);
	at = g->at;
	pthread_mutex_unlock(&g->lock);
	return at;
}

struct reader {
	struct stp_cache *cache;
	uint64_t block;
	size_t end;     /* SIZE_MAX: the whole block; 0: stp_cache_get_decoded */
	size_t from;    /* the first byte read */
	size_t size;    /* of the block; 0: SBS */
	uint8_t (*byte)(uint64_t); /* the source; NULL: soft_byte */
	int rc, right, done;
	pthread_t thread;
};

/* Whether bytes [FROM, FROM + LEN) of REF's block, read through stp_cache_read (which
 * unfilters them when the block is filtered and still decoding), are BYTE's. */
static int range_right(struct stp_cache *cache, const struct stp_block_ref *ref, size_t from,
		       size_t len, uint8_t (*byte)(uint64_t))
{
	uint8_t *buf = malloc(len ? len : 1);
	int right = buf && stp_cache_read(cache, ref, from, len, buf) == 0;

	for (size_t i = 0; i < len && right; i++)
		right = buf[i] == byte(ref->block * SBS + from + i);
	free(buf);
	return right;
}

/* Set on the test's own threads, which test_queued lets decode (cache decoders: not). */
static __thread int on_reader;

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct stp_block_ref ref;

	on_reader = 1;
	r->rc = r->end ? stp_cache_get_range(r->cache, r->block, r->end, &ref)
		       : stp_cache_get_decoded(r->cache, r->block, &ref);
	if (!r->rc) {
		size_t n = r->end && r->end < ref.size ? r->end : ref.size;

		r->right = ref.block == r->block && ref.size == (r->size ? r->size : SBS) &&
			   (r->end || ref.direct == ref.size) &&
			   range_right(r->cache, &ref, r->from, n - r->from,
				       r->byte ? r->byte : soft_byte);
		stp_cache_release(r->cache, &ref);
	}
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int is_done(struct reader *r)
{
	return __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
}

/* Up to two seconds for R to be let go. */
static int done_soon(struct reader *r)
{
	struct timespec nap = { 0, 2 * 1000000 };

	for (int i = 0; i < 1000 && !is_done(r); i++)
		nanosleep(&nap, NULL);
	return is_done(r);
}

static void nap_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000 };

	nanosleep(&t, NULL);
}

static struct stp_image *stream_image;

static struct stp_image *open_stream_image(void)
{
	return open_written(write_stream_image, "streaming test image");
}

/* The readers R[N] whose range ends at or below PUBLISHED are let go, with the right
 * bytes; the others still wait. */
static void check_let_go(struct reader *r, unsigned n, size_t published)
{
	for (unsigned i = 0; i < n; i++) {
		if (r[i].end <= published)
			CHECK(done_soon(&r[i]) && r[i].rc == 0 && r[i].right,
			      " end %zu, watermark %zu", r[i].end, published);
		else
			CHECK(!is_done(&r[i]), " end %zu let go at %zu", r[i].end, published);
	}
}

/* While block 0 decodes in CACHE (held by G at STEP), the second buffer serves block
 * SBCJ into *BCJ (its bytes hold no E8/E9: test_filtered has code), and a third block
 * (OTHER, started here) finds no buffer until one is free. */
static void check_second_buffer(struct stp_cache *cache, struct gate *g, unsigned step,
				struct stp_block_ref *bcj, struct reader *other)
{
	struct stp_cache_stats st;

	CHECK(stp_cache_get_range(cache, SBCJ, 1, bcj) == 0);
	CHECK(g->calls == step);
	CHECK(range_right(cache, bcj, SBS - 1, 1, soft_byte));
	CHECK(range_right(cache, bcj, 0, SBS, soft_byte));
	other->cache = cache;
	CHECK(pthread_create(&other->thread, NULL, reader_main, other) == 0);
	CHECK(arrived(cache, WAITS, 1));
	stp_cache_stats(cache, &st);
	CHECK(!is_done(other) && st.waits == 1 && st.buffers == 2);
	CHECK(st.peak_buffers <= st.max_buffers);
}

/* Readers of one block wait for their range only, in order, as the watermark passes;
 * the block ends up whole for later readers; the buffer bound holds meanwhile. */
static void test_watermark(void)
{
	static const size_t ends[] = { 1, 300u << 10, (1u << 20) + 5, 1900u << 10, SIZE_MAX };
	enum { N = sizeof(ends) / sizeof(ends[0]) };
	struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct reader r[N], other = { .block = SBAD, .end = 1 };
	struct stp_cache_stats st;
	struct stp_block_ref bcj;
	struct stp_cache *cache;
	size_t published = 0;
	unsigned step;

	CHECK(stp_cache_new(stream_image, 1, 1, &cache) == 0);
	stp_cache_set_observer(cache, gate_observe, &g);
	for (unsigned i = 0; i < N; i++) {
		r[i] = (struct reader){ .cache = cache, .block = 0, .end = ends[i] };
		CHECK(pthread_create(&r[i].thread, NULL, reader_main, &r[i]) == 0);
	}
	for (step = 1;; step++) {
		size_t at = gate_reach(&g, step);

		if (step == 1) /* the first reader decodes, the others join it */
			CHECK(arrived(cache, JOINING, N - 1));
		check_let_go(r, N, published);
		CHECK(at > published && at - published <= (256u << 10) && at % (128u << 10) == 0,
		      " step %u at %zu after %zu", step, at, published);
		published = at;
		if (step == 4)
			check_second_buffer(cache, &g, step, &bcj, &other);
		if (published + (256u << 10) >= SBS)
			break;
		gate_allow(&g, step);
	}
	/* the first reader's 128 KiB, then every 256 KiB; the end is the decode's return */
	CHECK(step == 8, " %u steps", step);
	CHECK(!is_done(&r[N - 1]) && !stp_cache_contains(cache, 0));
	gate_allow(&g, UINT32_MAX);
	for (unsigned i = 0; i < N; i++) {
		pthread_join(r[i].thread, NULL);
		CHECK(r[i].rc == 0 && r[i].right, " end %zu", ends[i]);
	}
	stp_cache_release(cache, &bcj);
	pthread_join(other.thread, NULL); /* block SBAD: its own test */
	CHECK(other.rc == 0 && other.right, " rc %d right %d", other.rc, other.right);
	stp_cache_stats(cache, &st);
	CHECK(st.early >= 4 && st.peak_buffers == 2 && st.max_buffers == 2);
	CHECK(st.pinned == 0 && st.buffers <= 2);
	stp_cache_free(cache);
}

/* After test_watermark_error's two failures of SBAD in CACHE: a reader let go before
 * the (third) failure keeps its bytes, and its buffer, until it lets go: another decode
 * meanwhile must not take that buffer. */
static void check_held_through_failure(struct stp_cache *cache)
{
	struct stp_block_ref held, other;
	struct stp_cache_stats st;
	int right = 1;

	CHECK(stp_cache_get_range(cache, SBAD, 1000, &held) == 0);
	for (int i = 0; i < 1000; i++) {
		stp_cache_stats(cache, &st);
		if (st.failures == 3)
			break;
		nap_ms(2);
	}
	CHECK(st.failures == 3);
	CHECK(stp_cache_get(cache, 0, &other) == 0 && other.data != held.data);
	stp_cache_release(cache, &other);
	for (size_t i = 0; i < (128u << 10) && right; i++)
		right = held.data[i] == soft_byte(SBAD * (uint64_t)SBS + i);
	CHECK(right);
	stp_cache_release(cache, &held);
	stp_cache_stats(cache, &st);
	CHECK(st.buffers <= 2 && st.pinned == 0);
}

/* A decode that fails halfway: the bytes before the damage were let go, every reader
 * waiting past it gets the error, and the block is never resident. */
static void test_watermark_error(void)
{
	static const size_t ends[] = { 100u << 10, 1500u << 10, SIZE_MAX, 0 };
	enum { N = sizeof(ends) / sizeof(ends[0]) };
	struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
			  .only = SBAD };
	struct reader r[N];
	struct stp_cache_stats st;
	struct stp_block_ref ref;
	struct stp_cache *cache;

	CHECK(stp_cache_new(stream_image, 1, 1, &cache) == 0);
	stp_cache_set_observer(cache, gate_observe, &g);
	r[0] = (struct reader){ .cache = cache, .block = SBAD, .end = ends[0] };
	CHECK(pthread_create(&r[0].thread, NULL, reader_main, &r[0]) == 0);
	gate_reach(&g, 1); /* the decode is under way: the others join it */
	for (unsigned i = 1; i < N; i++) {
		r[i] = (struct reader){ .cache = cache, .block = SBAD, .end = ends[i] };
		CHECK(pthread_create(&r[i].thread, NULL, reader_main, &r[i]) == 0);
	}
	CHECK(arrived(cache, JOINING, N - 1));
	corrupt_reports = 0;
	gate_allow(&g, UINT32_MAX);
	for (unsigned i = 0; i < N; i++)
		pthread_join(r[i].thread, NULL);
	CHECK(r[0].rc == 0 && r[0].right);
	for (unsigned i = 1; i < N; i++)
		CHECK(r[i].rc == -EUCLEAN, " end %zu: %d", ends[i], r[i].rc);
	/* steps up to the damage, none past it */
	CHECK(g.calls >= 4 && g.at <= SBAD_ZBLOCK * (128u << 10), " %u steps, at %zu", g.calls,
	      g.at);
	CHECK(corrupt_reports == 1);
	CHECK(!stp_cache_contains(cache, SBAD));
	CHECK(stp_cache_get_resident(cache, SBAD, &ref) == -ENOENT);
	CHECK(stp_cache_get_decoded(cache, SBAD, &ref) == -ENOENT);
	stp_cache_stats(cache, &st);
	CHECK(st.failures == 1 && st.misses == 1 && st.decoded == 0 && st.pinned == 0);
	CHECK(st.buffers <= 1); /* only the spare is left */
	CHECK(stp_cache_get(cache, SBAD, &ref) == -EUCLEAN); /* tried again, no hang */
	CHECK(stp_cache_get(cache, 0, &ref) == 0); /* the buffer came back */
	stp_cache_release(cache, &ref);
	check_held_through_failure(cache);
	stp_cache_free(cache);
}


/* Stats of CACHE once its decoder threads have nothing left to do: BUFFERS reached (or
 * two seconds passed). */
static void stats_settled(struct stp_cache *cache, uint32_t buffers, struct stp_cache_stats *st)
{
	for (int i = 0; i < 1000; i++) {
		stp_cache_stats(cache, st);
		if (st->buffers == buffers && !st->pinned)
			return;
		nap_ms(2);
	}
}

/* A decode handed to a decoder thread leaves a spare buffer mapped for the next miss,
 * which takes it (one block, one spare: never a buffer more), but only for a budget of
 * at least 16 buffers (an image of small blocks: a spare is a small share of memory). */
static void test_spare(void)
{
	struct stp_cache_stats st;
	struct stp_block_ref ref;
	struct stp_cache *cache;

	CHECK(stp_cache_new(stream_image, 16, 0, &cache) == 0);
	CHECK(stp_cache_get_range(cache, 0, 1, &ref) == 0);
	stp_cache_release(cache, &ref);
	stats_settled(cache, 2, &st);
	CHECK(st.buffers == 2 && st.peak_buffers == 2 && st.resident == 1, " buffers %u peak %u",
	      st.buffers, st.peak_buffers);
	CHECK(stp_cache_get_range(cache, SBCJ, 1, &ref) == 0);
	CHECK(range_right(cache, &ref, 0, SBS, soft_byte));
	stp_cache_release(cache, &ref);
	stats_settled(cache, 3, &st);
	CHECK(st.buffers == 3 && st.peak_buffers == 3 && st.resident == 2, " buffers %u peak %u",
	      st.buffers, st.peak_buffers);
	stp_cache_free(cache);

	/* a small budget: no spare */
	CHECK(stp_cache_new(stream_image, 4, 0, &cache) == 0);
	CHECK(stp_cache_get_range(cache, 0, 1, &ref) == 0);
	stp_cache_release(cache, &ref);
	stats_settled(cache, 1, &st);
	nap_ms(50);
	stp_cache_stats(cache, &st);
	CHECK(st.buffers == 1 && st.resident == 1, " buffers %u", st.buffers);
	stp_cache_free(cache);
}

/* Holds every cache decoder thread at its first step until the test opens it. */
struct hold {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned held;
	int open;
};

static void hold_observe(void *ctx, uint64_t block, size_t n)
{
	struct hold *h = ctx;

	if (on_reader)
		return;
	pthread_mutex_lock(&h->lock);
	h->held++;
	pthread_cond_broadcast(&h->cond);
	while (!h->open)
		pthread_cond_wait(&h->cond, &h->lock);
	h->held--;
	pthread_mutex_unlock(&h->lock);
}

static unsigned held_soon(struct hold *h, unsigned n)
{
	unsigned held = 0;

	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&h->lock);
		held = h->held;
		pthread_mutex_unlock(&h->lock);
		if (held >= n)
			break;
		nap_ms(2);
	}
	return held;
}

/* Every decoder thread (four at most) is busy with another block's rest: a reader of a
 * block whose rest waits in the queue decodes its own bytes on its own thread, the bytes
 * right, instead of waiting behind the others; a reader of part of it leaves the rest
 * queued, one of all of it gets the whole block. */
static void test_queued(void)
{
	static const uint64_t busy[] = { 0, SBCJ, SSKIP, 4 };
	enum { NB = sizeof(busy) / sizeof(busy[0]) };
	struct hold h = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct stp_block_ref refs[NB], last;
	struct reader part = { .block = 5, .end = 1u << 20 }, whole = { .block = 5,
									 .end = SIZE_MAX };
	struct stp_cache *cache;

	CHECK(stp_cache_new(stream_image, SBLOCKS, 0, &cache) == 0);
	stp_cache_set_observer(cache, hold_observe, &h);
	on_reader = 1;
	for (unsigned i = 0; i < NB; i++) {
		CHECK(stp_cache_get_range(cache, busy[i], 1, &refs[i]) == 0);
		CHECK(held_soon(&h, i + 1) == i + 1, " block %llu", (unsigned long long)busy[i]);
	}
	CHECK(stp_cache_get_range(cache, 5, 1, &last) == 0); /* its rest: queued */
	part.cache = whole.cache = cache;
	CHECK(pthread_create(&part.thread, NULL, reader_main, &part) == 0);
	CHECK(done_soon(&part) && part.rc == 0 && part.right, " rc %d", part.rc);
	CHECK(!stp_cache_contains(cache, 5)); /* the rest went back to the queue */
	CHECK(pthread_create(&whole.thread, NULL, reader_main, &whole) == 0);
	CHECK(done_soon(&whole) && whole.rc == 0 && whole.right, " rc %d", whole.rc);
	CHECK(stp_cache_contains(cache, 5) && held_soon(&h, NB) == NB);
	pthread_mutex_lock(&h.lock);
	h.open = 1;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	pthread_join(part.thread, NULL);
	pthread_join(whole.thread, NULL);
	for (unsigned i = 0; i < NB; i++) {
		CHECK(stp_cache_wait(cache, &refs[i], SIZE_MAX) == 0);
		CHECK(range_right(cache, &refs[i], 0, SBS, soft_byte));
		stp_cache_release(cache, &refs[i]);
	}
	stp_cache_release(cache, &last);
	on_reader = 0;
	stp_cache_free(cache);
}

/* KiB of anonymous memory this process holds resident (RssAnon), or -1. */
static long rss_anon_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kib = -1;

	while (f && fgets(line, sizeof(line), f) && sscanf(line, "RssAnon: %ld kB", &kib) != 1)
		;
	if (f)
		fclose(f);
	return kib;
}

struct rss_probe {
	long before;
	long kib; /* the growth at the first step the reader's own decode told of; -1 before */
};

static void rss_observe(void *ctx, uint64_t block, size_t n)
{
	struct rss_probe *p = ctx;

	if (on_reader && p->kib < 0)
		p->kib = rss_anon_kib() - p->before;
}

/* A read of a block's first bytes makes resident its stored bytes and the pages its own
 * decode writes, not the whole buffer first: the process's resident memory is looked at
 * while that decode runs on the reader's thread, before the rest goes to a decoder thread
 * (what else grows meanwhile, the zstd context, is a few hundred KiB at most). */
static void test_populate(void)
{
	struct rss_probe p = { .kib = -1 };
	struct stp_block_ref ref;
	struct stp_blockent be;
	struct stp_cache *cache;
	long stored_kib;

	CHECK(stp_image_block(stream_image, 4, &be) == 0);
	stored_kib = (long)(be.stored_size >> 10);
	CHECK(stp_cache_new(stream_image, 4, 0, &cache) == 0);
	stp_cache_set_observer(cache, rss_observe, &p);
	on_reader = 1;
	p.before = rss_anon_kib();
	CHECK(stp_cache_get_range(cache, 4, 1, &ref) == 0);
	CHECK(range_right(cache, &ref, 0, 4096, soft_byte));
	stp_cache_release(cache, &ref);
	on_reader = 0;
	CHECK(p.before >= 0 && p.kib >= 0 && p.kib - stored_kib < (long)(SBS >> 10) / 3,
	      " %ld KiB more resident, %ld of them stored bytes, a %u KiB block", p.kib,
	      stored_kib, SBS >> 10);
	stp_cache_free(cache);
}

/* Blocks each one zstd frame of RLE zero blocks only: their body is empty, so an idle one
 * is charged nothing. */
#define ZLOG 22u /* 4 MiB */
#define ZBS (1u << ZLOG)
#define ZBLOCKS 16u

/* One zstd block header at F: LEN bytes stored (regenerated for RLE) of TYPE. */
static size_t zblock_header(uint8_t *f, size_t len, unsigned type, int last)
{
	uint32_t h = (uint32_t)len << 3 | type << 1 | (last != 0);

	f[0] = (uint8_t)h;
	f[1] = (uint8_t)(h >> 8);
	f[2] = (uint8_t)(h >> 16);
	return 3;
}

/* A frame at F of SIZE bytes: BODY (BLEN bytes, at most a zstd block) compressed in one
 * block, then RLE blocks of zeros to SIZE; its length, or 0. */
static size_t zero_tail_frame(uint8_t *f, size_t cap, uint32_t size, const uint8_t *body,
			      size_t blen)
{
	size_t n = 9;

	memcpy(f, "\x28\xb5\x2f\xfd\xa0", 5); /* single segment, a 4-byte size */
	f[5] = (uint8_t)size;
	f[6] = (uint8_t)(size >> 8);
	f[7] = (uint8_t)(size >> 16);
	f[8] = (uint8_t)(size >> 24);
	if (blen) {
		ZSTD_CCtx *cc = ZSTD_createCCtx();
		size_t z = cc && !ZSTD_isError(ZSTD_compressBegin(cc, 3)) ?
			   ZSTD_compressBlock(cc, f + n + 3, cap - n - 3, body, blen) : 0;

		ZSTD_freeCCtx(cc);
		if (ZSTD_isError(z) || z == 0)
			return 0;
		n += zblock_header(f + n, z, 2, 0) + z;
	}
	for (size_t left = size - blen; left;) {
		size_t b = left < ZSTD_BLOCKSIZE_MAX ? left : ZSTD_BLOCKSIZE_MAX;

		left -= b;
		n += zblock_header(f + n, b, 1, left == 0);
		f[n++] = 0;
	}
	return n;
}

/* The image write_frames_image makes: BLOCKS blocks of 2^LOG bytes, each stored as FRAME. */
static struct {
	unsigned log;
	uint32_t blocks;
	uint8_t frame[ZBS / 8];
	size_t flen;
	unsigned filter;
} crafted;

static int write_frames_image(int fd)
{
	enum { INODE_OFF = STP_META_HDR_SIZE, BLOCK_OFF = INODE_OFF + STP_INODE_SIZE };
	size_t meta_size = BLOCK_OFF + crafted.blocks * (size_t)STP_BLOCKENT_SIZE;
	uint8_t *meta = calloc(1, meta_size), sb_raw[STP_SB_SIZE];
	struct stp_meta_header mh = {
		.inode_count = 1, .block_count = crafted.blocks, .inode_off = INODE_OFF,
		.dirent_off = BLOCK_OFF, .extent_off = BLOCK_OFF, .xattr_off = BLOCK_OFF,
		.block_off = BLOCK_OFF, .strings_off = meta_size,
	};
	struct stp_inode root = { .mode = S_IFDIR | 0755, .nlink = 2 };
	struct stp_superblock sb = {
		.version = STP_FORMAT_VERSION, .block_log = crafted.log,
		.data_size = (uint64_t)crafted.blocks << crafted.log, .block_count = crafted.blocks,
		.meta_stored_size = meta_size, .meta_size = meta_size,
		.meta_codec = STP_CODEC_RAW, .inode_count = 1,
		.feat_incompat = crafted.filter ? STP_FEAT_INCOMPAT_BCJ_X86 : 0,
	};
	int rc = 0;

	if (!meta)
		return -1;
	stp_meta_header_encode(&mh, meta);
	stp_inode_encode(&root, meta + INODE_OFF);
	for (uint32_t b = 0; b < crafted.blocks; b++) {
		struct stp_blockent be = {
			.offset = STP_SB_SIZE + b * (uint64_t)crafted.flen,
			.stored_size = (uint32_t)crafted.flen, .codec = STP_CODEC_ZSTD,
			.filter = crafted.filter, .checksum = stp_checksum(crafted.frame, crafted.flen),
		};

		stp_blockent_encode(&be, meta + BLOCK_OFF + b * STP_BLOCKENT_SIZE);
	}
	sb.meta_offset = STP_SB_SIZE + crafted.blocks * (uint64_t)crafted.flen;
	sb.image_size = sb.meta_offset + meta_size;
	sb.meta_checksum = stp_checksum(meta, meta_size);
	stp_sb_encode(&sb, sb_raw);
	rc = write_all(fd, sb_raw, sizeof(sb_raw));
	for (uint32_t b = 0; b < crafted.blocks && !rc; b++)
		rc = write_all(fd, crafted.frame, crafted.flen);
	rc = rc ? rc : write_all(fd, meta, meta_size);
	free(meta);
	return rc;
}

/* An image of BLOCKS blocks of 2^LOG bytes, each BLEN bytes of BODY then zeros. */
static struct stp_image *open_frames_image(unsigned log, uint32_t blocks, const uint8_t *body,
					   size_t blen)
{
	crafted.log = log;
	crafted.blocks = blocks;
	crafted.flen = zero_tail_frame(crafted.frame, sizeof(crafted.frame), 1u << log, body,
				       blen);
	if (!crafted.flen) {
		fprintf(stderr, "zstd made no compressed block\n");
		exit(2);
	}
	return open_written(write_frames_image, "crafted image");
}

/* Blocks of zeros read whole, one at a time, a budget of 2: memory follows the charge,
 * so the process holds at most a few buffers more, not all 16 blocks' (64 MiB). (Their
 * tails were once read-only zero pages, which reads faulted in: real pages on some
 * kernels, page tables on all.) */
static void test_zero_tail_memory(void)
{
	struct stp_image *img = open_frames_image(ZLOG, ZBLOCKS, NULL, 0);
	static uint8_t page[4096];
	struct stp_cache_stats st;
	struct stp_cache *cache;
	long before, grown;
	int right = 1;

	CHECK(stp_cache_new(img, 2, 1, &cache) == 0);
	before = rss_anon_kib();
	for (uint32_t b = 0; b < ZBLOCKS; b++) {
		struct stp_block_ref ref;

		CHECK(stp_cache_get(cache, b, &ref) == 0, " block %u", b);
		for (size_t at = 0; at < ref.size; at += sizeof(page)) {
			CHECK(stp_cache_read(cache, &ref, at, sizeof(page), page) == 0);
			right &= page[0] == 0 && memcmp(page, page + 1, sizeof(page) - 1) == 0;
		}
		stp_cache_release(cache, &ref);
	}
	grown = rss_anon_kib() - before;
	stp_cache_stats(cache, &st);
	CHECK(right, " every byte read is zero");
	CHECK(st.decoded == ZBLOCKS);
	CHECK(before >= 0 && grown < 4 * (long)(ZBS >> 10),
	      " %ld KiB more resident after reading %u blocks of %u KiB, budget 2", grown,
	      ZBLOCKS, ZBS >> 10);
	stp_cache_free(cache);
	stp_image_close(img);
}

/* Anonymous mappings of this process that are readable but not writable: "r--p" with no
 * file. Zero tails were once such mappings (counted by no RLIMIT_DATA, and real memory
 * once read on some kernels). -1 when /proc cannot tell. */
static int read_only_anon_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], perms[8];
	int n = 0, fields;
	unsigned long inode;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		fields = sscanf(line, "%*s %7s %*s %*s %lu", perms, &inode);
		n += fields == 2 && strcmp(perms, "r--p") == 0 && inode == 0 &&
		     !strchr(line, '[');
	}
	fclose(f);
	return n;
}

/* Blocks of zeros pinned all at once and read whole, through every way a reader copies
 * them: their tails map nothing, so reading them makes nothing resident and leaves the
 * buffers' count alone. Each keeps a page (its charge); 16 blocks of 4 MiB. */
static void test_zero_tail_pinned(void)
{
	struct stp_image *img = open_frames_image(ZLOG, ZBLOCKS, NULL, 0);
	static struct stp_block_ref refs[ZBLOCKS];
	static uint8_t page[4096];
	struct stp_cache_stats st;
	struct stp_cache *cache;
	long before, grown;
	int right = 1, ro_before = read_only_anon_maps();

	CHECK(stp_cache_new(img, 2, ZBLOCKS, &cache) == 0); /* room enough to pin them all */
	before = rss_anon_kib();
	for (uint32_t b = 0; b < ZBLOCKS; b++) {
		CHECK(stp_cache_get(cache, b, &refs[b]) == 0, " block %u", b);
		CHECK(refs[b].body == 0 && refs[b].direct == ZBS, " body %zu", refs[b].body);
	}
	for (uint32_t b = 0; b < ZBLOCKS; b++)
		for (size_t at = 0, n; at < ZBS; at += n) {
			const uint8_t *p = stp_cache_bytes(&refs[b], at, ZBS - at, &n);

			CHECK(n > 0 && n <= ZBS - at);
			right &= p[0] == 0 && p[n - 1] == 0 && memcmp(p, p + 1, n - 1) == 0;
			CHECK(stp_cache_read(cache, &refs[b], at, sizeof(page), page) == 0);
			right &= page[0] == 0 && memcmp(page, page + 1, sizeof(page) - 1) == 0;
			memset(page, 1, sizeof(page));
			stp_cache_copy(&refs[b], at, sizeof(page), page);
			right &= page[0] == 0 && memcmp(page, page + 1, sizeof(page) - 1) == 0;
		}
	grown = rss_anon_kib() - before;
	stp_cache_stats(cache, &st);
	CHECK(right, " every byte read is zero");
	CHECK(st.pinned == ZBLOCKS && st.buffers <= 1, " %u buffers' worth charged, %u pinned",
	      st.buffers, st.pinned);
	CHECK(before >= 0 && grown < (long)(ZBS >> 10),
	      " %ld KiB more resident with %u blocks of %u KiB pinned and read", grown,
	      ZBLOCKS, ZBS >> 10);
	CHECK(read_only_anon_maps() == ro_before, " %d read-only anonymous mappings, %d before",
	      read_only_anon_maps(), ro_before);
	for (uint32_t b = 0; b < ZBLOCKS; b++)
		stp_cache_release(cache, &refs[b]);
	stp_cache_free(cache);
	stp_image_close(img);
}

/* Short blocks cost the pages of their bodies, pinned or not: seven of zeros pinned leave
 * the bound's buffers free (a decode ahead is queued at once), and forty idle ones all
 * stay cached, their pages well within a budget of one buffer. */
static void test_zero_tail_pins(void)
{
	enum { N = 40 };
	struct stp_image *img = open_frames_image(18, N, NULL, 0);
	struct stp_block_ref refs[N];
	struct stp_cache_stats st;
	struct stp_cache *cache;

	CHECK(stp_cache_new(img, 1, 1, &cache) == 0);
	for (uint32_t b = 0; b < N; b++) {
		CHECK(stp_cache_get(cache, b, &refs[0]) == 0, " block %u", b);
		stp_cache_release(cache, &refs[0]);
	}
	stp_cache_stats(cache, &st);
	CHECK(st.resident == N, " %u blocks kept, a budget of 1", st.resident);
	stp_cache_drop(cache, N - 7);
	for (uint32_t b = 0; b < 7; b++)
		CHECK(stp_cache_get_resident(cache, N - 8 + b + (b > 0), &refs[b]) == 0, " pin %u", b);
	stp_cache_read_ahead(cache, N - 7); /* block N - 8, pinned, is short: worth it */
	stp_cache_stats(cache, &st);
	CHECK(st.ahead == 1, " no decode queued with 7 pinned blocks of zeros, 2 buffers allowed");
	for (uint32_t b = 0; b < 7; b++)
		stp_cache_release(cache, &refs[b]);
	stp_cache_free(cache);
	stp_image_close(img);
}

/* A block that regenerates fewer bytes than a zstd block, with over 64 KiB of literals,
 * then a zero tail: zstd puts such literals at the end of the room it is given, past the
 * block's own bytes. In a whole decode later blocks overwrite them; past a cut's body
 * none does, so the body's room must end at the body: the tail reads as the frame's
 * zeros, not as the literals. */
struct fed {
	uint8_t *out;
	uint64_t next; /* the offset the next piece must have */
	unsigned calls, stop_at;
};

static int take_fed(void *ctx, uint64_t off, const uint8_t *b, size_t n)
{
	struct fed *f = ctx;

	CHECK(off == f->next && n > 0, " piece at %llu, expected %llu", (unsigned long long)off,
	      (unsigned long long)f->next);
	memcpy(f->out + (off - 1000000), b, n);
	f->next = off + n;
	return ++f->calls == f->stop_at ? -EPIPE : 0;
}

/* stp_cache_feed across REF's body and zero tail gives WANT's bytes in order, numbered
 * from the offset given, and stops at the sink's first error. */
static void check_feed(const struct stp_block_ref *ref, const uint8_t *want)
{
	size_t from = ref->body - 50, len = ref->size - from;
	uint8_t *out = malloc(len);
	struct fed f = { out, 1000000, 0, 0 };

	CHECK(out && stp_cache_feed(ref, from, len, 1000000, take_fed, &f) == 0);
	CHECK(f.next == 1000000 + len && f.calls >= 2 && !memcmp(out, want + from, len),
	      " %u pieces", f.calls);
	f = (struct fed){ out, 1000000, 0, 1 };
	CHECK(stp_cache_feed(ref, from, len, 1000000, take_fed, &f) == -EPIPE && f.calls == 1);
	free(out);
}

static void test_short_block_tail(void)
{
	enum { BODY = 100000, LOG = 20 };
	static uint8_t body[BODY], got[1u << LOG];
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	struct stp_image *img;
	struct stp_block_ref ref;
	struct stp_cache *cache;
	uint64_t seed = 7;
	size_t bad = 0;

	for (size_t i = 0; i < BODY; i++)
		body[i] = (uint8_t)b64[next_rand(&seed) % 64];
	img = open_frames_image(LOG, 1, body, BODY);
	CHECK(stp_cache_new(img, 1, 0, &cache) == 0);
	CHECK(stp_cache_get(cache, 0, &ref) == 0);
	CHECK(ref.size == sizeof(got));
	CHECK(stp_cache_read(cache, &ref, 0, sizeof(got), got) == 0);
	for (size_t i = BODY; i < sizeof(got); i++)
		bad += got[i] != 0;
	CHECK(memcmp(got, body, BODY) == 0, " the body");
	CHECK(bad == 0, " %zu bytes of the zero tail are not zero", bad);
	CHECK(ref.body >= BODY && ref.body < BODY + 4096, " body %zu", ref.body);
	bad = 0;
	for (size_t at = BODY, n; at < ref.size; at += n) {
		const uint8_t *p = stp_cache_bytes(&ref, at, ref.size - at, &n);

		for (size_t i = 0; i < n; i++)
			bad += p[i] != 0;
	}
	CHECK(bad == 0, " %zu bytes of the zero tail are not zero in place", bad);
	check_feed(&ref, got);
	stp_cache_release(cache, &ref);
	stp_cache_free(cache);
	stp_image_close(img);
}

/* A content source that writes its bytes and then refuses them, as a fetcher's partial
 * reply or a rebuilt block whose signed content hash does not match: the full block is
 * decoded instead, over what the content left in the buffer. */
static int refused_content(struct stp_imgsrc *src, uint64_t block, void *buf, size_t len)
{
	(void)src;
	(void)block;
	memset(buf, 0xAA, len);
	return -ENOENT;
}

static void read_block0(struct stp_image *img, uint8_t *got, size_t len)
{
	struct stp_block_ref ref;
	struct stp_cache *cache;

	CHECK(stp_cache_new(img, 1, 0, &cache) == 0);
	CHECK(stp_cache_get(cache, 0, &ref) == 0);
	CHECK(stp_cache_read(cache, &ref, 0, len, got) == 0);
	stp_cache_release(cache, &ref);
	stp_cache_free(cache);
}

/* A cut block (zeros past its body) read from a fresh buffer after a refused content:
 * the zeros past the body are zeros, not the refused bytes. */
static void test_refused_content_leaves_no_tail(void)
{
	enum { BODY = 100000, LOG = 20 };
	static uint8_t body[BODY], got[1u << LOG];
	struct stp_image *img;
	uint64_t seed = 7;
	size_t bad = 0;

	for (size_t i = 0; i < BODY; i++)
		body[i] = (uint8_t)(next_rand(&seed) % 64 + 'A');
	img = open_frames_image(LOG, 1, body, BODY);
	img->src->content = refused_content;
	read_block0(img, got, sizeof(got));
	stp_image_close(img);
	CHECK(memcmp(got, body, BODY) == 0, " the body");
	for (size_t i = BODY; i < sizeof(got); i++)
		bad += got[i] != 0;
	CHECK(bad == 0, " %zu bytes past the body are the refused content's", bad);
}

/* The same with the x86 filter and a body that ends in a call: undoing the filter on its
 * last bytes reads the first bytes past the body, which must be zeros there too. */
static void test_refused_content_leaves_the_unfilter_alone(void)
{
	enum { BODY = 100000, LOG = 20 };
	static uint8_t body[BODY], good[1u << LOG], bad[1u << LOG];
	struct stp_image *img;
	uint64_t seed = 9;
	uint8_t *whole;

	for (size_t i = 0; i < BODY; i++)
		body[i] = (uint8_t)(next_rand(&seed) % 64 + 'A');
	memcpy(body + BODY - 4, "\xe8\x10\x20\x30", 4);
	crafted.filter = STP_FILTER_X86;
	img = open_frames_image(LOG, 1, body, BODY);
	read_block0(img, good, sizeof(good));
	whole = malloc(stp_image_block_buffer_size(img));
	CHECK(whole && stp_image_decode_block(img, 0, whole) == 0);
	CHECK(whole && !memcmp(whole, good, sizeof(good)), " the cache's read is the whole decode's");
	free(whole);
	stp_image_close(img);
	img = open_frames_image(LOG, 1, body, BODY);
	img->src->content = refused_content;
	read_block0(img, bad, sizeof(bad));
	stp_image_close(img);
	crafted.filter = STP_FILTER_NONE;
	CHECK(memcmp(good, bad, BODY) == 0, " the body's last call was unfiltered with other bytes");
}

/* In place, the stored bytes sit at the end of the buffer. A frame followed by a
 * skippable one puts them further forward than the margin allows for: the decode must
 * move what is left of them before its output reaches them, and still give every byte. */
static void test_in_place(void)
{
	struct stp_block_ref ref;
	struct stp_cache *cache;
	int right = 1;

	CHECK(stp_cache_new(stream_image, 1, 1, &cache) == 0);
	CHECK(stp_cache_get_range(cache, SSKIP, 1, &ref) == 0);
	CHECK(stp_cache_wait(cache, &ref, SIZE_MAX) == 0);
	for (size_t i = 0; i < SBS && right; i++)
		right = ref.data[i] == soft_byte(SSKIP * (uint64_t)SBS + i);
	CHECK(right);
	stp_cache_release(cache, &ref);
	CHECK(stp_cache_contains(cache, SSKIP));
	stp_cache_free(cache);
}

/*
 * Filtered blocks decoded as streams: an image of real x86 code (libstdc++ where it can be
 * read, else instruction-dense bytes) in 2 MiB blocks: CX86 filtered for x86, CARM for
 * ARM64, CSHORT for x86 and short. Readers of a block still decoding get their bytes
 * unfiltered from a copy and must see the source bytes, at every watermark step.
 */
#define CX86 0u
#define CARM 1u
#define CSHORT 2u
#define CBLOCKS 3u
#define CSHORT_SIZE (SBS / 2 + 4321u)
#define CDATA ((CBLOCKS - 1) * (size_t)SBS + CSHORT_SIZE)
#define SPOT ((size_t)64 << 10) /* where calls are planted */
#define DENSE_AT ((size_t)1 << 20) /* in CX86: opcodes only, too many for a copy */
#define DENSE_LEN (STP_DECODE_BACK + 5000)

static uint8_t code[CDATA];
static size_t code_changed[CBLOCKS]; /* bytes the filter changed in each block */

static uint8_t code_byte(uint64_t s)
{
	return code[s];
}

static void fill_code(void)
{
	FILE *f = fopen("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "rb");
	size_t got = f ? fread(code, 1, CDATA, f) : 0;
	uint64_t seed = 0x5eed;

	if (f)
		fclose(f);
	/* block CARM: a BL in every fourth word, as in AArch64 code */
	for (size_t i = CARM * (size_t)SBS; i < (CARM + 1) * (size_t)SBS; i += 16)
		code[i + 3] = 0x94 | (code[i + 3] & 3);
	/* calls, jumps and sign bytes every SPOT bytes of the x86 blocks, in their last
	 * bytes, and a stretch of them longer than a copy looks back for a restart point */
	for (size_t m = SPOT; m < CDATA; m += SPOT)
		for (size_t i = m - 6; i < m + 6 && i < CDATA; i++)
			if (i / SBS != CARM)
				code[i] = (uint8_t[]){ 0xE8, 0xE9, 0x00, 0xFF }[next_rand(&seed) % 4];
	for (size_t i = CDATA - 9; i < CDATA; i++)
		code[i] = (uint8_t[]){ 0xE8, 0xE9, 0x00, 0xFF }[next_rand(&seed) % 4];
	for (size_t i = DENSE_AT; i < DENSE_AT + DENSE_LEN; i++)
		code[i] = (uint8_t)(0xE8 | (next_rand(&seed) & 1));
	/* else calls and jumps among a few hundred distinct instructions */
	for (size_t i = got; i < CDATA; i++) {
		uint64_t r = next_rand(&seed);

		code[i] = r % 5 == 0 ? 0xE8 : r % 7 == 0 ? 0xFF : (uint8_t)(r % 97);
	}
}

static int write_code_image(int fd)
{
	enum { INODE_OFF = STP_META_HDR_SIZE, BLOCK_OFF = INODE_OFF + STP_INODE_SIZE,
	       META_SIZE = BLOCK_OFF + CBLOCKS * STP_BLOCKENT_SIZE };
	static uint8_t filtered[SBS], z[CBLOCKS][SBS + SBS / 64 + 1024];
	static const unsigned filters[CBLOCKS] = { STP_FILTER_X86, STP_FILTER_ARM64,
						   STP_FILTER_X86 };
	uint8_t sb_raw[STP_SB_SIZE], meta[META_SIZE] = { 0 };
	size_t zlen[CBLOCKS];
	uint64_t off = STP_SB_SIZE;
	struct stp_meta_header mh = {
		.inode_count = 1, .block_count = CBLOCKS, .inode_off = INODE_OFF,
		.dirent_off = BLOCK_OFF, .extent_off = BLOCK_OFF, .xattr_off = BLOCK_OFF,
		.block_off = BLOCK_OFF, .strings_off = META_SIZE,
	};
	struct stp_inode root = { .mode = S_IFDIR | 0755, .nlink = 2 };
	struct stp_superblock sb = {
		.version = STP_FORMAT_VERSION, .block_log = SLOG, .data_size = CDATA,
		.block_count = CBLOCKS, .meta_stored_size = META_SIZE, .meta_size = META_SIZE,
		.meta_codec = STP_CODEC_RAW, .inode_count = 1,
		.feat_incompat = STP_FEAT_INCOMPAT_BCJ_X86 | STP_FEAT_INCOMPAT_BCJ_ARM64,
	};

	fill_code();
	for (uint32_t b = 0; b < CBLOCKS; b++) {
		size_t n = b == CSHORT ? CSHORT_SIZE : SBS;

		memcpy(filtered, code + (size_t)b * SBS, n);
		stp_bcj_apply(filters[b], filtered, n, (uint64_t)b * SBS, 1);
		for (size_t i = 0; i < n; i++)
			code_changed[b] += filtered[i] != code[(size_t)b * SBS + i];
		zlen[b] = ZSTD_compress(z[b], sizeof(z[b]), filtered, n, 3);
		if (ZSTD_isError(zlen[b]))
			return -1;
	}
	stp_meta_header_encode(&mh, meta);
	stp_inode_encode(&root, meta + INODE_OFF);
	for (uint32_t b = 0; b < CBLOCKS; b++) {
		struct stp_blockent be = {
			.offset = off, .stored_size = (uint32_t)zlen[b], .codec = STP_CODEC_ZSTD,
			.filter = filters[b], .checksum = stp_checksum(z[b], zlen[b]),
		};

		stp_blockent_encode(&be, meta + BLOCK_OFF + b * STP_BLOCKENT_SIZE);
		off += zlen[b];
	}
	sb.meta_offset = off;
	sb.image_size = off + META_SIZE;
	sb.meta_checksum = stp_checksum(meta, META_SIZE);
	stp_sb_encode(&sb, sb_raw);
	if (write_all(fd, sb_raw, sizeof(sb_raw)))
		return -1;
	for (uint32_t b = 0; b < CBLOCKS; b++)
		if (write_all(fd, z[b], zlen[b]))
			return -1;
	return write_all(fd, meta, META_SIZE);
}

static struct stp_image *code_image;

/* Pins BLOCK for [0, B) without waiting (the decoder is held) and checks [A, B) from a
 * copy: the block is still filtered in place. */
static int copy_right(struct stp_cache *cache, uint64_t block, size_t a, size_t b)
{
	struct stp_block_ref ref;
	int right;

	if (block == CX86 && a >= DENSE_AT && a < DENSE_AT + DENSE_LEN + 4)
		return 1; /* no restart point near: it waits for the block (test_filtered) */
	if (stp_cache_get_range(cache, block, b, &ref))
		return 0;
	right = ref.direct == 0 && range_right(cache, &ref, a, b - a, code_byte);
	stp_cache_release(cache, &ref);
	return right;
}

/* Every range a reader may have at watermark W of a block of SIZE bytes: around the
 * planted calls, at random, and the last one the look-ahead allows. */
static unsigned check_copies(struct stp_cache *cache, uint64_t block, size_t w, size_t size,
			     uint64_t *seed)
{
	size_t lim = w < size ? w - STP_DECODE_LOOKAHEAD : size;
	unsigned bad = 0;

	for (size_t m = 0; m < lim; m += SPOT)
		for (size_t d = 0; d < 9; d++) {
			size_t a = m + d >= 4 ? m + d - 4 : 0, b = a + 1 + (d % 5);

			if (b <= lim)
				bad += !copy_right(cache, block, a, b);
		}
	for (unsigned i = 0; i < 40; i++) {
		size_t a = next_rand(seed) % lim, b = a + 1 + next_rand(seed) % (200u << 10);

		bad += !copy_right(cache, block, a, b < lim ? b : lim);
	}
	bad += !copy_right(cache, block, lim - 1, lim);
	bad += !copy_right(cache, block, 0, lim);
	if (lim == size) /* the last 4 bytes: no look-ahead */
		for (size_t t = 1; t <= 6; t++)
			bad += !copy_right(cache, block, size - t, size - t + (t > 3));
	return bad;
}

/* check_filtered's state: the block, its readers and what the decode has published. */
struct filtered {
	uint64_t block;
	size_t size;
	struct gate g;
	struct reader first, late, dense, behind;
	int dense_started;
	struct stp_cache *cache;
	uint64_t seed;
	size_t published;
	unsigned bad, step;
};

/* The whole decode of F's block, the reference the copies must match, gives the source;
 * the filter changed enough of it to matter. */
static void check_reference(const struct filtered *f)
{
	uint8_t *whole = malloc(stp_image_block_buffer_size(code_image));

	CHECK(code_changed[f->block] > f->size / 200, " block %llu: the filter changed %zu bytes",
	      (unsigned long long)f->block, code_changed[f->block]);
	CHECK(whole && stp_image_decode_block(code_image, f->block, whole) == 0 &&
	      memcmp(whole, code + f->block * SBS, f->size) == 0);
	free(whole);
}

/* At watermark step STEP, with the decode held: the late reader, one byte short of its
 * look-ahead, is not let go (step 2) until the next step; on the x86 block, a copy inside
 * the stretch of opcodes waits for the block. */
static void check_step_readers(struct filtered *f)
{
	if (f->step == 2) {
		f->late.end = f->published - STP_DECODE_LOOKAHEAD + 1;
		CHECK(pthread_create(&f->late.thread, NULL, reader_main, &f->late) == 0);
		nap_ms(50);
		CHECK(!is_done(&f->late), " let go at %zu for %zu", f->published, f->late.end);
	}
	if (f->step == 3)
		CHECK(done_soon(&f->late) && f->late.rc == 0 && f->late.right);
	if (f->block == CX86 && !f->dense_started && f->published > DENSE_AT + DENSE_LEN + 64) {
		f->dense.from = DENSE_AT + DENSE_LEN - 100;
		f->dense.end = f->dense.from + 50;
		CHECK(pthread_create(&f->dense.thread, NULL, reader_main, &f->dense) == 0);
		f->dense_started = 1;
		nap_ms(50);
		CHECK(!is_done(&f->dense), " a copy over opcodes only");
	}
}

/* The decompression, step by step: the ranges below the watermark come out right while
 * the decode waits; ends when the block is decompressed whole. */
static void decode_in_steps(struct filtered *f)
{
	for (f->step = 1;; f->step++) {
		size_t at = gate_reach(&f->g, f->step);

		if (f->published > STP_DECODE_LOOKAHEAD)
			f->bad += check_copies(f->cache, f->block, f->published, f->size, &f->seed);
		check_step_readers(f);
		CHECK(!stp_cache_contains(f->cache, f->block));
		if (!at)
			break; /* decompressed whole: next, the filter is undone in place */
		CHECK(at > f->published && at <= f->size, " step %u at %zu", f->step, at);
		f->published = at;
		gate_allow(&f->g, f->step);
	}
	CHECK(f->published == f->size && f->step > 3, " %u steps to %zu", f->step, f->published);
}

/* The unfilter in place, held after its first step (which claimed the first
 * STP_DECODE_STEP bytes): copies of bytes past that go on, readers of bytes before it
 * wait for it. */
static void unfilter_held(struct filtered *f)
{
	gate_allow(&f->g, f->step);
	CHECK(gate_reach(&f->g, f->step + 1) > 0);
	f->behind.from = 1000;
	f->behind.end = 2000;
	CHECK(pthread_create(&f->behind.thread, NULL, reader_main, &f->behind) == 0);
	f->bad += !copy_right(f->cache, f->block, STP_DECODE_STEP + STP_DECODE_BACK + 7,
			      f->size / 2);
	f->bad += !copy_right(f->cache, f->block, f->size - 5000, f->size);
	nap_ms(50);
	CHECK(!is_done(&f->behind), " read bytes the unfilter in place is changing");
	CHECK(!f->bad, " block %llu: %u ranges wrong", (unsigned long long)f->block, f->bad);
	gate_allow(&f->g, UINT32_MAX);
}

/* Every reader got the right bytes; the block is whole for later readers. */
static void check_whole(struct filtered *f)
{
	struct stp_cache_stats st;
	struct stp_block_ref ref;

	pthread_join(f->behind.thread, NULL);
	CHECK(f->behind.rc == 0 && f->behind.right);
	pthread_join(f->first.thread, NULL);
	pthread_join(f->late.thread, NULL);
	CHECK(f->first.rc == 0 && f->first.right && f->late.rc == 0 && f->late.right);
	CHECK(f->dense_started == (f->block == CX86));
	if (f->dense_started) {
		pthread_join(f->dense.thread, NULL);
		CHECK(f->dense.rc == 0 && f->dense.right);
	}
	/* whole now: read in place, the bytes of the source */
	CHECK(stp_cache_get(f->cache, f->block, &ref) == 0);
	CHECK(ref.direct == f->size && ref.size == f->size, " direct %zu", ref.direct);
	CHECK(memcmp(ref.data, code + f->block * SBS, f->size) == 0, " block %llu in place",
	      (unsigned long long)f->block);
	stp_cache_release(f->cache, &ref);
	CHECK(stp_cache_contains(f->cache, f->block));
	stp_cache_stats(f->cache, &st);
	CHECK(st.early >= 2 && st.decoded == 1 && st.pinned == 0);
}

/* BLOCK, held at each watermark step: the ranges below the watermark come out right
 * while the decode waits, a reader one byte short of its look-ahead is not let go, one
 * inside the stretch of opcodes waits for the block; during the unfilter in place copies
 * ahead of it go on and readers behind it wait; the block ends up whole and right for
 * later readers. */
static void check_filtered(uint64_t block, size_t size)
{
	struct filtered f = {
		.block = block, .size = size, .seed = 0xf00d + block,
		.g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
		       .only = block },
		.first = { .block = block, .end = 1, .size = size, .byte = code_byte },
	};

	f.late = f.dense = f.behind = f.first;
	check_reference(&f);
	CHECK(stp_cache_new(code_image, 1, 1, &f.cache) == 0);
	stp_cache_set_observer(f.cache, gate_observe, &f.g);
	f.first.cache = f.late.cache = f.dense.cache = f.behind.cache = f.cache;
	CHECK(pthread_create(&f.first.thread, NULL, reader_main, &f.first) == 0);
	decode_in_steps(&f);
	unfilter_held(&f);
	check_whole(&f);
	stp_cache_free(f.cache);
}

static void test_filtered(void)
{
	check_filtered(CX86, SBS);
	check_filtered(CARM, SBS);
	check_filtered(CSHORT, CSHORT_SIZE);
}

struct code_reader {
	struct stp_cache *cache;
	unsigned id, bad, rounds;
	pthread_t thread;
};

/* Random ranges of random blocks, dropping blocks now and then so that they decode again
 * while others read them: copies, the unfilter in place and reads in place mix. */
static void *code_main(void *arg)
{
	struct code_reader *w = arg;
	uint64_t seed = 0xc0de + w->id;

	for (unsigned r = 0; r < w->rounds; r++) {
		uint64_t block = next_rand(&seed) % CBLOCKS;
		size_t size = block == CSHORT ? CSHORT_SIZE : SBS;
		size_t a = next_rand(&seed) % size, b;
		struct stp_block_ref ref;

		if (r % 4 == 0) /* at a mark, or at the end */
			a = r % 8 ? a / SPOT * SPOT - (a % 3) : size - 1 - a % 4;
		if (a >= size)
			a = 0;
		b = a + 1 + next_rand(&seed) % (130u << 10);
		if (b > size || r % 16 == 1)
			b = size;
		if (r % 8 == 3)
			stp_cache_drop(w->cache, block);
		if (stp_cache_get_range(w->cache, block, b, &ref)) {
			w->bad++;
			continue;
		}
		w->bad += !range_right(w->cache, &ref, a, b - a, code_byte);
		stp_cache_release(w->cache, &ref);
	}
	return NULL;
}

static void test_filtered_load(void)
{
	enum { THREADS = 6 };
	struct code_reader w[THREADS];
	struct stp_cache_stats st;
	struct stp_cache *cache;

	CHECK(stp_cache_new(code_image, 1, 2, &cache) == 0);
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct code_reader){ .cache = cache, .id = i, .rounds = 400 };
		CHECK(pthread_create(&w[i].thread, NULL, code_main, &w[i]) == 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(w[i].thread, NULL);
		CHECK(w[i].bad == 0, " thread %u: %u wrong reads", i, w[i].bad);
	}
	stp_cache_stats(cache, &st);
	fprintf(stderr, "filtered: %llu decoded, %llu let go early\n",
		(unsigned long long)st.decoded, (unsigned long long)st.early);
	CHECK(st.decoded >= 20 && st.early > 0 && st.failures == 0 && st.pinned == 0);
	CHECK(st.peak_buffers <= st.max_buffers);
	stp_cache_free(cache);
}

/* Counts the watermark steps of one block: a read served from bytes already decoded
 * makes none. */
struct steps {
	uint64_t block;
	unsigned n; /* atomic */
};

static void steps_observe(void *ctx, uint64_t block, size_t n)
{
	struct steps *st = ctx;

	(void)n;
	if (block == st->block)
		__atomic_add_fetch(&st->n, 1, __ATOMIC_RELAXED);
}

static unsigned steps_of(struct steps *st)
{
	return __atomic_load_n(&st->n, __ATOMIC_RELAXED);
}

/* Whether a get of [0, END) of BLOCK pins it and reads BYTE's bytes from FROM on. */
static int get_right(struct stp_cache *cache, uint64_t block, size_t from, size_t end,
		     uint8_t (*byte)(uint64_t))
{
	struct stp_block_ref ref;
	int right;

	if (stp_cache_get_range(cache, block, end, &ref))
		return 0;
	right = range_right(cache, &ref, from, end - from, byte);
	stp_cache_release(cache, &ref);
	return right;
}

/* Waits up to two seconds for BLOCK to be decoded whole. */
static int whole_soon(struct stp_cache *cache, uint64_t block)
{
	for (int i = 0; i < 1000 && !stp_cache_contains(cache, block); i++)
		nap_ms(2);
	return stp_cache_contains(cache, block);
}

/* stp_cache_prefix decodes a block part-way and parks the rest: a read inside the
 * decoded part makes no decode step, one past it goes on from there (the bytes right, the
 * block then whole, one miss in all), and with one buffer in all a get of another block
 * takes the parked one's buffer; the block then decodes afresh. Plain and filtered. */
static void check_prefix(const struct stp_image *img, uint64_t block, uint64_t other,
			 uint8_t (*byte)(uint64_t))
{
	struct steps st = { .block = block };
	struct stp_cache_stats cs;
	struct stp_cache *cache;
	unsigned n;

	CHECK(stp_cache_new(img, 1, 0, &cache) == 0);
	stp_cache_set_observer(cache, steps_observe, &st);
	CHECK(stp_cache_prefix(cache, block, SBS / 4) == 0);
	stp_cache_stats(cache, &cs);
	CHECK(cs.parked == 1 && cs.decoded == 0 && cs.misses == 1 && !stp_cache_contains(cache, block));
	n = steps_of(&st);
	CHECK(n >= 1 && n < 8, " %u steps for a quarter of the block", n);
	CHECK(get_right(cache, block, 1000, SBS / 4, byte));
	CHECK(steps_of(&st) == n, " a read inside the decoded part decoded on");
	CHECK(get_right(cache, block, SBS / 2, SBS / 2 + 5000, byte));
	CHECK(whole_soon(cache, block));
	CHECK(get_right(cache, block, 0, SBS, byte));
	stp_cache_stats(cache, &cs);
	CHECK(cs.parked == 0 && cs.decoded == 1 && cs.misses == 1 && cs.failures == 0);

	/* OTHER's get evicts BLOCK (idle); then BLOCK parked gives its buffer to BLOCK + 0's
	 * next miss: OTHER again */
	CHECK(get_right(cache, other, 0, 100, byte));
	CHECK(stp_cache_prefix(cache, block, SBS / 4) == 0);
	stp_cache_stats(cache, &cs);
	CHECK(cs.parked == 1);
	CHECK(get_right(cache, other, 0, SBS, byte));
	stp_cache_stats(cache, &cs);
	CHECK(cs.parked == 0 && cs.peak_buffers <= 1 && cs.pinned == 0);
	CHECK(get_right(cache, block, 0, SBS, byte));
	stp_cache_stats(cache, &cs);
	CHECK(cs.misses == 5 && cs.failures == 0, " %llu misses", (unsigned long long)cs.misses);
	stp_cache_free(cache);

	/* a cache freed with a decode parked frees it */
	CHECK(stp_cache_new(img, 2, 0, &cache) == 0);
	CHECK(stp_cache_prefix(cache, block, 1) == 0);
	stp_cache_free(cache);
}

/* Readers at once on a parked block, inside the decoded part and past it: whoever goes
 * on with the decode, every byte is right and the block is decoded once. */
static void race_prefix(const struct stp_image *img, uint64_t block, uint8_t (*byte)(uint64_t))
{
	enum { RACERS = 4, RACE_ROUNDS = 12 };
	uint64_t seed = 0x9a4c + block;

	for (unsigned r = 0; r < RACE_ROUNDS; r++) {
		struct reader rd[RACERS];
		struct stp_cache_stats cs;
		struct stp_cache *cache;

		CHECK(stp_cache_new(img, 2, 1, &cache) == 0);
		CHECK(stp_cache_prefix(cache, block, 1 + next_rand(&seed) % (SBS / 2)) == 0);
		for (unsigned i = 0; i < RACERS; i++) {
			size_t end = 1 + next_rand(&seed) % SBS;

			rd[i] = (struct reader){ .cache = cache, .block = block, .end = end,
						 .from = next_rand(&seed) % end, .byte = byte };
			CHECK(pthread_create(&rd[i].thread, NULL, reader_main, &rd[i]) == 0);
		}
		for (unsigned i = 0; i < RACERS; i++) {
			pthread_join(rd[i].thread, NULL);
			CHECK(rd[i].rc == 0 && rd[i].right, " round %u reader %u: rc %d", r, i, rd[i].rc);
		}
		stp_cache_stats(cache, &cs);
		CHECK(cs.misses == 1 && cs.failures == 0);
		stp_cache_free(cache);
	}
}

struct prefixer {
	struct stp_cache *cache;
	uint64_t block;
	int rc;
	pthread_t thread;
};

static void *prefix_main(void *arg)
{
	struct prefixer *p = arg;

	p->rc = stp_cache_prefix(p->cache, p->block, SBS / 4);
	return NULL;
}

/* The filler waits for a block being decoded (stp_cache_get_decoded); when that decode is
 * a prefix's, which then parks, the filler leaves with -ENOENT and the block stays parked:
 * it never decodes the rest (test_hot_rest saw warming's parked block decoded whole).
 * The prefix is held at its first step until the filler waits on it. */
static void check_prefix_waiter(const struct stp_image *img, uint64_t block)
{
	struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
			  .only = block };
	struct reader filler = { .block = block, .end = 0 };
	struct prefixer p = { .block = block };
	struct stp_cache_stats cs;

	CHECK(stp_cache_new(img, 2, 1, &p.cache) == 0);
	stp_cache_set_observer(p.cache, gate_observe, &g);
	filler.cache = p.cache;
	CHECK(pthread_create(&p.thread, NULL, prefix_main, &p) == 0);
	gate_reach(&g, 1);
	CHECK(pthread_create(&filler.thread, NULL, reader_main, &filler) == 0);
	CHECK(arrived(p.cache, JOINING, 1));
	gate_allow(&g, UINT32_MAX);
	pthread_join(p.thread, NULL);
	pthread_join(filler.thread, NULL);
	stp_cache_stats(p.cache, &cs);
	CHECK(p.rc == 0 && filler.rc == -ENOENT, " prefix %d, filler %d", p.rc, filler.rc);
	CHECK(cs.parked == 1 && cs.decoded == 0 && cs.pinned == 0,
	      " parked %u decoded %llu", cs.parked, (unsigned long long)cs.decoded);
	stp_cache_free(p.cache);
}

static void test_prefix(void)
{
	check_prefix(stream_image, 4, 5, soft_byte);
	check_prefix(code_image, CX86, CARM, code_byte);
	race_prefix(stream_image, 4, soft_byte);
	race_prefix(code_image, CX86, code_byte);
	check_prefix_waiter(stream_image, 4);
	check_prefix_waiter(code_image, CX86);
}

static struct stp_image *image;

static void test_budget_zero(void)
{
	struct stp_cache *cache;

	CHECK(stp_cache_new(image, 0, 4, &cache) == -EINVAL);
}

/* What stp_image_read_block reads, stp_image_decode_stored decodes as
 * stp_image_decode_block does (filters undone), and its entry is the block's; block BAD
 * (its checksum wrong) is refused by both. */
static void check_decode_stored(const struct stp_image *img, uint64_t bad)
{
	size_t n = stp_image_block_buffer_size(img);
	uint8_t *stored = malloc(stp_image_stored_max(img)), *a = malloc(n), *b = malloc(n);
	const struct stp_superblock *sb = stp_image_sb(img);

	CHECK(stored && a && b);
	for (uint64_t i = 0; stored && a && b && i < sb->block_count; i++) {
		struct stp_blockent be, want;
		size_t size = stp_image_block_decoded_size(img, i);

		if (i == bad) {
			CHECK(stp_image_read_block(img, i, stored, &be) == -EUCLEAN &&
			      stp_image_decode_block(img, i, b) == -EUCLEAN);
			continue;
		}
		CHECK(stp_image_read_block(img, i, stored, &be) == 0 &&
		      stp_image_block(img, i, &want) == 0 && be.offset == want.offset &&
		      be.stored_size == want.stored_size && be.codec == want.codec &&
		      be.filter == want.filter && be.checksum == want.checksum,
		      " block %llu", (unsigned long long)i);
		CHECK(stp_image_decode_stored(img, i, &be, stored, a) == 0 &&
		      stp_image_decode_block(img, i, b) == 0 && !memcmp(a, b, size),
		      " block %llu", (unsigned long long)i);
	}
	free(stored);
	free(a);
	free(b);
}

static void test_decode_stored(void)
{
	check_decode_stored(image, BAD_BLOCK);
	check_decode_stored(code_image, UINT64_MAX);
}

static void test_waits(void) { test_wait(image); }
static void test_load_extra1(void) { test_load(image, 1); }
static void test_load_extra3(void) { test_load(image, 3); }

int main(void)
{
	stp_log_set_handler(quiet_log);
	image = open_image();
	RUN(test_budget_zero);
	RUN(test_waits);
	RUN(test_load_extra1);
	RUN(test_load_extra3);
	stream_image = open_stream_image();
	RUN(test_watermark);
	RUN(test_watermark_error);
	RUN(test_spare);
	RUN(test_queued);
	RUN(test_in_place);
	RUN(test_populate);
	RUN(test_zero_tail_memory);
	RUN(test_short_block_tail);
	RUN(test_refused_content_leaves_no_tail);
	RUN(test_refused_content_leaves_the_unfilter_alone);
	RUN(test_zero_tail_pins);
	RUN(test_zero_tail_pinned);
	code_image = open_written(write_code_image, "code test image");
	RUN(test_filtered);
	RUN(test_filtered_load);
	RUN(test_prefix);
	RUN(test_decode_stored);
	stp_image_close(stream_image);
	stp_image_close(image);
	return tap_done();
}
