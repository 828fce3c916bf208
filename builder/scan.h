/* SPDX-License-Identifier: MIT */
/*
 * Scanning the source tree into memory: every entry with its attributes, link target and
 * extended attributes, children sorted by name, hard links folded onto one inode. Not
 * thread-safe; the tree is owned by the caller (scan_tree_free).
 */
#ifndef MKSTP_SCAN_H
#define MKSTP_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "exclude.h"
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
	uint8_t hot : 1;       /* listed in the hot list */
	uint8_t copied : 1;    /* some later file is the same as this one */
	uint8_t in_spool : 1;  /* archives: in the spool, not in the archive */
	uint8_t listed_type : 4; /* scan: the d_type its directory listed it with (a hint) */
	char name[];           /* last component; the root's is the source path itself */
};

struct tree_chunk;

struct tree {
	struct node *root;
	struct tree_chunk *arena; /* where the nodes are (tree.c) */
	struct node **inodes;  /* primary nodes by inode number; inodes[0] is the root */
	uint32_t ninodes;
	struct node **files;   /* primary regular files, in inode order; freed by order_files */
	size_t nfiles;
	uint64_t file_bytes;   /* sum of regular file sizes */
};

/* What the scan leaves out, for a directory and an archive alike; all zero: nothing.
 * EXCLUDE: entries whose path from the source root it matches (exclude.h) are not in the
 * tree, and an excluded directory is never opened, so its contents go with it.
 * ONE_FILE_SYSTEM: a directory on another device than the source root is kept, with its
 * attributes and no entries (as tar --one-file-system keeps a mount point); other types
 * are kept whatever their device. NO_XATTRS: no extended attribute is read or stored. */
struct scan_opts {
	const struct exclude *exclude;
	int one_file_system;
	int no_xattrs;
};

/* Scans SOURCE (a directory, not a symlink), leaving out the files SKIP[0..NSKIP) name by
 * device and inode (the image being written, when it lies inside SOURCE) and what OPTS
 * says (NULL: nothing; read during the call only). Every entry is reached beneath its
 * parent's descriptor; SOURCE's stays open in source.h for reading the files later.
 * Errors are printed with the path; returns 0 or -errno. */
int scan_tree(const char *source, const struct stat *skip, size_t nskip,
	      const struct scan_opts *opts, struct tree *out);
/* Frees T's nodes and arrays (tree.c), whichever source built it. */
void scan_tree_free(struct tree *t);
/* Sets N's filter and code span from its bytes, which begin at BASE in FD (a regular
 * file of at least 64 bytes). Errors are printed with N's path; 0 or -errno. */
int scan_read_filter(struct node *n, int fd, uint64_t base);

#endif
