/* SPDX-License-Identifier: MIT */
/*
 * Building the in-memory tree that scan.c (a directory) and archive.c (an archive) both
 * produce: nodes, children sorted by name bytes, hard links folded onto one inode and
 * inodes numbered breadth-first, so that the same tree gives the same image whichever
 * way it was read. Not thread-safe; the tree is owned by the caller (scan_tree_free).
 */
#ifndef MKSTP_TREE_H
#define MKSTP_TREE_H

#include <stddef.h>

#include "scan.h"

/* The longest path from the root that the readers take: "/" + path + NUL in
 * STP_LINK_MAX + 1 (4096) bytes (STP_WALK_PATH_MAX for extract and ls, CHECK_PATH_MAX for
 * check). A path of that many bytes is at most TREE_DEPTH_MAX names deep. */
#define TREE_PATH_MAX (STP_LINK_MAX - 1)
#define TREE_DEPTH_MAX ((TREE_PATH_MAX + 1) / 2)

/* Nodes by (parent, name): open addressing over XXH3 of the name seeded with the parent's
 * address, kept at most half full, so finding or adding one name costs O(its length)
 * whatever the tree's depth or size. Holds pointers to nodes it does not own. */
struct tree_index {
	struct node **slots;
	size_t nslots, count;
};

/* The root of T, its name the source path SOURCE (for messages); every other field
 * zero, primary itself. NULL when out of memory. */
struct node *tree_root_new(struct tree *t, const char *source);
/* Appends a new child NAME to DIR, a node of T whose children array holds *CAP; 0 or
 * -errno (-ENAMETOOLONG printed with DIR's path). The child is
 * DIR->children[nchildren - 1], every field but its name and parent zero. */
int tree_add_child(struct tree *t, struct node *dir, const char *name, size_t *cap);
/* Copies what the image and the change checks keep of ST into N. */
void tree_set_stat(struct node *n, const struct stat *st);
/* N's source path, for messages: in a buffer of this module valid until the next call
 * (main thread only). Never NULL; errno is left as it was. */
const char *tree_path(const struct node *n);
/* Writes N's path from the root ("" for the root; names joined by '/') into BUF of CAP
 * bytes, cut short when it does not fit, always terminated when CAP > 0; returns its
 * full length. */
size_t tree_rel_path(const struct node *n, char *buf, size_t cap);
/* Sorts DIR's children by name bytes, as the image stores them. */
void tree_sort_children(struct node *dir);
/* Child NAME (LEN bytes) of DIR, NULL for the root's key; NULL when IX has none. */
struct node *tree_index_find(const struct tree_index *ix, const struct node *dir,
			     const char *name, size_t len);
/* Adds N under (N->parent, N->name), which IX must not hold yet; 0 or -ENOMEM. */
int tree_index_add(struct tree_index *ix, struct node *n);
/* Frees IX's table (not the nodes) and empties it. */
void tree_index_free(struct tree_index *ix);
/* Frees what N and everything beneath it hold, without recursion (a tree may be deep); the
 * nodes themselves stay in the tree's arena until scan_tree_free. */
void tree_node_free(struct node *n);
/* Once every node is in place beneath T->root (children sorted): folds the non-directories
 * that share st_dev and st_ino, and have st_nlink > 1, onto the first of them in
 * breadth-first order, and numbers the inodes in that order; fills T's arrays.
 * 0 or -errno. */
int tree_finish(struct tree *t);

#endif
