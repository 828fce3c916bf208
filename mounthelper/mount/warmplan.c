/* SPDX-License-Identifier: MIT */
#include "warmplan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileread.h"
#include "format.h"
#include "image.h"
#include "log.h"
#include "treewalk.h"

struct collect {
	const struct stp_image *img;
	struct stp_warm_plan *p;
	uint32_t cap;
	uint64_t max;   /* segments: one per extent, plus one per block edge an extent crosses */
};

uint64_t stp_warm_plan_blocks(const struct stp_superblock *sb)
{
	uint64_t hot = sb->hot_size < sb->data_size ? sb->hot_size : sb->data_size;

	return hot ? stp_sb_block_of(sb, hot - 1) + 1 : 0;
}

uint64_t stp_warm_plan_memory(const struct stp_superblock *sb)
{
	uint64_t blocks = stp_warm_plan_blocks(sb), segs = blocks + sb->meta_size / STP_EXTENT_SIZE;

	/* segs and by_ino; block_first and block_pages; ino_first and the sort's next */
	return segs * (sizeof(struct stp_warm_seg) + sizeof(uint32_t)) +
	       blocks * 2 * sizeof(uint32_t) + (uint64_t)sb->inode_count * 2 * sizeof(uint32_t);
}

static int add_seg(struct collect *c, const struct stp_warm_seg *s)
{
	struct stp_warm_plan *p = c->p;

	if (p->nsegs >= c->max)
		return STP_CORRUPT(stp_image_path(c->img), "hot extents of files overlap: "
				   "more than %llu pieces in %llu hot blocks",
				   (unsigned long long)c->max, (unsigned long long)p->nblocks);
	if (p->nsegs == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 256;
		struct stp_warm_seg *grown;

		if (c->cap > UINT32_MAX / 2 || !(grown = reallocarray(p->segs, cap, sizeof(*grown))))
			return -ENOMEM;
		p->segs = grown;
		c->cap = cap;
	}
	p->segs[p->nsegs++] = *s;
	return 0;
}

struct collect_file {
	struct collect *c;
	uint32_t ino;
	uint64_t size;
	int rc;        /* what add_seg said, 0 when the walk stopped on its own */
	int hot;       /* it has hot bytes */
	uint64_t follow_end; /* where its bytes in the block after the hot region end, or 0 */
	int runs_on;   /* it has bytes in a block after that one */
};

/* Adds the hot part of a stored piece (the walk cut it at block edges). */
static int collect_piece(void *ctx, const struct stp_file_piece *fp)
{
	struct collect_file *cf = ctx;
	uint64_t hot = cf->c->p->hot_size;
	struct stp_warm_seg s = { cf->ino, fp->file_off, fp->stream_off, 0, cf->size };

	if (fp->block == STP_FILE_HOLE)
		return 0;
	if (fp->stream_off >= hot) {
		if (fp->block == cf->c->p->nblocks && fp->stream_off + fp->len > cf->follow_end)
			cf->follow_end = fp->stream_off + fp->len;
		cf->runs_on |= fp->block > cf->c->p->nblocks;
		return 0;
	}
	cf->hot = 1;
	s.len = fp->len < hot - fp->stream_off ? fp->len : hot - fp->stream_off;
	cf->rc = add_seg(cf->c, &s);
	return cf->rc;
}

/* A file whose extents do not read is left out of the plan: its reads report it. */
static int collect_file(void *ctx, uint32_t ino, const struct stp_inode *in)
{
	struct collect_file cf = { ctx, ino, in->size, 0, 0, 0, 0 };
	struct stp_warm_plan *p = cf.c->p;
	uint64_t end;

	stp_file_walk(((struct collect *)ctx)->img, in, 0, in->size, collect_piece, &cf);
	/* a rest that runs on past the block holds there only its first bytes, not those
	 * near its hot ranges more than any others: it is left out (the JDK's lib/modules,
	 * 16 of 25 MiB decoded for an eighth of its 120 MiB rest) */
	if (cf.hot && cf.follow_end && !cf.runs_on) {
		end = cf.follow_end - stp_sb_block_start(p->sb, p->nblocks);
		p->follow = 1;
		p->follow_end = end > p->follow_end ? end : p->follow_end;
	}
	return cf.rc;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct stp_warm_seg *x = a, *y = b;

	return (x->stream_off > y->stream_off) - (x->stream_off < y->stream_off);
}

