/* SPDX-License-Identifier: MIT */
/*
 * Building the in-memory tree that scan.c (a directory) and archive.c (an archive) both
 * produce: nodes, children sorted by name bytes, hard links folded onto one inode and
 * inodes numbered breadth-first, so that the same tree gives the same image whichever
 * way it was read. Not thread-safe; the tree is owned by the caller (tree_free).
 * The types of the tree live here; scan.c and archive_in.c fill them, the rest read them.
 */
#ifndef MKSTP_TREE_H
#define MKSTP_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "format.h"

struct xattr_kv {
	char *name;
	void *value;
	size_t len;
};

/* A part of a file, in file bytes: [start, end). */
struct hot_range {
	uint64_t start, end;
};

/* The bytes of a program that hold its machine code, [start, end): only programs have
 * one, so it is not in every node. */
struct code_span {
	uint64_t start, end;
};

/* What the image and the change checks keep of a struct stat, under the same member
 * names: a node costs 80 bytes of it, not 144. */
struct node_stat {
	dev_t st_dev;
	ino_t st_ino;
	off_t st_size;
	dev_t st_rdev;
	struct timespec st_mtim;
	struct timespec st_ctim;
	mode_t st_mode;
	uid_t st_uid;
	gid_t st_gid;
	uint32_t st_nlink;     /* only compared with 1 (hard links) */
};

/*
 * One entry. Nodes live in their tree's arena (tree.c), the name within the node: there
 * is no per-entry path, a node's path is built from its parents when a message needs it
 * (tree_path). 188 bytes plus the name, and for a regular file its extents.
 */
struct node {
	struct node *parent;
	struct node **children; /* directories: sorted by name bytes */
	struct node *primary;  /* hard links: the node that carries the inode (self if none) */
	char *link_target;     /* symlinks */
	struct xattr_kv *xattrs; /* sorted by name */
	/* regular files, filled by the packer */
	struct stp_extent *extents;
	struct hot_range *hot_ranges; /* the parts start-up reads; NULL: the whole file */
	struct node *same_as;  /* identical content stored earlier in the stream */
	struct code_span *code; /* where the code lies when filter is set, else NULL */
	struct node_stat st;
	uint64_t data_off;     /* archives: where the file's bytes begin (source.h) */
	uint32_t nhot_ranges;
	uint32_t nchildren;
	uint32_t nxattrs;
	uint32_t ino;          /* image inode number (primary nodes) */
	uint32_t nlink;        /* names in the image (primary nodes); dirs: 2 + subdirs */
	uint32_t nextents;
	uint16_t name_len;     /* 0 for the root */
	uint8_t filter;        /* enum stp_filter that suits its machine code */
	uint8_t trouble;       /* enum node_trouble: set by the packer (pack.h) */
	uint8_t hot : 1;       /* listed in the hot list */
	uint8_t copied : 1;    /* some later file is the same as this one */
	uint8_t in_spool : 1;  /* archives: in the spool, not in the archive */
	uint8_t listed_type : 4; /* scan: the d_type its directory listed it with (a hint) */
	uint8_t selected : 1;  /* scan: at or below a path -T lists (select.h) */
	char name[];           /* last component; the root's is the source path itself */
};

/* A regular file that did not read as the scan saw it. CHANGED: read again at the end of
 * the data; FAILED: could not be read, reported once, never read again. */
enum node_trouble { NODE_OK, NODE_CHANGED, NODE_FAILED };

struct tree_chunk;

/* A name looked up in directory DIR (lookups.h); NAME is the tree's, LEN bytes. */
struct tree_lookup {
	const struct node *dir;
	char *name;
	uint16_t len;
};

struct tree {
	struct node *root;
	struct tree_chunk *arena; /* where the nodes are (tree.c) */
	struct node **inodes;  /* primary nodes by inode number; inodes[0] is the root */
	uint32_t ninodes;
	struct node **files;   /* primary regular files, in inode order; freed by order_files */
	size_t nfiles;
	uint64_t file_bytes;   /* sum of regular file sizes */
	struct tree_lookup *lookups; /* in the hot list's order (lookups.h) */
	size_t nlookups, lookups_cap;
};


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
 * nodes themselves stay in the tree's arena until tree_free. */
void tree_node_free(struct node *n);
/* Once every node is in place beneath T->root (children sorted): folds the non-directories
 * that share st_dev and st_ino, and have st_nlink > 1, onto the first of them in
 * breadth-first order, and numbers the inodes in that order; fills T's arrays.
 * 0 or -errno. */
int tree_finish(struct tree *t);
/* The node at PATH, relative to T's root, resolved as the readers resolve one
 * (stp_path_next: "." and ".." too, ".." of the root is the root); NULL when T has none.
 * Not the primary of a hard link: the name's own node. */
struct node *tree_find(const struct tree *t, const char *path);
/* Frees T's nodes and arrays, whichever source built it, and zeroes it. */
void tree_free(struct tree *t);

#endif
