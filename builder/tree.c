/* SPDX-License-Identifier: MIT */
/* The tree both sources build: nodes, sorting, hard links, inode numbers. */
#include "tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "report.h"
#include "util.h"

/* The arena: nodes are carved from 1 MiB chunks and freed with the tree, so that a node
 * costs no malloc header and its name is stored within it. */
#define CHUNK_SIZE ((size_t)1 << 20)

struct tree_chunk {
	struct tree_chunk *next;
	size_t used, size;
	max_align_t data[];
};

static void *arena_alloc(struct tree *t, size_t len)
{
	struct tree_chunk *c = t->arena;

	len = (len + 7) & ~(size_t)7;
	if (!c || c->size - c->used < len) {
		size_t size = len > CHUNK_SIZE ? len : CHUNK_SIZE;

		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->next = t->arena;
		c->used = 0;
		c->size = size;
		t->arena = c;
	}
	c->used += len;
	return (char *)c->data + c->used - len;
}

static struct node *node_new(struct tree *t, struct node *parent, const char *name, size_t len)
{
	struct node *n = arena_alloc(t, offsetof(struct node, name) + len + 1);

	if (!n)
		return NULL;
	memset(n, 0, offsetof(struct node, name));
	memcpy(n->name, name, len + 1);
	n->name_len = parent ? (uint16_t)len : 0;
	n->parent = parent;
	n->primary = n;
	return n;
}

struct node *tree_root_new(struct tree *t, const char *source)
{
	return node_new(t, NULL, source, strlen(source));
}

void tree_set_stat(struct node *n, const struct stat *st)
{
	n->st = (struct node_stat){
		.st_dev = st->st_dev, .st_ino = st->st_ino, .st_size = st->st_size,
		.st_rdev = st->st_rdev, .st_mtim = st->st_mtim, .st_ctim = st->st_ctim,
		.st_mode = st->st_mode, .st_uid = st->st_uid, .st_gid = st->st_gid,
		.st_nlink = st->st_nlink > UINT32_MAX ? UINT32_MAX : (uint32_t)st->st_nlink,
	};
}

static const struct node *root_of(const struct node *n)
{
	while (n->parent)
		n = n->parent;
	return n;
}

size_t tree_rel_path(const struct node *n, char *buf, size_t cap)
{
	size_t len = 0, at;

	for (const struct node *x = n; x->parent; x = x->parent)
		len += x->name_len + (x != n);
	at = len;
	for (const struct node *x = n; x->parent; x = x->parent) {
		/* written from the end: each name, then the '/' before it */
		at -= x->name_len;
		for (size_t i = 0; i < x->name_len; i++)
			if (at + i < cap)
				buf[at + i] = x->name[i];
		if (at && at - 1 < cap)
			buf[at - 1] = '/';
		at -= at ? 1 : 0;
	}
	if (cap)
		buf[len < cap ? len : cap - 1] = 0;
	return len;
}

const char *tree_path(const struct node *n)
{
	static char *buf;
	static size_t cap;
	const char *root = root_of(n)->name;
	size_t rlen = strlen(root), sep = n->parent && (!rlen || root[rlen - 1] != '/');
	size_t len = rlen + sep + tree_rel_path(n, NULL, 0);
	int err = errno; /* callers pass errno beside it, in either order */

	if (len + 1 > cap) {
		char *grown = realloc(buf, len + 1);

		errno = err;
		if (!grown)
			return n->parent ? n->name : root; /* the name alone, for a message */
		buf = grown;
		cap = len + 1;
	}
	memcpy(buf, root, rlen);
	if (sep)
		buf[rlen] = '/';
	tree_rel_path(n, buf + rlen + sep, cap - rlen - sep);
	return buf;
}


static int cmp_child(const void *a, const void *b)
{
	const struct node *x = *(struct node *const *)a, *y = *(struct node *const *)b;

	return stp_name_cmp(x->name, x->name_len, y->name, y->name_len);
}


