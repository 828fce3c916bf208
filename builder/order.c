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
#include "util.h"

/* After the hot region: the files that are not machine code, then programs by kind, so
 * that the blocks the packer filters hold code and little else. Programs cut at their
 * code (CODE_APART) have their other bytes (symbol tables, strings, data) before all
 * the code: smaller, but a cold read of one program then decodes two distant blocks. */
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

/* Within a group, path order keeps a package's files side by side, which measured better
 * than grouping by extension or by content type (see mkstipple(1)). */
static int cmp_similar(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	enum group gx = piece_group(x), gy = piece_group(y);
	int c;

	if (gx != gy)
		return gx < gy ? -1 : 1;
	c = x->file == y->file ? 0 : path_cmp(x->file, y->file, chains_depth);
	if (c)
		return c;
	return (x->start > y->start) - (x->start < y->start);
}

/* The child of CUR named NAME (LEN bytes), or NULL: children are sorted. */
static struct node *child_named(const struct node *cur, const char *name, size_t len)
{
	size_t lo = 0, hi = cur->nchildren;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = stp_name_cmp(name, len, cur->children[mid]->name, cur->children[mid]->name_len);

		if (!r)
			return cur->children[mid];
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Looks up a tree-relative PATH as the readers resolve one (stp_path_next). */
static struct node *find_path(struct tree *t, const char *path)
{
	struct node *cur = t->root;
	enum stp_path_part part;
	const char *name;
	size_t len;

