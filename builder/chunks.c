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

#include <xxhash.h>

#include "base.h"
#include "source.h"
#include "tree.h"
#include "util.h"

#define READ_SIZE (1u << 20)
#define MEAN_SHIFT 7          /* mean chunk: 1/128 block (256 KiB at 32 MiB) */
#define MEAN_MIN_LOG 16       /* but 64 KiB at least */
#define THRESHOLD_SHIFT 3     /* pieces of 1/8 block and more are cut */
/* With --base, a file is cut only when at least 1/SHARED_DEN of its bytes lie in cuts
 * OLD's file has too: cutting costs ratio (7% on a JDK), sharing nothing gains none. */
#define SHARED_DEN 8

struct chunk_rule {
	uint64_t min, max;
	unsigned bits;        /* a cut where the hash's top BITS bits are zero */
};

static uint64_t gear[256];
static int gear_ready;

/* The table: splitmix64 from a fixed seed, the same on every host. */
static void gear_init(void)
{
	uint64_t s = 0x73746970706c65ull; /* "stipple" */

	if (gear_ready)
		return;
	gear_ready = 1;
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
	XXH3_state_t *id;     /* NULL, or the chunk's XXH3 so far */
};

/* Feeds BUF to C; returns how many bytes of it go into the chunk before a cut (a cut
 * then follows them), or N when the chunk goes on past BUF. */
static size_t cut_in(struct cutter *c, const uint8_t *buf, size_t n)
{
	size_t i = 0;

	while (i < n) {
		c->h = (c->h << 1) + gear[buf[i++]];
		c->len++;
		if (c->len >= c->r->max ||
		    (c->len >= c->r->min && !(c->h >> (64 - c->r->bits)))) {
			c->h = 0;
			c->len = 0;
			break;
		}
	}
	if (c->id)
		XXH3_64bits_update(c->id, buf, i);
	return i;
}

/* The chunk just ended: its XXH3, and the state reset for the next. */
static uint64_t chunk_id(struct cutter *c)
{
	uint64_t id = XXH3_64bits_digest(c->id);

	XXH3_64bits_reset(c->id);
	return id;
}

/* The XXH3 of each cut of OLD's file, sorted. */
struct ids {
	uint64_t *v;
	size_t n, cap;
	struct cutter c;
};

static int ids_add(struct ids *s, uint64_t id)
{
	int rc = stp_room_for(&s->v, &s->cap, s->n, sizeof(*s->v));

	if (!rc)
		s->v[s->n++] = id;
	return rc;
}

static int old_run(void *ctx, const uint8_t *bytes, size_t len)
{
	struct ids *s = ctx;
	int rc = 0;

	for (size_t used = 0; used < len && !rc;) {
		used += cut_in(&s->c, bytes + used, len - used);
		if (!s->c.len)
			rc = ids_add(s, chunk_id(&s->c));
	}
	return rc;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a > b) - (a < b);
}

/* *S: the cuts of OLD's file at F's path (none when OLD has no such file, or one laid
 * out unlike what mkstipple writes). 0 or -errno. */
static int old_ids(struct base *base, const struct node *f, struct ids *s)
{
	int rc = base_old_bytes(base, f, old_run, s);

	if (rc < 0)
		return rc;
	if (rc == 1) { /* no such file in OLD, or none to read: no cut shared */
		s->n = 0;
		return 0;
	}
	if (s->c.len)
		rc = ids_add(s, chunk_id(&s->c));
	qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
	return rc;
}

static int ids_have(const struct ids *s, uint64_t id)
{
	return s->n && bsearch(&id, s->v, s->n, sizeof(id), cmp_u64) != NULL;
}

struct plist {
	struct piece *v;
	size_t n, cap;
};

static int plist_add(struct plist *l, struct piece pc)
{
	int rc = stp_room_for(&l->v, &l->cap, l->n, sizeof(*l->v));

	if (!rc)
		l->v[l->n++] = pc;
	return rc;
}

/* The cuts of OLD's file at one path, kept while the pieces of that file come (the
 * rests a hot list leaves of one file follow one another): OLD's file is walked once. */
struct old_cuts {
	const struct node *file; /* NULL: none yet */
	struct ids ids;
};

/* O's cuts for F's path, walked anew when O holds another file's. 0 or -errno. */
static int old_cuts_of(struct base *base, const struct node *f, struct old_cuts *o,
		       const struct chunk_rule *r, XXH3_state_t *id)
{
	int rc;

	if (o->file == f)
		return 0;
	o->file = NULL;
	o->ids.n = 0;
	o->ids.c = (struct cutter){ .r = r, .id = id };
	XXH3_64bits_reset(id);
	rc = old_ids(base, f, &o->ids);
	XXH3_64bits_reset(id);
	if (!rc)
		o->file = f;
	return rc;
}

/* Adds PC to L, cut where its bytes say; left whole when the file cannot be read or,
 * when OLD (BASE, if not NULL; its cuts in *OC) is given, shares too few of its cuts. */
static int add_cut(struct plist *l, const struct piece *pc, const struct chunk_rule *r,
		   uint8_t *buf, struct base *base, struct old_cuts *oc, XXH3_state_t *id)
{
	struct source_file sf = { .fd = -1 };
	struct cutter c = { .r = r, .id = base ? id : NULL };
	const struct ids *old = &oc->ids;
	size_t first = l->n;
	uint64_t at = pc->start, from = pc->start, shared = 0;
	int rc = 0;

	if (base) {
		rc = old_cuts_of(base, pc->file, oc, r, id);
		if (rc || !old->n)
			return rc ? rc : plist_add(l, *pc);
		XXH3_64bits_reset(id); /* this piece's first cut starts here */
	}
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
				if (base && ids_have(old, chunk_id(&c)))
					shared += at + used - from;
				rc = plist_add(l, (struct piece){ pc->file, from, at + used, 1 });
				from = at + used;
			}
		}
		at += (uint64_t)got;
	}
	source_file_close(&sf);
	if (!rc && from < pc->end) {
		if (base && ids_have(old, chunk_id(&c)))
			shared += pc->end - from;
		rc = plist_add(l, (struct piece){ pc->file, from, pc->end, 1 });
	}
	if (!rc && base && shared < (pc->end - pc->start) / SHARED_DEN) {
		l->n = first; /* not worth its cost */
		return plist_add(l, *pc);
	}
	if (!rc && l->n - first == 1)
		l->v[first].alone = 0; /* not cut: an ordinary piece */
	return rc;
}

int chunks_split(struct piece **order, size_t nhot, size_t *count, unsigned block_log,
		 unsigned mean_log, struct base *base)
{
	uint64_t threshold = chunks_threshold(block_log, mean_log);
	struct plist l = { 0 };
	struct old_cuts oc = { 0 };
	struct chunk_rule r;
	uint8_t *buf = malloc(READ_SIZE);
	XXH3_state_t *id = XXH3_createState();
	int rc = buf && id ? 0 : -ENOMEM;

	gear_init();
	chunk_rule(&r, block_log, mean_log);
	for (size_t i = 0; i < *count && !rc; i++) {
		const struct piece *pc = &(*order)[i];

		rc = i >= nhot && pc->end - pc->start >= threshold && !pc->file->trouble
		     ? add_cut(&l, pc, &r, buf, base, &oc, id) : plist_add(&l, *pc);
	}
	free(oc.ids.v);
	free(buf);
	XXH3_freeState(id);
	if (rc) {
		free(l.v);
		return rc;
	}
	free(*order);
	*order = l.v;
	*count = l.n;
	return 0;
}
