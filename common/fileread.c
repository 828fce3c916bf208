/* SPDX-License-Identifier: MIT */
/* Reading a file's bytes: extents to stream ranges to pinned blocks. */
#include "fileread.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "image.h"
#include "log.h"

/* Copies LEN stream bytes starting at STREAM_OFF into OUT, block by block. */
static int copy_stream(const struct stp_image *img, struct stp_cache *cache, uint64_t stream_off,
		       size_t len, uint8_t *out)
{
	const struct stp_superblock *sb = stp_image_sb(img);

	while (len) {
		uint64_t block = stp_sb_block_of(sb, stream_off);
		size_t in_block = (size_t)(stream_off - stp_sb_block_start(sb, block));
		struct stp_block_ref ref;
		size_t n;
		int rc = stp_cache_get(cache, block, &ref);

		if (rc)
			return rc;
		if (in_block >= ref.size) {
			stp_cache_release(cache, &ref);
			return STP_CORRUPT(stp_image_path(img), "extent past block %llu",
					   (unsigned long long)block);
		}
		n = ref.size - in_block < len ? ref.size - in_block : len;
		memcpy(out, ref.data + in_block, n);
		stp_cache_release(cache, &ref);
		out += n;
		len -= n;
		stream_off += n;
	}
	return 0;
}

int stp_file_walk(const struct stp_image *img, const struct stp_inode *inode, uint64_t off,
		  uint64_t len, stp_file_piece_fn fn, void *ctx)
{
	uint64_t end = off < inode->size && len < inode->size - off ? off + len : inode->size;
	uint32_t i;
	int rc = off < end ? stp_image_extent_find(img, inode, off, &i) : 0;

	for (; !rc && off < end; i++) {
		struct stp_extent e = { .file_off = end, .length = 0 };
		uint64_t from, to;

		if (i < inode->count && (rc = stp_image_extent(img, inode, i, &e)))
			break;
		if (e.file_off >= end)
			e.file_off = end; /* past the range: what is left is a hole */
		else if (e.file_off + e.length <= off)
			return STP_CORRUPT(stp_image_path(img), "extent %llu out of order",
					   (unsigned long long)(inode->data + i));
		from = e.file_off > off ? e.file_off : off;
		if (from > off)
			rc = fn(ctx, off, STP_FILE_HOLE, from - off);
		to = e.file_off + e.length < end ? e.file_off + e.length : end;
		if (!rc && to > from)
			rc = fn(ctx, from, e.stream_off + (from - e.file_off), to - from);
		off = to > from ? to : from;
	}
	return rc;
}

struct read_ctx {
	const struct stp_image *img;
	struct stp_cache *cache;
	uint64_t off; /* the file offset of buf[0] */
	uint8_t *buf;
};

static int read_piece(void *arg, uint64_t file_off, uint64_t stream_off, uint64_t len)
{
	struct read_ctx *c = arg;
	uint8_t *out = c->buf + (file_off - c->off);

	if (stream_off == STP_FILE_HOLE) {
		memset(out, 0, len);
		return 0;
	}
	return copy_stream(c->img, c->cache, stream_off, len, out);
}

ssize_t stp_file_read(const struct stp_image *img, struct stp_cache *cache,
		      const struct stp_inode *inode, uint64_t off, size_t len, void *buf)
{
	struct read_ctx c = { img, cache, off, buf };
	int rc;

	if (!S_ISREG(inode->mode))
		return -EISDIR;
	if (off >= inode->size)
		return 0;
	if (len > inode->size - off)
		len = (size_t)(inode->size - off);
	rc = stp_file_walk(img, inode, off, len, read_piece, &c);
	return rc ? rc : (ssize_t)len;
}
