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

struct node {
	char *path;            /* full source path, for messages only (source.h opens) */
	const char *name;      /* last component (points into path); "" for the root */
	size_t name_len;
	struct stat st;
	struct node *parent;
	struct node **children; /* directories: sorted by name bytes */
	size_t nchildren;
	struct node *primary;  /* hard links: the node that carries the inode (self if none) */
	char *link_target;     /* symlinks */
	struct xattr_kv *xattrs; /* sorted by name */
	size_t nxattrs;
	uint32_t ino;          /* image inode number (primary nodes) */
	uint32_t nlink;        /* names in the image (primary nodes); dirs: 2 + subdirs */
	uint64_t data_off;     /* archives: where the file's bytes begin (source.h) */
	int in_spool;          /* archives: in the spool, not in the archive */
	/* regular files, filled by the packer */
	struct stp_extent *extents;
	uint32_t nextents;
	int hot;               /* listed in the hot list */
	struct hot_range *hot_ranges; /* the parts start-up reads; NULL: the whole file */
	size_t nhot_ranges;
	uint8_t filter;        /* enum stp_filter that suits its machine code */
	uint64_t code_start, code_end; /* the bytes holding that code (filter set) */
	uint64_t hash[2];      /* content hash, when another file has the same size */
	int hashed;
	struct node *same_as;  /* identical content stored earlier in the stream */
	int copied;            /* some later file is the same as this one */
};

struct tree {
	struct node *root;
	struct node **inodes;  /* primary nodes by inode number; inodes[0] is the root */
	uint32_t ninodes;
	struct node **files;   /* primary regular files, in inode order */
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
