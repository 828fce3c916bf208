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
			size_t l = len < c->name_len ? len : c->name_len;
			int r = memcmp(part, c->name, l);

			if (!r)
				r = (len > c->name_len) - (len < c->name_len);
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

/* Undoes the escapes the recorder writes (\\, \t, \n) in place; cuts the ranges off. */
static void hot_line_path(char *line)
{
	char *tab = strchr(line, '\t'), *r = line, *w = line;

	if (tab)
		*tab = 0;
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
}

static int read_hot_list(struct tree *t, const char *list, struct node **out, size_t *n)
{
	FILE *f = fopen(list, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;

	if (!f) {
		fprintf(stderr, "mkstipple: %s: %s\n", list, strerror(errno));
		return -errno;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		struct node *node;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		hot_line_path(line);
		node = find_path(t, line);
		if (!node || !S_ISREG(node->st.st_mode)) {
			fprintf(stderr, "mkstipple: %s:%u: %s: %s, skipped\n", list, lineno, line,
				node ? "not a regular file" : "not in the tree");
			continue;
		}
		if (!node->hot) {
			node->hot = 1;
			out[(*n)++] = node;
		}
	}
	free(line);
	fclose(f);
	return 0;
}

int order_files(struct tree *t, const char *hot_list, struct node ***out, size_t *nhot)
{
	struct node **order = malloc((t->nfiles ? t->nfiles : 1) * sizeof(*order));
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
		if (!t->files[i]->hot)
			order[n++] = t->files[i];
	qsort(order + *nhot, n - *nhot, sizeof(*order), cmp_similar);
	*out = order;
	return 0;
}
