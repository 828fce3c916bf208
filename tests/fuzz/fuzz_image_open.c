/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: an image opened from arbitrary bytes, then every inode, directory entry,
 * link target, xattr and extent walked, paths resolved, blocks decoded and files read
 * through the block cache.
 *
 * Each input is tried twice: as given, and with the superblock and metadata checksums
 * recomputed, so that mutations get past the checksums to the parsers behind them.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache.h"
#include "fileread.h"
#include "format.h"
#include "fuzz.h"
#include "image.h"
#include "log.h"
#include "util.h"

#define MAX_INODES 4096u
#define MAX_ENTRIES 4096u
#define MAX_BLOCKS 16u
#define MAX_BLOCK_SIZE (4u << 20)
#define MAX_FILE_READ (1u << 20)   /* bytes read of each file */
#define READ_CHUNK 40000u          /* not a power of two: reads straddle blocks */

static volatile uint64_t sink; /* keeps the reads of every returned byte */

static void touch(const void *p, size_t len)
{
	sink ^= stp_checksum(p, len);
}

/* Entry I read alone agrees with the run that holds it (read in runs, as a mount lists). */
static void check_in_run(const struct stp_image *img, const struct stp_inode *dir, uint32_t i,
			 const struct stp_dirent *de, const char *name, struct stp_dir_run *run)
{
	uint32_t k;

	if (i < run->first || i >= run->first + run->count)
		if (stp_image_dir_run(img, dir, i, STP_DIR_RUN, run))
			return;
	FUZZ_ASSERT(run->count > 0 && run->count <= STP_DIR_RUN && i >= run->first &&
		    i - run->first < run->count);
	k = i - run->first;
	FUZZ_ASSERT(run->ent[k].ino == de->ino && run->ent[k].name_len == de->name_len &&
		    !strcmp(run->names + run->name_at[k], name));
}

static void walk_dir(const struct stp_image *img, uint32_t ino, const struct stp_inode *dir)
{
	static struct stp_dir_run run;

	run.first = run.count = 0;
	for (uint32_t i = 0; i < dir->count && i < MAX_ENTRIES; i++) {
		struct stp_dirent de;
		char name[STP_NAME_MAX + 1];
		uint32_t found;

		if (stp_image_dirent(img, dir, i, &de, name))
			continue;
		check_in_run(img, dir, i, &de, name, &run);
		FUZZ_ASSERT(de.name_len > 0 && de.name_len <= STP_NAME_MAX);
		FUZZ_ASSERT(!memchr(name, '/', de.name_len));
		FUZZ_ASSERT(de.ino < stp_image_sb(img)->inode_count);
		touch(name, de.name_len);
		if (!stp_image_lookup(img, ino, name, de.name_len, &found))
			FUZZ_ASSERT(found < stp_image_sb(img)->inode_count);
	}
}

/* Reads a file through CACHE in uneven chunks: never more than asked, never past its size,
 * and all of it (up to MAX_FILE_READ) unless the image is found damaged. */
static void read_file(const struct stp_image *img, struct stp_cache *cache,
		      const struct stp_inode *in)
{
	static uint8_t buf[READ_CHUNK];
	uint64_t off = 0;
	ssize_t n;

	while (off < MAX_FILE_READ) {
		n = stp_file_read(img, cache, in, off, sizeof(buf), buf);
		if (n < 0)
			return;
		FUZZ_ASSERT((size_t)n <= sizeof(buf));
		if (n == 0)
			break;
		touch(buf, (size_t)n);
		off += (uint64_t)n;
		FUZZ_ASSERT(off <= in->size);
	}
	FUZZ_ASSERT(off >= MAX_FILE_READ || off == in->size);
}

static void walk_inode(const struct stp_image *img, struct stp_cache *cache, uint32_t ino,
		       const struct stp_inode *in)
{
	static uint8_t value[STP_XATTR_VALUE_MAX];
	char name[STP_XATTR_NAME_MAX + 1], target[STP_LINK_MAX + 1];
	struct stp_xattr x;
	struct stp_extent ext;
	size_t len;

	for (uint32_t i = 0; i < in->xattr_count && i < MAX_ENTRIES; i++) {
		if (stp_image_xattr(img, in, i, &x, name) || stp_image_xattr_value(img, &x, value))
			continue;
		FUZZ_ASSERT(x.name_len && x.name_len <= STP_XATTR_NAME_MAX && !memchr(name, 0, x.name_len));
		touch(name, x.name_len);
		touch(value, x.value_len);
	}
	switch (stp_mode_dtype(in->mode)) {
	case DT_DIR:
		walk_dir(img, ino, in);
		break;
	case DT_LNK:
		if (!stp_image_readlink(img, in, target, &len))
			touch(target, len);
		break;
	case DT_REG:
		for (uint32_t i = 0; i < in->count && i < MAX_ENTRIES; i++)
			if (!stp_image_extent(img, in, i, &ext))
				FUZZ_ASSERT(ext.length && ext.file_off + ext.length <= in->size);
		if (cache)
			read_file(img, cache, in);
		break;
	}
}

static void decode_blocks(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	uint32_t bs = stp_image_block_size(img);
	void *buf;

	if (bs > MAX_BLOCK_SIZE)
		return;
	buf = malloc(stp_image_block_buffer_size(img));
	if (!buf)
		return;
	for (uint64_t b = 0; b < sb->block_count && b < MAX_BLOCKS; b++) {
		struct stp_blockent be;

		FUZZ_ASSERT(stp_image_block_decoded_size(img, b) <= bs);
		if (stp_image_block(img, b, &be))
			continue;
		if (!stp_image_decode_block(img, b, buf))
			touch(buf, stp_image_block_decoded_size(img, b));
	}
	free(buf);
}

static void walk(const struct stp_image *img)
{
	static const char *const paths[] = { "", ".", "..", "a", "a/b/../c", "../../x", "x/",
					     "//", "lib/python3.11/os.py" };
	uint32_t count = stp_image_sb(img)->inode_count, ino;
	struct stp_cache *cache = NULL;

	if (stp_image_block_size(img) <= MAX_BLOCK_SIZE && stp_cache_new(img, 2, 1, &cache))
		cache = NULL;
	for (uint32_t i = 0; i < count && i < MAX_INODES; i++) {
		struct stp_inode in;

		if (!stp_image_inode(img, i, &in))
			walk_inode(img, cache, i, &in);
	}
	stp_cache_free(cache);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (!stp_image_resolve(img, paths[i], &ino))
			FUZZ_ASSERT(ino < count);
	decode_blocks(img);
}

static void open_and_walk(const uint8_t *data, size_t size)
{
	struct stp_image *img;

	if (stp_image_open_fd(fuzz_image_fd(data, size), "fuzz-input", &img))
		return;
	walk(img);
	stp_image_close(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_as_given_and_resealed(data, size, open_and_walk);
	return 0;
}
