/* SPDX-License-Identifier: MIT */
/*
 * A gear hash (one table lookup, a shift and an add per byte) over each large piece;
 * a cut falls where its top bits are zero, once the chunk holds a quarter of the mean,
 * and at four times the mean at the latest. The hash sees the last 64 bytes only, so the
 * cuts after a change fall back in step within a chunk or two.
 */
#include "chunks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "tree.h"

#define READ_SIZE (1u << 20)
#define MEAN_SHIFT 7          /* mean chunk: 1/128 block (256 KiB at 32 MiB) */
#define MEAN_MIN_LOG 16       /* but 64 KiB at least */
#define THRESHOLD_SHIFT 3     /* pieces of 1/8 block and more are cut */

struct chunk_rule {
	uint64_t min, max;
	unsigned bits;        /* a cut where the hash's top BITS bits are zero */
};

static uint64_t gear[256];

/* The table: splitmix64 from a fixed seed, the same on every host. */
static void gear_init(void)
{
	uint64_t s = 0x73746970706c65ull; /* "stipple" */

	if (gear[0])
		return;
	for (int i = 0; i < 256; i++) {
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		gear[i] = z ^ (z >> 31);
	}
}

static void chunk_rule(struct chunk_rule *r, unsigned block_log, unsigned mean_log)
{
	if (!mean_log)
		mean_log = block_log > MEAN_SHIFT + MEAN_MIN_LOG ? block_log - MEAN_SHIFT
								 : MEAN_MIN_LOG;
	uint64_t block = 1ull << block_log;

	r->bits = mean_log;
	r->min = (1ull << mean_log) / 4;
	r->max = (1ull << mean_log) * 4 < block ? (1ull << mean_log) * 4 : block;
}

uint64_t chunks_threshold(unsigned block_log, unsigned mean_log)
{
	uint64_t t = (1ull << block_log) >> THRESHOLD_SHIFT;
	struct chunk_rule r;

	chunk_rule(&r, block_log, mean_log);
	return t > 2 * r.max ? t : 2 * r.max;
}

struct cutter {
	const struct chunk_rule *r;
	uint64_t h, len;      /* the hash and the length of the chunk so far */
};

/* Feeds BUF to C; returns how many bytes of it go into the chunk before a cut (a cut
 * then follows them), or N when the chunk goes on past BUF. */
static size_t cut_in(struct cutter *c, const uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		c->h = (c->h << 1) + gear[buf[i]];
		c->len++;
		if (c->len >= c->r->max ||
		    (c->len >= c->r->min && !(c->h >> (64 - c->r->bits)))) {
			c->h = 0;
			c->len = 0;
			return i + 1;
		}
	}
	return n;
}

struct plist {
	struct piece *v;
	size_t n, cap;
};

static int plist_add(struct plist *l, struct piece pc)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 1024;
		struct piece *v = reallocarray(l->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = pc;
	return 0;
}

/* Adds PC to L, cut where its bytes say; left whole when the file cannot be read. */
static int add_cut(struct plist *l, const struct piece *pc, const struct chunk_rule *r,
		   uint8_t *buf)
{
	struct source_file sf = { .fd = -1 };
	struct cutter c = { .r = r };
	size_t first = l->n;
	uint64_t at = pc->start, from = pc->start;
	int rc = 0;

	if (source_file_open(pc->file, &sf))
		return plist_add(l, *pc);
	while (!rc && at < pc->end) {
		size_t want = pc->end - at < READ_SIZE ? (size_t)(pc->end - at) : READ_SIZE;
		ssize_t got = source_file_pread(&sf, buf, want, at);
		size_t used = 0;

		if (got <= 0)
			break; /* the packer finds out why, and reports it */
		while (!rc && used < (size_t)got) {
			size_t k = cut_in(&c, buf + used, (size_t)got - used);

			used += k;
			if (!c.len) { /* a cut after these bytes */
				rc = plist_add(l, (struct piece){ pc->file, from, at + used, 1 });
				from = at + used;
			}
		}
		at += (uint64_t)got;
	}
	source_file_close(&sf);
	if (!rc && from < pc->end)
		rc = plist_add(l, (struct piece){ pc->file, from, pc->end, 1 });
	if (!rc && l->n - first == 1)
		l->v[first].alone = 0; /* not cut: an ordinary piece */
	return rc;
}

int chunks_split(struct piece **order, size_t nhot, size_t *count, unsigned block_log,
		 unsigned mean_log)
{
	uint64_t threshold = chunks_threshold(block_log, mean_log);
	struct plist l = { 0 };
	struct chunk_rule r;
	uint8_t *buf = malloc(READ_SIZE);
	int rc = buf ? 0 : -ENOMEM;

	gear_init();
	chunk_rule(&r, block_log, mean_log);
	for (size_t i = 0; i < *count && !rc; i++) {
		const struct piece *pc = &(*order)[i];

		rc = i >= nhot && pc->end - pc->start >= threshold && !pc->file->trouble
		     ? add_cut(&l, pc, &r, buf) : plist_add(&l, *pc);
	}
	free(buf);
	if (rc) {
		free(l.v);
		return rc;
	}
	free(*order);
	*order = l.v;
	*count = l.n;
	return 0;
}
