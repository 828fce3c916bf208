/* SPDX-License-Identifier: MIT */
/*
 * A tiny image made in memory for the unit tests of what reads one: a root directory
 * listing regular files, whose extents the test states, over a stream of raw blocks of
 * 64 KiB (the smallest: MEM_BLOCK) whose byte i is mem_byte(i). The records are made with format.c's encoders (their
 * bytes are pinned by test_format.c) and the image written to a memfd, so a test can
 * hand the library any extent table, sound or not, without mkstipple.
 */
#ifndef STP_TEST_MEMIMAGE_H
#define STP_TEST_MEMIMAGE_H

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format.h"
#include "image.h"
#include "util.h"

struct mem_file {
	const char *name;             /* the root lists the files in the order given */
	uint64_t size;
	const struct stp_extent *ext; /* ext[0..next), taken as they are */
	uint32_t next;
};

static inline uint8_t mem_byte(uint64_t stream_off) { return (uint8_t)(stream_off * 7 + 1); }

static inline size_t mem_align8(size_t n) { return (n + 7) & ~(size_t)7; }

#define MEM_BLOCK (1u << STP_BLOCK_LOG_MIN)

static inline uint64_t mem_blocks(uint64_t data_size)
{
	return (data_size + MEM_BLOCK - 1) / MEM_BLOCK;
}

/* The metadata of FILES[0..N) (inodes 1..N) over the DATA_SIZE bytes of STREAM, stored
 * right after the superblock, into a calloc'ed buffer of *LEN bytes. */
static uint8_t *mem_metadata(const struct mem_file *files, unsigned n, const uint8_t *stream,
			     uint64_t data_size, size_t *len)
{
	struct stp_meta_header h = { .inode_count = n + 1, .dirent_count = n,
				     .block_count = mem_blocks(data_size) };
	size_t names = 0;
	uint32_t next = 0, name_off = 0;
	uint8_t *m;

	for (unsigned i = 0; i < n; i++) {
		h.extent_count += files[i].next;
		names += strlen(files[i].name);
	}
	h.inode_off = STP_META_HDR_SIZE;
	h.dirent_off = mem_align8(h.inode_off + (size_t)h.inode_count * STP_INODE_SIZE);
	h.extent_off = mem_align8(h.dirent_off + (size_t)n * STP_DIRENT_SIZE);
	h.xattr_off = h.extent_off + (size_t)h.extent_count * STP_EXTENT_SIZE;
	h.block_off = h.xattr_off;
	h.strings_off = h.block_off + h.block_count * STP_BLOCKENT_SIZE;
	h.strings_size = names;
	*len = h.strings_off + names;
	m = calloc(1, *len);
	if (!m)
		abort();
	stp_meta_header_encode(&h, m);
	stp_inode_encode(&(struct stp_inode){ .mode = 040755, .nlink = 2, .size = n, .count = n },
			 m + h.inode_off);
	for (unsigned i = 0; i < n; i++) {
		const struct mem_file *f = &files[i];
		size_t nl = strlen(f->name);

		stp_inode_encode(&(struct stp_inode){ .mode = 0100644, .nlink = 1, .size = f->size,
						      .data = next, .count = f->next },
				 m + h.inode_off + (i + 1) * STP_INODE_SIZE);
		stp_dirent_encode(&(struct stp_dirent){ .ino = i + 1, .name_off = name_off,
							.name_len = (uint16_t)nl, .dtype = DT_REG },
				  m + h.dirent_off + i * STP_DIRENT_SIZE);
		memcpy(m + h.strings_off + name_off, f->name, nl);
		name_off += (uint32_t)nl;
		for (uint32_t k = 0; k < f->next; k++, next++)
			stp_extent_encode(&f->ext[k], m + h.extent_off + next * STP_EXTENT_SIZE);
	}
	for (uint64_t b = 0; b < h.block_count; b++) {
		uint64_t at = b * MEM_BLOCK, blen = data_size - at < MEM_BLOCK ? data_size - at
									  : MEM_BLOCK;

		stp_blockent_encode(&(struct stp_blockent){
					    .offset = STP_SB_SIZE + at, .stored_size = (uint32_t)blen,
					    .codec = STP_CODEC_RAW,
					    .checksum = stp_checksum(stream + at, blen) },
				    m + h.block_off + b * STP_BLOCKENT_SIZE);
	}
	return m;
}

/* Changes the metadata (LEN bytes, header first) before the image is written. */
typedef void (*mem_edit_fn)(uint8_t *meta, size_t len, void *ctx);

/* The image of FILES[0..N) over DATA_SIZE stream bytes, its metadata
 * changed by EDIT (if not NULL), opened: the open's result. The caller closes *OUT. */
static int mem_image_open_edited(const struct mem_file *files, unsigned n, uint64_t data_size,
				 mem_edit_fn edit, void *ctx, struct stp_image **out)
{
	uint8_t *stream = malloc(data_size ? data_size : 1), *meta, *img;
	size_t meta_len, image_len;
	struct stp_superblock sb = {
		.version = STP_FORMAT_VERSION, .block_log = STP_BLOCK_LOG_MIN, .data_size = data_size,
		.block_count = mem_blocks(data_size), .meta_offset = STP_SB_SIZE + data_size,
		.meta_codec = STP_CODEC_RAW, .inode_count = n + 1,
	};
	int fd = memfd_create("stipple-test-image", MFD_CLOEXEC);

	if (fd < 0 || !stream)
		abort();
	for (uint64_t i = 0; i < data_size; i++)
		stream[i] = mem_byte(i);
	meta = mem_metadata(files, n, stream, data_size, &meta_len);
	if (edit)
		edit(meta, meta_len, ctx);
	sb.meta_stored_size = sb.meta_size = meta_len;
	sb.meta_checksum = stp_checksum(meta, meta_len);
	sb.image_size = image_len = STP_SB_SIZE + data_size + meta_len;
	img = calloc(1, image_len);
	if (!img)
		abort();
	stp_sb_encode(&sb, img);
	memcpy(img + STP_SB_SIZE, stream, data_size);
	memcpy(img + sb.meta_offset, meta, meta_len);
	if (stp_pwrite_full(fd, img, image_len, 0))
		abort();
	free(img);
	free(meta);
	free(stream);
	return stp_image_open_fd(fd, "memimage", out);
}

static int mem_image_open(const struct mem_file *files, unsigned n, uint64_t data_size,
			  struct stp_image **out)
{
	return mem_image_open_edited(files, n, data_size, NULL, NULL, out);
}

#endif
