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
/* 1 when N's path from the root is PATH, else 0. */
int tree_rel_path_is(const struct node *n, const char *path);
/* Sorts DIR's children by name bytes, as the image stores them. */
void tree_sort_children(struct node *dir);
/* Frees what N and everything beneath it hold; the nodes themselves stay in the
 * tree's arena until scan_tree_free. */
void tree_node_free(struct node *n);
/* Once every node is in place beneath T->root (children sorted): folds the non-directories
 * that share st_dev and st_ino, and have st_nlink > 1, onto the first of them in
 * breadth-first order, and numbers the inodes in that order; fills T's arrays.
 * 0 or -errno. */
int tree_finish(struct tree *t);

#endif