int tree_add_child(struct tree *t, struct node *dir, const char *name, size_t *cap)
{
	size_t len = strlen(name);
	struct node *c;

	if (len > STP_NAME_MAX)
		return report_errno(tree_path(dir), ENAMETOOLONG, name);
	if (dir->nchildren == UINT32_MAX)
		return report_errno(tree_path(dir), EFBIG, "too many entries");
	if (dir->nchildren == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct node **grown = realloc(dir->children, ncap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		dir->children = grown;
		*cap = ncap;
	}
	c = node_new(t, dir, name, len);
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
		return report_errno(tree_path(t->root), EFBIG, "too many entries");
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


/* What N itself holds, its children already freed. */
static void node_release(struct node *n)
{
	for (size_t i = 0; i < n->nxattrs; i++) {
		free(n->xattrs[i].name);
		free(n->xattrs[i].value);
	}
	free(n->xattrs);
	free(n->children);
	free(n->link_target);
	free(n->extents);
	free(n->hot_ranges);
	free(n->code);
	n->xattrs = NULL;
	n->nxattrs = 0;
	n->children = NULL;
	n->nchildren = 0;
}

/* Depth first through the parent pointers: a node's last child is entered and dropped
 * from its count, and a node is released once it has none left. */
void tree_node_free(struct node *n)
{
	struct node *cur = n;

	for (;;) {
		if (cur->nchildren) {
			cur = cur->children[--cur->nchildren];
			continue;
		}
		node_release(cur);
		if (cur == n)
			break;
		cur = cur->parent;
	}
}


/* --- nodes by (parent, name) --- */

static size_t index_hash(const struct node *dir, const char *name, size_t len)
{
	return (size_t)XXH3_64bits_withSeed(name, len, (uint64_t)(uintptr_t)dir);
}

static struct node **index_slot(struct node **slots, size_t nslots, const struct node *dir,
				const char *name, size_t len)
{
	size_t mask = nslots - 1, i = index_hash(dir, name, len) & mask;

	while (slots[i] && (slots[i]->parent != dir || slots[i]->name_len != len ||
			    memcmp(slots[i]->name, name, len)))
		i = (i + 1) & mask;
	return &slots[i];
}

struct node *tree_index_find(const struct tree_index *ix, const struct node *dir,
			     const char *name, size_t len)
{
	return ix->nslots ? *index_slot(ix->slots, ix->nslots, dir, name, len) : NULL;
}

int tree_index_add(struct tree_index *ix, struct node *n)
{
	if ((ix->count + 1) * 2 > ix->nslots) {
		size_t nslots = ix->nslots ? ix->nslots * 2 : 1024;
		struct node **slots = calloc(nslots, sizeof(*slots));

		if (!slots)
			return -ENOMEM;
		for (size_t i = 0; i < ix->nslots; i++) {
			struct node *x = ix->slots[i];

			if (x)
				*index_slot(slots, nslots, x->parent, x->name, x->name_len) = x;
		}
		free(ix->slots);
		ix->slots = slots;
		ix->nslots = nslots;
	}
	*index_slot(ix->slots, ix->nslots, n->parent, n->name, n->name_len) = n;
	ix->count++;
	return 0;
}

void tree_index_free(struct tree_index *ix)
{
	free(ix->slots);
	*ix = (struct tree_index){ 0 };
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

struct node *tree_find(const struct tree *t, const char *path)
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
	return cur;
}

void tree_free(struct tree *t)
{
	if (t->root)
		tree_node_free(t->root);
	while (t->arena) {
		struct tree_chunk *c = t->arena;

		t->arena = c->next;
		free(c);
	}
	free(t->inodes);
	free(t->files);
	for (size_t i = 0; i < t->nlookups; i++)
		free(t->lookups[i].name);
	free(t->lookups);
	memset(t, 0, sizeof(*t));
}
