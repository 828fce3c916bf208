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

/* A node named NAME beneath PARENT (NULL: the root, whose path is NAME), its path
 * PARENT's path joined with NAME; every other field zero, primary itself. NULL when out
 * of memory. */
struct node *tree_node_new(struct node *parent, const char *name);
/* Appends a new child NAME to DIR, whose children array holds *CAP; 0 or -errno
 * (-ENAMETOOLONG printed with DIR's path). The child is DIR->children[nchildren - 1]. */
int tree_add_child(struct node *dir, const char *name, size_t *cap);
/* Sorts DIR's children by name bytes, as the image stores them. */
void tree_sort_children(struct node *dir);
/* Frees N and everything beneath it. */
void tree_node_free(struct node *n);
/* Once every node is in place beneath T->root (children sorted): folds the non-directories
 * that share st_dev and st_ino, and have st_nlink > 1, onto the first of them in
 * breadth-first order, and numbers the inodes in that order; fills T's arrays.
 * 0 or -errno. */
int tree_finish(struct tree *t);

#endif
