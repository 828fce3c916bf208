/* SPDX-License-Identifier: MIT */
/* Reading a file's bytes: extents to stream ranges, cut at block edges, to pinned blocks. */
#include "fileread.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "image.h"
#include "log.h"

/* Calls FN for the stored run of LEN bytes at FILE_OFF from stream offset STREAM, one
 * piece per block it touches. */
static int walk_stream(const struct stp_superblock *sb, uint64_t file_off, uint64_t stream,
		       uint64_t len, stp_file_piece_fn fn, void *ctx)
{
	int rc = 0;

	while (!rc && len) {
		uint64_t block = stp_sb_block_of(sb, stream);
		uint64_t start = stp_sb_block_start(sb, block);
		uint64_t room = stp_sb_block_end(sb, block) - stream;
		struct stp_file_piece p = { file_off, len, block, stream - start, stream };

		if (room && room < len)
			p.len = room; /* no room: past the stream, the reader's get refuses it */
		rc = fn(ctx, &p);
		file_off += p.len;
		stream += p.len;
		len -= p.len;
	}
	return rc;
}

static int walk_hole(uint64_t file_off, uint64_t len, stp_file_piece_fn fn, void *ctx)
{
	struct stp_file_piece p = { file_off, len, STP_FILE_HOLE, 0, 0 };

	return fn(ctx, &p);
}

/* One data piece for the whole stored run: enough for who asks only where data is, and
 * O(1) however many blocks the run crosses (extents may each span the whole stream). */
static int walk_run(const struct stp_superblock *sb, uint64_t file_off, uint64_t stream,
		    uint64_t len, stp_file_piece_fn fn, void *ctx)
{
	struct stp_file_piece p = { file_off, len, stp_sb_block_of(sb, stream), 0, stream };

	return fn(ctx, &p);
}

/* Where a walk's extents come from: INODE's in IMG, read one by one, or V[0..N) when
 * the caller read them already (V NULL: not). */
struct extents {
	const struct stp_image *img;
	const struct stp_inode *inode;
	const struct stp_extent *v;
	uint32_t n;
};

