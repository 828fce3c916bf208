/* SPDX-License-Identifier: MIT */
/* Ordering file data: hot list first, then similar files together. */
#include "order.h"
#include "order_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "hotlist.h"
#include "lookups.h"
#include "lines.h"
#include "report.h"
#include "util.h"

/* After the hot region and the rests of its files (cmp_similar): the files that are not
 * machine code, then programs by kind, so that the blocks the packer filters hold code
 * and little else. Programs cut at their code (CODE_APART) have their other bytes (symbol
 * tables, strings, data) before all the code: smaller, but a cold read of one program
 * then decodes two distant blocks. */
enum group { GROUP_PLAIN, GROUP_NEAR_CODE, GROUP_X86, GROUP_ARM64 };

static enum group piece_group(const struct piece *p)
{
	const struct node *f = p->file;

	if (f->filter == STP_FILTER_NONE)
		return GROUP_PLAIN;
	if (p->end <= f->code->start || p->start >= f->code->end)
		return GROUP_NEAR_CODE; /* holds none of the code */
	return f->filter == STP_FILTER_ARM64 ? GROUP_ARM64 : GROUP_X86;
}

/* Nodes from beneath the common ancestor down to a file, to walk its path's bytes. */
struct path_cursor {
	const struct node **chain;
	size_t n, i, off;
};

/* Room for the chains, as deep as the deepest file; main thread only, like the qsort
 * that uses them. */
static const struct node **chains;

static void cursor_fill(struct path_cursor *c, const struct node *f, const struct node *top)
{
	size_t n = 0;

	for (const struct node *x = f; x != top; x = x->parent)
		n++;
	c->n = n;
	c->i = c->off = 0;
	for (const struct node *x = f; x != top; x = x->parent)
		c->chain[--n] = x;
}

/* The next byte of the path, '/' between names, 0 at its end (as strcmp sees it). */
static int cursor_next(struct path_cursor *c)
{
	if (c->i == c->n)
		return 0;
	if (c->off < c->chain[c->i]->name_len)
		return (unsigned char)c->chain[c->i]->name[c->off++];
	c->i++;
	c->off = 0;
	return c->i == c->n ? 0 : '/';
}

static size_t depth(const struct node *n)
{
	size_t d = 0;

	for (; n->parent; n = n->parent)
		d++;
	return d;
}

/* strcmp of the two files' paths, which share the source root, without building them:
 * byte by byte below their common ancestor. */
static int path_cmp(const struct node *a, const struct node *b, size_t max_depth)
{
	const struct node *x = a, *y = b;
	size_t da = depth(a), db = depth(b);
	struct path_cursor ca = { .chain = chains }, cb = { .chain = chains + max_depth };
	int p, q;

	for (; da > db; da--)
		x = x->parent;
	for (; db > da; db--)
		y = y->parent;
	while (x != y) {
		x = x->parent;
		y = y->parent;
	}
	cursor_fill(&ca, a, x);
	cursor_fill(&cb, b, x);
	do {
		p = cursor_next(&ca);
		q = cursor_next(&cb);
	} while (p && p == q);
	return p - q;
}

static size_t chains_depth; /* what each half of chains holds */

/* Bytes of each file the hot region leaves out, by inode number (UINT64_MAX for a file it
 * does not touch): summed once per file for the sort, which compares them often. Main
 * thread only, like chains. */
static uint64_t *rests;

static uint64_t rest_of(const struct node *f)
{
	uint64_t rest = (uint64_t)f->st.st_size;

	if (!f->hot_ranges)
		return UINT64_MAX;
	for (uint32_t i = 0; i < f->nhot_ranges; i++)
		rest -= f->hot_ranges[i].end - f->hot_ranges[i].start;
	return rest;
}

/* What the hot region leaves of its files comes first, smallest first, each in file
 * order: a launch that strays outside its recorded ranges (another thread's timing,
 * another path), most often just beside them, then waits only for the decode of the
 * first cold block up to those bytes, not for a block far behind. The other files: within
 * a group, path order keeps a package's files side by side, which measured better than
 * grouping by extension or by content type (see mkstipple(1)). */
