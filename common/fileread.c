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
	unsigned log = stp_image_sb(img)->block_log;

	while (len) {
		uint64_t block = stream_off >> log;
		size_t in_block = (size_t)(stream_off - (block << log));
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

ssize_t stp_file_read(const struct stp_image *img, struct stp_cache *cache,
		      const struct stp_inode *inode, uint64_t off, size_t len, void *buf)
{
	uint8_t *out = buf;
	uint64_t end, pos = off;
	uint32_t i;
	int rc;

	if (!S_ISREG(inode->mode))
		return -EISDIR;
	if (off >= inode->size)
		return 0;
	end = inode->size - off < len ? inode->size : off + len;
	rc = stp_image_extent_find(img, inode, off, &i);
	if (rc)
		return rc;
	for (; i < inode->count && pos < end; i++) {
		struct stp_extent e;
		uint64_t from, to;

		rc = stp_image_extent(img, inode, i, &e);
		if (rc)
			return rc;
		if (e.file_off >= end)
			break;
		if (e.file_off < pos && e.file_off + e.length <= pos)
			return STP_CORRUPT(stp_image_path(img), "extents of a file out of order");
		from = e.file_off > pos ? e.file_off : pos;
		to = e.file_off + e.length < end ? e.file_off + e.length : end;
		memset(out + (pos - off), 0, from - pos); /* a hole before the extent */
		rc = copy_stream(img, cache, e.stream_off + (from - e.file_off), to - from,
				 out + (from - off));
		if (rc)
			return rc;
		pos = to;
	}
	memset(out + (pos - off), 0, end - pos);
	return (ssize_t)(end - off);
}