/* Segment numbers grouped by inode (a counting sort), in stream order within each. */
static int index_by_inode(struct stp_warm_plan *p)
{
	uint32_t *next;

	p->ino_first = calloc((size_t)p->ninodes + 1, sizeof(*p->ino_first));
	p->by_ino = reallocarray(NULL, p->nsegs ? p->nsegs : 1, sizeof(*p->by_ino));
	next = reallocarray(NULL, p->ninodes ? p->ninodes : 1, sizeof(*next));
	if (!p->ino_first || !p->by_ino || !next) {
		free(next);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s < p->nsegs; s++)
		p->ino_first[p->segs[s].ino + 1]++;
	for (uint32_t i = 0; i < p->ninodes; i++)
		p->ino_first[i + 1] += p->ino_first[i];
	memcpy(next, p->ino_first, p->ninodes * sizeof(*next));
	for (uint32_t s = 0; s < p->nsegs; s++)
		p->by_ino[next[p->segs[s].ino]++] = s;
	free(next);
	return 0;
}

/* The pages of segments FIRST to END (by stream offset), each page counted once (a
 * file's copies share their extents). */
static uint32_t seg_pages(const struct stp_warm_plan *p, uint32_t first, uint32_t end)
{
	uint64_t next = 0; /* the first page not counted yet */
	uint32_t n = 0;

	for (uint32_t i = first; i < end; i++) {
		const struct stp_warm_seg *s = &p->segs[i];
		uint64_t a = s->stream_off / STP_HOT_PAGE;
		uint64_t b = (s->stream_off + s->len + STP_HOT_PAGE - 1) / STP_HOT_PAGE;

		a = a > next ? a : next;
		n += b > a ? (uint32_t)(b - a) : 0;
		next = b > next ? b : next;
	}
	return n;
}

/* Each block's first segment and its count of hot pages: the pages its segments cover.
 * Padding (the zeros of a block cut early, stipple(5)) is in no file: no store or read
 * ever marks it, so counted, it would keep the block held, and a hot region of more
 * blocks than the budget would stop warming with the budget full. */
static int index_by_block(struct stp_warm_plan *p)
{
	uint32_t s = 0;

	p->block_first = reallocarray(NULL, p->nblocks + 1, sizeof(*p->block_first));
	p->block_pages = reallocarray(NULL, p->nblocks ? p->nblocks : 1, sizeof(*p->block_pages));
	if (!p->block_first || !p->block_pages)
		return -ENOMEM;
	for (uint64_t k = 0; k < p->nblocks; k++) {
		uint64_t end = stp_sb_block_end(p->sb, k);

		if (end > p->hot_size)
			end = p->hot_size;
		p->block_first[k] = s;
		while (s < p->nsegs && p->segs[s].stream_off < end)
			s++;
		p->block_pages[k] = seg_pages(p, p->block_first[k], s);
	}
	p->block_first[p->nblocks] = s;
	return 0;
}

int stp_warm_plan_build(const struct stp_image *img, struct stp_warm_plan *p)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	struct collect c = { img, p, 0, 0 };
	int rc;

	memset(p, 0, sizeof(*p));
	p->sb = sb;
	p->hot_size = sb->hot_size < sb->data_size ? sb->hot_size : sb->data_size;
	p->nblocks = stp_warm_plan_blocks(sb);
	p->ninodes = sb->inode_count;
	c.max = p->nblocks + stp_image_meta_header(img)->extent_count;
	rc = p->hot_size ? stp_treewalk_files(img, collect_file, &c) : 0;
	if (!rc && p->nsegs)
		qsort(p->segs, p->nsegs, sizeof(*p->segs), cmp_seg);
	if (!rc)
		rc = index_by_inode(p);
	if (!rc)
		rc = index_by_block(p);
	return rc;
}

void stp_warm_plan_free(struct stp_warm_plan *p)
{
	free(p->segs);
	free(p->by_ino);
	free(p->ino_first);
	free(p->block_first);
	free(p->block_pages);
	memset(p, 0, sizeof(*p));
}