static int cmp_similar(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	enum group gx = piece_group(x), gy = piece_group(y);
	uint64_t rx = rests[x->file->ino], ry = rests[y->file->ino];
	int c;

	if (rx != ry)
		return rx < ry ? -1 : 1;
	if (rx != UINT64_MAX && x->file == y->file) /* a rest in file order, code or not */
		return (x->start > y->start) - (x->start < y->start);
	if (gx != gy)
		return gx < gy ? -1 : 1;
	c = x->file == y->file ? 0 : path_cmp(x->file, y->file, chains_depth);
	if (c)
		return c;
	return (x->start > y->start) - (x->start < y->start);
}

/* Appends to H the entry [A, B) of N, ranked next. */
static int hot_push(struct hot_set *h, struct node *n, uint64_t a, uint64_t b)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 256;
		struct hot_entry *v = reallocarray(h->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = (struct hot_entry){ n, a, b, h->next_rank++ };
	return 0;
}

int order_add_ranges(struct hot_set *h, struct node *n, const char *s, uint64_t margin)
{
	uint64_t size = (uint64_t)n->st.st_size;
	struct stp_hot_range *in;
	size_t count, kept = 0;
	int rc;

	if (!s)
		return hot_push(h, n, 0, size);
	rc = stp_hotlist_parse_ranges(s, &in, &count);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < count; i++) {
		uint64_t a = in[i].start, b = in[i].end;

		if (a >= size || b <= a)
			continue;
		b = b < size ? b : size;
		a = a > margin ? (a - margin) & ~(uint64_t)(STP_HOT_PAGE - 1) : 0;
		b = size - b > margin ? b + margin : size;
		rc = hot_push(h, n, a, b);
		kept++;
	}
	free(in);
	/* none left: every range lay past the end (the file shrank since recording) */
	return rc ? rc : kept ? 0 : -ERANGE;
}

static int cmp_entry_file(const void *a, const void *b)
{
	const struct hot_entry *x = a, *y = b;

	if (x->file != y->file)
		return (uintptr_t)x->file > (uintptr_t)y->file ? 1 : -1;
	return (x->start > y->start) - (x->start < y->start);
}

static int cmp_entry_rank(const void *a, const void *b)
{
	const struct hot_entry *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank > y->rank ? 1 : -1;
	return (x->start > y->start) - (x->start < y->start);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* A min-heap of entries by rank, for the sweep below. */
struct rank_heap {
	const struct hot_entry *e;
	size_t *v, n;
};

static void heap_push(struct rank_heap *h, size_t i)
{
	size_t k = h->n++;

	for (; k && h->e[h->v[(k - 1) / 2]].rank > h->e[i].rank; k = (k - 1) / 2)
		h->v[k] = h->v[(k - 1) / 2];
	h->v[k] = i;
}

static void heap_pop(struct rank_heap *h)
{
	size_t last = h->v[--h->n], k = 0;

	for (;;) {
		size_t c = 2 * k + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->e[h->v[c + 1]].rank < h->e[h->v[c]].rank)
			c++;
		if (h->e[h->v[c]].rank >= h->e[last].rank)
			break;
		h->v[k] = h->v[c];
		k = c;
	}
	h->v[k] = last;
}

/* The K entries E of one file (sorted by start) become disjoint pieces, appended to OUT:
 * each byte goes with the earliest entry that covers it. PTS and HEAP have room for 2K
 * and K. */
static void sweep_file(const struct hot_entry *e, size_t k, uint64_t *pts, size_t *heap,
		       struct hot_entry *out, size_t *nout)
{
	struct rank_heap h = { e, heap, 0 };
	size_t np = 0, next = 0, first = *nout;

	for (size_t i = 0; i < k; i++) {
		pts[np++] = e[i].start;
		pts[np++] = e[i].end;
	}
	qsort(pts, np, sizeof(*pts), cmp_u64);
	for (size_t p = 0; p + 1 < np; p++) {
		const struct hot_entry *top;
		struct hot_entry *last = *nout > first ? &out[*nout - 1] : NULL;

		if (pts[p] == pts[p + 1])
			continue;
		while (next < k && e[next].start <= pts[p])
			heap_push(&h, next++);
		while (h.n && e[h.v[0]].end <= pts[p])
			heap_pop(&h);
		if (!h.n)
			continue;
		top = &e[h.v[0]];
		if (last && last->end == pts[p] && last->rank == top->rank)
			last->end = pts[p + 1];
		else
			out[(*nout)++] = (struct hot_entry){ top->file, pts[p], pts[p + 1], top->rank };
	}
}