	while (cur && (part = stp_path_next(&path, &name, &len)) != STP_PATH_END) {
		if (part == STP_PATH_PARENT)
			cur = cur->parent ? cur->parent : cur;
		else if (!S_ISDIR(cur->st.st_mode))
			return NULL;
		else
			cur = child_named(cur, name, len);
	}
	return cur ? cur->primary : NULL;
}

static int cmp_range(const void *a, const void *b)
{
	const struct hot_range *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/* Keeps the ranges of IN that start inside the file, widened by MARGIN on each side and
 * clamped to its size. */
static void fit_ranges(struct node *n, const struct stp_hot_range *in, size_t count,
		       uint64_t margin)
{
	uint64_t size = (uint64_t)n->st.st_size;

	for (size_t i = 0; i < count; i++) {
		uint64_t a = in[i].start, b = in[i].end;

		if (a >= size || b <= a)
			continue;
		b = b < size ? b : size;
		a = a > margin ? (a - margin) & ~(uint64_t)(STP_HOT_PAGE - 1) : 0;
		b = size - b > margin ? b + margin : size;
		n->hot_ranges[n->nhot_ranges++] = (struct hot_range){ a, b };
	}
}

/* Sorts and merges N's ranges in place. */
static void merge_ranges(struct node *n)
{
	size_t k = 0;

	qsort(n->hot_ranges, n->nhot_ranges, sizeof(*n->hot_ranges), cmp_range);
	for (size_t i = 0; i < n->nhot_ranges; i++) {
		if (k && n->hot_ranges[i].start <= n->hot_ranges[k - 1].end) {
			if (n->hot_ranges[i].end > n->hot_ranges[k - 1].end)
				n->hot_ranges[k - 1].end = n->hot_ranges[i].end;
		} else {
			n->hot_ranges[k++] = n->hot_ranges[i];
		}
	}
	n->nhot_ranges = k;
}

int order_parse_ranges(struct node *n, const char *s, uint64_t margin)
{
	struct stp_hot_range *in;
	size_t count;
	int rc = stp_hotlist_parse_ranges(s, &in, &count);

	free(n->hot_ranges);
	n->hot_ranges = NULL;
	n->nhot_ranges = 0;
	if (rc)
		return rc;
	n->hot_ranges = reallocarray(NULL, count ? count : 1, sizeof(*n->hot_ranges));
	if (!n->hot_ranges) {
		free(in);
		return -ENOMEM;
	}
	fit_ranges(n, in, count, margin);
	free(in);
	merge_ranges(n);
	/* none left: every range lay past the end (the file shrank since recording) */
	rc = n->nhot_ranges ? 0 : -ERANGE;
	if (rc || (n->nhot_ranges == 1 && n->hot_ranges[0].start == 0 &&
		   n->hot_ranges[0].end == (uint64_t)n->st.st_size)) {
		free(n->hot_ranges);
		n->hot_ranges = NULL;
		n->nhot_ranges = 0;
	}
	return rc;
}

static int read_hot_list(struct tree *t, const char *list, uint64_t margin, struct node **out,
			 size_t *n)
{
	FILE *f = fopen(list, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	int rc;

	if (!f) {
		rc = -errno;
		fprintf(stderr, "mkstipple: %s: %s\n", list, strerror(-rc));
		return rc;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		struct node *node;
		char *ranges;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		ranges = stp_hotlist_split(line);
		node = find_path(t, line);
		if (!node || !S_ISREG(node->st.st_mode)) {
			fprintf(stderr, "mkstipple: %s:%u: %s: %s, skipped\n", list, lineno, line,
				node ? "not a regular file" : "not in the tree");
			continue;
		}
		if (node->hot)
			continue;
		rc = ranges ? order_parse_ranges(node, ranges, margin) : 0;
		if (rc == -ERANGE) {
			fprintf(stderr, "mkstipple: %s:%u: %s: every range lies past its end, skipped\n",
				list, lineno, line);
			continue;
		}
		if (rc) {
			fprintf(stderr, "mkstipple: %s:%u: %s: malformed ranges, reading the whole "
				"file\n", list, lineno, line);
		}
		node->hot = 1;
		out[(*n)++] = node;
	}
	free(line);
	fclose(f);
	return 0;
}

/* Adds [A, B) of F, cut where its code begins and where it ends when CODE_APART. */
static void add_cut(struct piece *v, size_t *n, struct node *f, uint64_t a, uint64_t b,
		    int code_apart)
{
	const uint64_t cut[2] = { f->code ? f->code->start : 0, f->code ? f->code->end : 0 };

	for (int i = 0; i < 2 && code_apart && f->filter != STP_FILTER_NONE; i++) {
		if (cut[i] > a && cut[i] < b) {
			v[(*n)++] = (struct piece){ f, a, cut[i] };
			a = cut[i];
		}
	}
	if (a < b)
		v[(*n)++] = (struct piece){ f, a, b };
}

/* Adds the pieces of F that follow the hot region: what its hot ranges leave, if any. */
static void add_rest(struct piece *v, size_t *n, struct node *f, int code_apart)
{
	uint64_t pos = 0, size = (uint64_t)f->st.st_size;

	if (!size && !f->hot) {
		v[(*n)++] = (struct piece){ f, 0, 0 }; /* still checked for having grown */
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

static void add_hot(struct piece *v, size_t *n, struct node *f)
{
	if (!f->hot_ranges) {
		v[(*n)++] = (struct piece){ f, 0, (uint64_t)f->st.st_size };
		return;
	}
	for (size_t i = 0; i < f->nhot_ranges; i++)
		v[(*n)++] = (struct piece){ f, f->hot_ranges[i].start, f->hot_ranges[i].end };
}

int order_files(struct tree *t, const char *hot_list, uint64_t margin, int code_apart,
		struct piece **out, size_t *nhot, size_t *count)
{
	struct node **hot = malloc((t->nfiles ? t->nfiles : 1) * sizeof(*hot));
	struct piece *v = NULL;
	size_t nh = 0, cap = 0, n = 0;
	int rc = hot ? 0 : -ENOMEM;

	if (!rc && hot_list)
		rc = read_hot_list(t, hot_list, margin, hot, &nh);
	/* K hot ranges leave up to K + 1 gaps, and the code's two edges cut two more */
	for (size_t i = 0; i < t->nfiles && !rc; i++) {
		const struct node *f = t->files[i];

		cap += f->nhot_ranges ? 2 * f->nhot_ranges + 3 : f->filter ? 3 : 1;
	}
	v = rc ? NULL : malloc((cap ? cap : 1) * sizeof(*v));
	if (!rc && !v)
		rc = -ENOMEM;
	for (size_t i = 0; i < nh && !rc; i++)
		add_hot(v, &n, hot[i]);
	*nhot = n;
	for (size_t i = 0; i < t->nfiles && !rc; i++)
		add_rest(v, &n, t->files[i], code_apart);
	free(hot);
	chains_depth = 0;
	for (size_t i = 0; i < t->nfiles && !rc; i++) {
		size_t d = depth(t->files[i]);

		chains_depth = d > chains_depth ? d : chains_depth;
	}
	chains = rc ? NULL : reallocarray(NULL, 2 * chains_depth + 2, sizeof(*chains));
	if (!rc && !chains)
		rc = -ENOMEM;
	if (rc) {
		free(v);
		return rc;
	}
	qsort(v + *nhot, n - *nhot, sizeof(*v), cmp_similar);
	free(t->files); /* the pieces name every file from now on */
	t->files = NULL;
	free(chains);
	chains = NULL;
	chains_depth = 0;
	*out = v;
	*count = n;
	return 0;
}
