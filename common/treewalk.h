/* SPDX-License-Identifier: MIT */
/*
 * Walks over a whole image whose cost is bounded by its metadata, whatever the image says:
 * every caller that goes over all files (warming, priming, recording, and the readers'
 * ls -R, extract, info, check) goes through these.
 *
 * Each extent record belongs to one regular file and each directory entry record to one
 * directory, and in inode order the ranges ascend apart (stipple(5)). A walk in inode
 * order (stp_treewalk_files) checks that rule as it goes, in O(1) an inode; the tree walk
 * visits at most extent_count extents (each file once, whatever its names) and
 * dirent_count entries. An image that breaks either, to make a walk quadratic, is
 * reported as damaged when it is found, and the walk stops with -EUCLEAN.
 *
 * Thread-safe (the image is immutable); nothing is kept between calls.
 */
#ifndef STP_TREEWALK_H
#define STP_TREEWALK_H

#include <stddef.h>
#include <stdint.h>

struct stp_image;
struct stp_inode;

/* Called for each regular file, in inode order. Returns 0 to go on, else a value that
 * ends the walk and is returned by it. */
typedef int (*stp_files_fn)(void *ctx, uint32_t ino, const struct stp_inode *inode);

/* Visits every regular file of IMG (FN NULL: none, the rule below alone is checked).
 * Inodes that do not decode are reported and skipped.
 * Returns 0, FN's value, or -EUCLEAN when an inode's extent or directory entry range
 * overlaps or precedes that of an earlier inode of its kind (stp_range_order_next). */
int stp_treewalk_files(const struct stp_image *img, stp_files_fn fn, void *ctx);

/* The order rule of stipple(5), checked one inode at a time, inodes given in increasing
 * number: regular files' extent ranges [data, data + count) ascend apart, and so do
 * directories' entry ranges (empty ones and other types are skipped). Zero it first. */
struct stp_range_order {
	uint64_t file_end, dir_end; /* where the last nonempty range of each kind ended */
	uint32_t file_ino, dir_ino; /* and its inode */
};
/* 0, or -EUCLEAN when inode INO (IN) breaks the rule: *PREV is then the inode of its
 * kind whose range it overlaps or precedes. */
int stp_range_order_next(struct stp_range_order *o, uint32_t ino, const struct stp_inode *in,
			 uint32_t *prev);

/* One entry reached from the root. PATH is relative to the root ("a/b"), ROOTED the same
 * with a leading slash ("/a/b"); both NUL-terminated, valid during the call only (NAME,
 * the last component, points into them). */
struct stp_tree_entry {
	const char *path;
	size_t path_len;
	uint32_t ino, dir;   /* the entry's inode and the directory listing it */
	uint8_t dtype;       /* as the directory entry says */
	unsigned depth;      /* 1 for an entry of the root */
	const char *rooted;
	const char *name;
	size_t name_len;
	uint32_t index;      /* of the entry in its directory */
	/* the entry's inode, with stp_treewalk_ops.inodes set; NULL otherwise */
	const struct stp_inode *inode;
};

/* Returned by an enter callback on a directory: do not walk what lies below it. */
#define STP_TREEWALK_SKIP 1

typedef int (*stp_tree_fn)(void *ctx, const struct stp_tree_entry *e);

/* What the walk met and skipped. */
enum stp_tree_damage {
	STP_TREE_BAD_ENTRY,  /* entry INDEX of DIR does not decode (ERR) */
	STP_TREE_TOO_LONG,   /* entry INDEX of DIR: its path would reach path_max bytes */
	STP_TREE_BAD_INODE,  /* the inode INO of the entry does not decode (ERR) */
	STP_TREE_REVISIT,    /* directory INO reached a second time (a cycle, a hard link) */
	STP_TREE_ABANDONED,  /* DIR: STP_TREEWALK_BAD_RUN entries in a row did not decode,
			      * so its range itself is likely bad: the rest is skipped */
};

/* With a problem callback, entries of a directory that fail one after another and
 * make it abandoned. */
#define STP_TREEWALK_BAD_RUN 8

struct stp_tree_problem {
	enum stp_tree_damage what;
	/* BAD_ENTRY, TOO_LONG, ABANDONED: the directory's paths; else the entry's */
	const char *path, *rooted;
	uint32_t dir, index, ino;
	int err;
};

/* Returns 0 to go on, STP_TREEWALK_SKIP to skip the rest of the directory being read
 * (its leave call still comes), or a negative errno that ends the walk. */
typedef int (*stp_tree_problem_fn)(void *ctx, const struct stp_tree_problem *p);

struct stp_treewalk_ops {
	stp_tree_fn enter;           /* every entry, a directory before its entries */
	stp_tree_fn leave;           /* a directory after its entries; may be NULL */
	stp_tree_problem_fn problem; /* may be NULL: damage is then skipped silently */
	size_t path_max;             /* relative paths stay below it; 0: PATH_MAX */
	int inodes;                  /* decode each entry's inode before enter */
};

/* Visits every entry reachable from the root (not the root itself), depth first, each
 * directory's entries in the order the image stores them (name order), each directory
 * once. Whether an entry is a directory to descend into is its inode's type with
 * ops->inodes, else the directory entry's. A damaged entry, an entry whose inode does
 * not decode (with ops->inodes), a path that would reach path_max, and a directory
 * reached again are passed to ops->problem and skipped with what lies below them; so is
 * the rest of an abandoned directory.
 * Iterative: no recursion on the image's depth. Returns 0, a callback's negative value
 * (or another non-SKIP value of enter or leave), -ENOMEM, or -EUCLEAN when more entries
 * were met than the directory entry table holds. */
int stp_treewalk(const struct stp_image *img, const struct stp_treewalk_ops *ops, void *ctx);

/* stp_treewalk with FN as enter and nothing else: FN's non-zero value ends the walk
 * (STP_TREEWALK_SKIP on a directory skips it). */
int stp_treewalk_tree(const struct stp_image *img, stp_tree_fn fn, void *ctx);

#endif