/* Sets N's hot ranges from its pieces P[0..K) (sorted by start): merged, or none when
 * one piece is the whole file. */
static int set_ranges(struct node *n, const struct hot_entry *p, size_t k)
{
	size_t m = 0;

	n->hot = 1;
	if (k == 1 && p[0].start == 0 && p[0].end == (uint64_t)n->st.st_size)
		return 0;
	n->hot_ranges = reallocarray(NULL, k, sizeof(*n->hot_ranges));
	if (!n->hot_ranges)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		if (m && n->hot_ranges[m - 1].end == p[i].start)
			n->hot_ranges[m - 1].end = p[i].end;
		else
			n->hot_ranges[m++] = (struct hot_range){ p[i].start, p[i].end };
	}
	n->nhot_ranges = (uint32_t)m;
	return 0;
}

/* A hot file of size 0 is one empty piece. */
static void empty_piece(const struct hot_entry *e, size_t k, struct hot_entry *out, size_t *nout)
{
	uint64_t rank = e[0].rank;

	for (size_t i = 1; i < k; i++)
		rank = e[i].rank < rank ? e[i].rank : rank;
	out[(*nout)++] = (struct hot_entry){ e[0].file, 0, 0, rank };
}

int order_resolve_ranges(struct hot_set *h)
{
	struct hot_entry *out = reallocarray(NULL, 2 * h->n + 1, sizeof(*out));
	uint64_t *pts = reallocarray(NULL, 2 * h->n + 1, sizeof(*pts));
	size_t *heap = reallocarray(NULL, h->n + 1, sizeof(*heap));
	size_t nout = 0;
	int rc = out && pts && heap ? 0 : -ENOMEM;

	if (!rc)
		qsort(h->v, h->n, sizeof(*h->v), cmp_entry_file);
	for (size_t i = 0, k; !rc && i < h->n; i += k) {
		size_t first = nout;

		for (k = 1; i + k < h->n && h->v[i + k].file == h->v[i].file; k++)
			;
		if (h->v[i].file->st.st_size == 0)
			empty_piece(&h->v[i], k, out, &nout);
		else
			sweep_file(&h->v[i], k, pts, heap, out, &nout);
		rc = set_ranges(h->v[i].file, &out[first], nout - first);
	}
	free(pts);
	free(heap);
	free(h->v);
	h->v = out;
	h->n = h->cap = out ? nout : 0;
	if (!rc)
		qsort(h->v, h->n, sizeof(*h->v), cmp_entry_rank);
	return rc;
}

void order_hot_free(struct hot_set *h)
{
	free(h->v);
	*h = (struct hot_set){ 0 };
}

struct hot_list {
	struct tree *t;
	const char *name;
	uint64_t margin;
	struct hot_set *h;
};

/* One line of the hot list: a file of the tree and, after it, the ranges read. What
 * cannot be used is said and skipped. */
static int hot_line(void *arg, char *line, size_t len, unsigned lineno)
{
	const struct hot_list *x = arg;
	struct node *node;
	char *ranges;
	int rc;

	if (!len || line[0] == '#')
		return 0;
	ranges = stp_hotlist_split(line);
	if (stp_hotlist_is_lookup(ranges))
		return lookups_add(x->t, line, x->name, lineno);
	node = tree_find(x->t, line);
	node = node ? node->primary : NULL;
	if (!node || !S_ISREG(node->st.st_mode)) {
		report_warning(NULL, "%s:%u: %s: %s, skipped", x->name, lineno, line,
			       node ? "not a regular file" : "not in the tree");
		return 0;
	}
	rc = order_add_ranges(x->h, node, ranges, x->margin);
	if (rc == -ERANGE) {
		report_warning(NULL, "%s:%u: %s: every range lies past its end, skipped",
			       x->name, lineno, line);
		rc = 0;
	} else if (rc == -EINVAL) {
		report_warning(NULL, "%s:%u: %s: malformed ranges, reading the whole file",
			       x->name, lineno, line);
		rc = order_add_ranges(x->h, node, NULL, x->margin);
	}
	return rc;
}