/* The index of the first extent of X that ends past OFF (X's count when none does). */
static int extent_find(const struct extents *x, uint64_t off, uint32_t *index)
{
	uint32_t lo = 0, hi = x->n;

	if (!x->v)
		return stp_image_extent_find(x->img, x->inode, off, index);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (x->v[mid].file_off + x->v[mid].length <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	*index = lo;
	return 0;
}

static int extent_get(const struct extents *x, uint32_t i, struct stp_extent *e)
{
	if (!x->v)
		return stp_image_extent(x->img, x->inode, i, e);
	*e = x->v[i];
	return 0;
}

/* The walk of stp_file_walk over X's extents; CUT false gives each extent's run as one
 * piece. */
static int walk_extents(const struct extents *x, uint64_t off, uint64_t len, bool cut,
			stp_file_piece_fn fn, void *ctx)
{
	const struct stp_superblock *sb = stp_image_sb(x->img);
	uint64_t size = x->inode->size, end = off < size && len < size - off ? off + len : size;
	uint32_t i;
	int rc = off < end ? extent_find(x, off, &i) : 0;

	for (; !rc && off < end; i++) {
		struct stp_extent e = { .file_off = end, .length = 0 };
		uint64_t from, to;

		if (i < x->n && (rc = extent_get(x, i, &e)))
			break;
		if (e.file_off >= end)
			e.file_off = end; /* past the range: what is left is a hole */
		else if (e.file_off + e.length <= off)
			return STP_CORRUPT(stp_image_path(x->img), "extent %llu out of order",
					   (unsigned long long)(x->inode->data + i));
		from = e.file_off > off ? e.file_off : off;
		if (from > off)
			rc = walk_hole(off, from - off, fn, ctx);
		to = e.file_off + e.length < end ? e.file_off + e.length : end;
		if (!rc && to > from)
			rc = (cut ? walk_stream : walk_run)(sb, from,
							    e.stream_off + (from - e.file_off),
							    to - from, fn, ctx);
		off = to > from ? to : from;
	}
	return rc;
}

int stp_file_walk(const struct stp_image *img, const struct stp_inode *inode, uint64_t off,
		  uint64_t len, stp_file_piece_fn fn, void *ctx)
{
	const struct extents x = { img, inode, NULL, inode->count };

	return walk_extents(&x, off, len, true, fn, ctx);
}

int stp_file_walk_read(const struct stp_image *img, const struct stp_inode *inode,
		       const struct stp_extent *v, uint64_t off, uint64_t len,
		       stp_file_piece_fn fn, void *ctx)
{
	const struct extents x = { img, inode, v, inode->count };

	return walk_extents(&x, off, len, true, fn, ctx);
}

int stp_file_piece_check(const struct stp_image *img, const struct stp_file_piece *p,
			 size_t size)
{
	if (p->in_block < size && p->len <= size - p->in_block)
		return 0;
	return STP_CORRUPT(stp_image_path(img), "extent past block %llu (%zu bytes)",
			   (unsigned long long)p->block, size);
}

struct page_count {
	uint64_t next; /* the first page not counted yet */
	uint64_t pages;
};

static int count_pages(void *arg, const struct stp_file_piece *p)
{
	struct page_count *c = arg;
	uint64_t first = p->file_off / STP_FILE_PAGE;
	uint64_t end = (p->file_off + p->len - 1) / STP_FILE_PAGE + 1;

	if (p->block == STP_FILE_HOLE)
		return 0;
	if (first < c->next)
		first = c->next; /* a page two pieces share counts once */
	if (end > first)
		c->pages += end - first;
	if (end > c->next)
		c->next = end;
	return 0;
}

int stp_file_stored_pages(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t *pages)
{
	const struct extents x = { img, inode, NULL, inode->count };
	struct page_count c = { 0, 0 };
	int rc = walk_extents(&x, 0, inode->size, false, count_pages, &c);

	*pages = c.pages;
	return rc;
}

struct seek_ctx {
	bool data;
	uint64_t off; /* where the search begins */
	uint64_t *out;
};

#define SEEK_FOUND 1

static int seek_piece(void *arg, const struct stp_file_piece *p)
{
	struct seek_ctx *c = arg;

	if ((p->block != STP_FILE_HOLE) != c->data)
		return 0;
	*c->out = p->file_off > c->off ? p->file_off : c->off;
	return SEEK_FOUND;
}

int stp_file_seek(const struct stp_image *img, const struct stp_inode *inode, uint64_t off,
		  bool data, uint64_t *out)
{
	const struct extents x = { img, inode, NULL, inode->count };
	struct seek_ctx c = { data, off, out };
	int rc;

	if (off >= inode->size)
		return -ENXIO;
	rc = walk_extents(&x, off, inode->size - off, false, seek_piece, &c);
	if (rc == SEEK_FOUND)
		return 0;
	if (rc)
		return rc;
	if (data)
		return -ENXIO;
	*out = inode->size; /* the hole every file ends with */
	return 0;
}

struct read_ctx {
	const struct stp_image *img;
	struct stp_cache *cache;
	uint64_t off; /* the file offset of buf[0] */
	uint8_t *buf;
};

static int read_piece(void *arg, const struct stp_file_piece *p)
{
	struct read_ctx *c = arg;
	uint8_t *out = c->buf + (p->file_off - c->off);
	struct stp_block_ref ref;
	int rc;

	if (p->block == STP_FILE_HOLE) {
		memset(out, 0, p->len);
		return 0;
	}
	rc = stp_cache_get(c->cache, p->block, &ref);
	if (rc)
		return rc;
	rc = stp_file_piece_check(c->img, p, ref.size);
	if (!rc)
		stp_cache_copy(&ref, (size_t)p->in_block, (size_t)p->len, out);
	stp_cache_release(c->cache, &ref);
	return rc;
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
