/* SPDX-License-Identifier: MIT */
/* Ordering file data: hot list first, then similar files together. */
#include "order.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Machine code sorts apart from everything else, so that the blocks the packer filters
 * hold little else; within each kind, path order keeps a package's files side by side,
 * which measured better than grouping by extension (see mkstipple(1)). */
static int cmp_similar(const void *a, const void *b)
{
	const struct node *x = *(struct node *const *)a, *y = *(struct node *const *)b;

	if (x->filter != y->filter)
		return x->filter < y->filter ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* Looks up a tree-relative PATH component by component (children are sorted). */
static struct node *find_path(struct tree *t, char *path)
{
	struct node *cur = t->root;

	for (char *save = NULL, *part = strtok_r(path, "/", &save); part;
	     part = strtok_r(NULL, "/", &save)) {
		size_t lo = 0, hi = cur->nchildren, len = strlen(part);

		if (!strcmp(part, "."))
			continue;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			const struct node *c = cur->children[mid];
			int r = stp_name_cmp(part, len, c->name, c->name_len);

			if (!r) {
				lo = mid;
				break;
			}
			if (r < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo >= cur->nchildren || cur->children[lo]->name_len != len ||
		    memcmp(cur->children[lo]->name, part, len))
			return NULL;
		cur = cur->children[lo];
	}
	return cur->primary;
}

/* Undoes the escapes the recorder writes (\\, \t, \n) in place; cuts the ranges off
 * and returns them (NULL when there are none). */
static char *hot_line_path(char *line)
{
	char *tab = strchr(line, '\t'), *r = line, *w = line;

	if (tab)
		*tab++ = 0;
	while (*r) {
		if (*r == '\\' && r[1]) {
			r++;
			*w++ = *r == 't' ? '\t' : *r == 'n' ? '\n' : *r;
			r++;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return tab;
}

static int cmp_range(const void *a, const void *b)
{
	const struct hot_range *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/* Parses "START-END,START-END" into N's sorted, merged ranges, clamped to its size. A
 * list that covers the whole file means the whole file. Returns -EINVAL when malformed. */
/* Recorded ranges are widened by this much on each side: a launch whose read-ahead falls
 * a little differently from the recorded one still finds its pages in the hot region.
 * Measured on the Blender tree: a replay read 182 pages outside the recorded ranges, 90%
 * of them within 100 KiB of one, and each such page cost the decode of a cold block. */
#define RANGE_MARGIN (128u << 10)

static int parse_ranges(struct node *n, const char *s)
{
	uint64_t size = (uint64_t)n->st.st_size;
	size_t k = 0;

	n->nhot_ranges = 0;
	for (const char *c = s; *c; c++)
		k += *c == ',';
	free(n->hot_ranges);
	n->hot_ranges = malloc((k + 1) * sizeof(*n->hot_ranges));
	if (!n->hot_ranges)
		return -ENOMEM;
	while (*s) {
		unsigned long long a, b;
		int used = 0;

		if (sscanf(s, "%llu-%llu%n", &a, &b, &used) != 2 || b < a || (s[used] && s[used] != ','))
			return -EINVAL;
		s += used + (s[used] == ',');
		if (a < size && b > a) {
			b = b < size ? b : size;
			a = a > RANGE_MARGIN ? (a - RANGE_MARGIN) & ~4095ull : 0;
			b = size - b > RANGE_MARGIN ? b + RANGE_MARGIN : size;
			n->hot_ranges[n->nhot_ranges++] = (struct hot_range){ a, b };
		}
	}
	qsort(n->hot_ranges, n->nhot_ranges, sizeof(*n->hot_ranges), cmp_range);
	k = 0;
	for (size_t i = 0; i < n->nhot_ranges; i++) {
		if (k && n->hot_ranges[i].start <= n->hot_ranges[k - 1].end) {
			if (n->hot_ranges[i].end > n->hot_ranges[k - 1].end)
				n->hot_ranges[k - 1].end = n->hot_ranges[i].end;
		} else {
			n->hot_ranges[k++] = n->hot_ranges[i];
		}
	}
	n->nhot_ranges = k;
	if (k == 0)
		return -ERANGE; /* every range past the end: the file shrank since recording */
	if ((k == 1 && n->hot_ranges[0].start == 0 && n->hot_ranges[0].end == size)) {
		free(n->hot_ranges);
		n->hot_ranges = NULL;
		n->nhot_ranges = 0;
	}
	return 0;
}

static int read_hot_list(struct tree *t, const char *list, struct node **out, size_t *n)
{
	FILE *f = fopen(list, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	int rc;

	if (!f) {
		fprintf(stderr, "mkstipple: %s: %s\n", list, strerror(errno));
		return -errno;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		struct node *node;
		char *ranges, *path;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		ranges = hot_line_path(line);
		path = strdup(line);
		node = path ? find_path(t, path) : NULL;
		free(path);
		if (!node || !S_ISREG(node->st.st_mode)) {
			fprintf(stderr, "mkstipple: %s:%u: %s: %s, skipped\n", list, lineno, line,
				node ? "not a regular file" : "not in the tree");
			continue;
		}
		if (node->hot)
			continue;
		rc = ranges ? parse_ranges(node, ranges) : 0;
		if (rc == -ERANGE) {
			fprintf(stderr, "mkstipple: %s:%u: %s: every range lies past its end, skipped\n",
				list, lineno, line);
			free(node->hot_ranges);
			node->hot_ranges = NULL;
			node->nhot_ranges = 0;
			continue;
		}
		if (rc) {
			fprintf(stderr, "mkstipple: %s:%u: malformed ranges, reading the whole file\n",
				list, lineno);
			free(node->hot_ranges);
			node->hot_ranges = NULL;
			node->nhot_ranges = 0;
		}
		node->hot = 1;
		out[(*n)++] = node;
	}
	free(line);
	fclose(f);
	return 0;
}

int order_files(struct tree *t, const char *hot_list, struct node ***out, size_t *nhot,
		size_t *count)
{
	/* a file read only in part at start-up appears twice: its hot part, then the rest */
	struct node **order = malloc((t->nfiles ? 2 * t->nfiles : 1) * sizeof(*order));
	size_t n = 0;
	int rc;

	if (!order)
		return -ENOMEM;
	if (hot_list) {
		rc = read_hot_list(t, hot_list, order, &n);
		if (rc) {
			free(order);
			return rc;
		}
	}
	*nhot = n;
	for (size_t i = 0; i < t->nfiles; i++)
		if (!t->files[i]->hot || t->files[i]->hot_ranges)
			order[n++] = t->files[i];
	qsort(order + *nhot, n - *nhot, sizeof(*order), cmp_similar);
	*out = order;
	*count = n;
	return 0;
}
