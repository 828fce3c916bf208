/* SPDX-License-Identifier: MIT */
/* The tree both sources build: nodes, sorting, hard links, inode numbers. */
#include "tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

struct node *tree_node_new(struct node *parent, const char *name)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	if (parent) {
		size_t plen = strlen(parent->path);

		n->path = malloc(plen + strlen(name) + 2);
		if (n->path)
			sprintf(n->path, "%s%s%s", parent->path,
				parent->path[plen - 1] == '/' ? "" : "/", name);
		n->name = n->path ? n->path + strlen(n->path) - strlen(name) : NULL;
	} else {
		n->path = strdup(name);
		n->name = "";
	}
	if (!n->path) {
		free(n);
		return NULL;
	}
	n->name_len = strlen(n->name);
	n->parent = parent;
	n->primary = n;
	return n;
}


static int cmp_child(const void *a, const void *b)
{
	const struct node *x = *(struct node *const *)a, *y = *(struct node *const *)b;

	return stp_name_cmp(x->name, x->name_len, y->name, y->name_len);
}


int tree_add_child(struct node *dir, const char *name, size_t *cap)
{
	struct node *c;

	if (strlen(name) > STP_NAME_MAX)
		return source_fail(dir->path, ENAMETOOLONG, name);
	if (dir->nchildren == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct node **grown = realloc(dir->children, ncap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		dir->children = grown;
		*cap = ncap;
	}
	c = tree_node_new(dir, name);
	if (!c)
		return -ENOMEM;
	dir->children[dir->nchildren++] = c;
	return 0;
}


/* Hard links: sort candidates by (dev, ino, inode order) and point each to its first. */
static int cmp_devino(const void *a, const void *b)
{
	const struct node *x = *(struct node *const *)a, *y = *(struct node *const *)b;

	if (x->st.st_dev != y->st.st_dev)
		return x->st.st_dev < y->st.st_dev ? -1 : 1;
	if (x->st.st_ino != y->st.st_ino)
		return x->st.st_ino < y->st.st_ino ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}


/* Breadth-first order: every node gets a provisional number in ->ino. */
static int list_bfs(struct tree *t, struct node ***out, size_t *count)
{
	size_t cap = 1024, n = 0, head = 0;
	struct node **q = malloc(cap * sizeof(*q));

	if (!q)
		return -ENOMEM;
	q[n++] = t->root;
	while (head < n) {
		struct node *cur = q[head];

		cur->ino = (uint32_t)head++;
		for (size_t i = 0; i < cur->nchildren; i++) {
			if (n == cap) {
				struct node **grown = realloc(q, (cap *= 2) * sizeof(*q));

				if (!grown) {
					free(q);
					return -ENOMEM;
				}
				q = grown;
			}
			q[n++] = cur->children[i];
		}
	}
	if (n > UINT32_MAX / 2) {
		free(q);
		return source_fail(t->root->path, EFBIG, "too many entries");
	}
	*out = q;
	*count = n;
	return 0;
}


static int fold_hard_links(struct node **all, size_t n)
{
	struct node **cand = malloc(n * sizeof(*cand));
	size_t m = 0;

	if (!cand)
		return -ENOMEM; /* the image must not depend on the memory at hand */
	for (size_t i = 0; i < n; i++)
		if (!S_ISDIR(all[i]->st.st_mode) && all[i]->st.st_nlink > 1)
			cand[m++] = all[i];
	qsort(cand, m, sizeof(*cand), cmp_devino);
	for (size_t i = 1; i < m; i++)
		if (cand[i]->st.st_dev == cand[i - 1]->st.st_dev &&
		    cand[i]->st.st_ino == cand[i - 1]->st.st_ino)
			cand[i]->primary = cand[i - 1]->primary;
	free(cand);
	return 0;
}


static int number_inodes(struct tree *t, struct node **all, size_t n)
{
	t->inodes = malloc(n * sizeof(*t->inodes));
	t->files = malloc(n * sizeof(*t->files));
	if (!t->inodes || !t->files)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct node *x = all[i];

		if (x->primary != x) {
			x->primary->nlink++;
			continue;
		}
		x->ino = t->ninodes;
		t->inodes[t->ninodes++] = x;
		x->nlink = S_ISDIR(x->st.st_mode) ? 2 : 1;
		if (S_ISDIR(x->st.st_mode) && x->parent)
			x->parent->nlink++;
		if (S_ISREG(x->st.st_mode)) {
			t->files[t->nfiles++] = x;
			t->file_bytes += (uint64_t)x->st.st_size;
		}
	}
	return 0;
}


void tree_node_free(struct node *n)
{
	for (size_t i = 0; i < n->nchildren; i++)
		tree_node_free(n->children[i]);
	for (size_t i = 0; i < n->nxattrs; i++) {
		free(n->xattrs[i].name);
		free(n->xattrs[i].value);
	}
	free(n->xattrs);
	free(n->children);
	free(n->link_target);
	free(n->extents);
	free(n->hot_ranges);
	free(n->path);
	free(n);
}


void tree_sort_children(struct node *dir)
{
	if (dir->nchildren > 1)
		qsort(dir->children, dir->nchildren, sizeof(*dir->children), cmp_child);
}

int tree_finish(struct tree *t)
{
	struct node **all = NULL;
	size_t n = 0;
	int rc = list_bfs(t, &all, &n);

	if (!rc)
		rc = fold_hard_links(all, n);
	if (!rc)
		rc = number_inodes(t, all, n);
	free(all);
	return rc;
}

void scan_tree_free(struct tree *t)
{
	if (t->root)
		tree_node_free(t->root);
	free(t->inodes);
	free(t->files);
	memset(t, 0, sizeof(*t));
}
