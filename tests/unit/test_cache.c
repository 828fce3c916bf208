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
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "cache.h"
#include "fileread.h"
#include "format.h"
#include "image.h"
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
	sb.meta_offset = STP_SB_SIZE + DATA_SIZE + zlen;
	sb.image_size = sb.meta_offset + META_SIZE;
	stp_meta_header_encode(&mh, meta);
	stp_inode_encode(&root, meta + INODE_OFF);
	stp_inode_encode(&file, meta + INODE_OFF + STP_INODE_SIZE);
	for (int i = 0; i < 2; i++)
		stp_extent_encode(&ext[i], meta + EXTENT_OFF + i * STP_EXTENT_SIZE);
	for (uint32_t b = 0; b < NBLOCKS; b++) {
		uint64_t start = (uint64_t)b * BS, len = DATA_SIZE - start < BS ? DATA_SIZE - start : BS;
		struct stp_blockent be = {
			.offset = STP_SB_SIZE + start, .stored_size = (uint32_t)len,
			.codec = STP_CODEC_RAW, .filter = STP_FILTER_NONE,
			.checksum = stp_checksum(data + start, len) ^ (b == BAD_BLOCK),
		};

		if (b == 0) {
			be.offset = STP_SB_SIZE + DATA_SIZE;
			be.stored_size = (uint32_t)zlen;
			be.codec = STP_CODEC_ZSTD;
			be.checksum = stp_checksum(zblock, zlen);
		}

		stp_blockent_encode(&be, meta + BLOCK_OFF + b * STP_BLOCKENT_SIZE);
	}
	sb.meta_checksum = stp_checksum(meta, META_SIZE);
	stp_sb_encode(&sb, sb_raw);
	return write_all(fd, sb_raw, sizeof(sb_raw)) || write_all(fd, data, DATA_SIZE) ||
	       write_all(fd, zblock, zlen) || write_all(fd, meta, META_SIZE) ? -1 : 0;
}

static struct stp_image *open_image(void)
{
	char path[] = "/tmp/stipple-test-cache-XXXXXX";
	struct stp_image *img = NULL;
	int fd = mkstemp(path);

	if (fd < 0 || write_image(fd)) {
		perror("writing the test image");
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
	struct timespec nap = { 0, 100 * 1000000 };
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
	nanosleep(&nap, NULL);
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

static struct stp_image *image;

static void test_budget_zero(void)
{
	struct stp_cache *cache;

	CHECK(stp_cache_new(image, 0, 4, &cache) == -EINVAL);
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
	stp_image_close(image);
	return tap_done();
}