static int read_hot_list(struct tree *t, const char *list, uint64_t margin, struct hot_set *h)
{
	struct hot_list x = { t, list, margin, h };
	FILE *f = lines_open_regular(list); /* a named FIFO would hang the build */
	int rc;

	if (!f) {
		rc = -errno;
		report_error(list, "--hot-list: %s", lines_strerror(-rc));
		return rc;
	}
	rc = lines_each(f, list, '\n', hot_line, &x);
	if (rc == -EIO && ferror(f))
		report_errno(list, EIO, "--hot-list");
	fclose(f);
	if (!rc)
		rc = lookups_finish(t, list);
	return rc ? rc : order_resolve_ranges(h);
}

/* Adds [A, B) of F, cut where its code begins and where it ends when CODE_APART. */
static void add_cut(struct piece *v, size_t *n, struct node *f, uint64_t a, uint64_t b,
		    int code_apart)
{
	const uint64_t cut[2] = { f->code ? f->code->start : 0, f->code ? f->code->end : 0 };

	for (int i = 0; i < 2 && code_apart && f->filter != STP_FILTER_NONE; i++) {
		if (cut[i] > a && cut[i] < b) {
			v[(*n)++] = (struct piece){ f, a, cut[i], 0 };
			a = cut[i];
		}
	}
	if (a < b)
		v[(*n)++] = (struct piece){ f, a, b, 0 };
}

/* Adds the pieces of F that follow the hot region: what its hot ranges leave, if any. */
static void add_rest(struct piece *v, size_t *n, struct node *f, int code_apart)
{
	uint64_t pos = 0, size = (uint64_t)f->st.st_size;

	if (!size && !f->hot) {
		v[(*n)++] = (struct piece){ f, 0, 0, 0 }; /* still checked for having grown */
		return;
	}
	if (f->hot && !f->hot_ranges)
		return;
	for (size_t i = 0; i < f->nhot_ranges; i++) {
		add_cut(v, n, f, pos, f->hot_ranges[i].start, code_apart);
		pos = f->hot_ranges[i].end;
	}
	add_cut(v, n, f, pos, size, code_apart);
}

int order_files(struct tree *t, const char *hot_list, uint64_t margin, int code_apart,
		struct piece **out, size_t *nhot, size_t *count)
{
	struct hot_set hot = { 0 };
	struct piece *v = NULL;
	size_t cap = 0, n = 0;
	int rc = hot_list ? read_hot_list(t, hot_list, margin, &hot) : 0;

	/* K hot ranges leave up to K + 1 gaps, and the code's two edges cut two more */
	for (size_t i = 0; i < t->nfiles && !rc; i++) {
		const struct node *f = t->files[i];

		cap += f->nhot_ranges ? f->nhot_ranges + 3 : f->filter ? 3 : 1;
	}
	cap += hot.n;
	v = rc ? NULL : malloc((cap ? cap : 1) * sizeof(*v));
	if (!rc && !v)
		rc = -ENOMEM;
	for (size_t i = 0; i < hot.n && !rc; i++)
		v[n++] = (struct piece){ hot.v[i].file, hot.v[i].start, hot.v[i].end, 0 };
	*nhot = n;
	order_hot_free(&hot);
	for (size_t i = 0; i < t->nfiles && !rc; i++)
		add_rest(v, &n, t->files[i], code_apart);
	chains_depth = 0;
	for (size_t i = 0; i < t->nfiles && !rc; i++) {
		size_t d = depth(t->files[i]);

		chains_depth = d > chains_depth ? d : chains_depth;
	}
	chains = rc ? NULL : reallocarray(NULL, 2 * chains_depth + 2, sizeof(*chains));
	rests = rc ? NULL : reallocarray(NULL, t->ninodes, sizeof(*rests));
	if (!rc && (!chains || !rests))
		rc = -ENOMEM;
	for (size_t i = 0; i < t->nfiles && !rc; i++)
		rests[t->files[i]->ino] = rest_of(t->files[i]);
	if (!rc)
		qsort(v + *nhot, n - *nhot, sizeof(*v), cmp_similar);
	free(chains);
	chains = NULL;
	free(rests);
	rests = NULL;
	if (rc) {
		free(v);
		return rc;
	}
	free(t->files); /* the pieces name every file from now on */
	t->files = NULL;
	chains_depth = 0;
	*out = v;
	*count = n;
	return 0;
}
