/* SPDX-License-Identifier: MIT */
/*
 * Walks over a whole image whose cost is bounded by its metadata, whatever the image says:
 * every caller that plans over all files (warming, priming, recording) goes through these.
 *
 * Each extent record belongs to one regular file and each directory entry record to one
 * directory (stipple(5)), so a walk visits at most extent_count extents and dirent_count
 * entries; an image whose inodes share ranges to make a walk quadratic is reported as
 * damaged when it passes that count, and the walk stops with -EUCLEAN.
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

/* Visits every regular file of IMG. Inodes that do not decode are reported and skipped.
 * Returns 0, FN's value, or -EUCLEAN when the files' extent counts add up to more than the
 * extent table holds. */
int stp_treewalk_files(const struct stp_image *img, stp_files_fn fn, void *ctx);

/* One entry reached from the root. PATH is relative to the root ("a/b"), NUL-terminated,
 * valid during the call only. */
struct stp_tree_entry {
	const char *path;
	size_t path_len;
	uint32_t ino, dir;   /* the entry's inode and the directory listing it */
	uint8_t dtype;       /* as the directory entry says */
	unsigned depth;      /* 1 for an entry of the root */
};

typedef int (*stp_tree_fn)(void *ctx, const struct stp_tree_entry *e);

/* Visits every entry reachable from the root, depth first, each directory's entries in
 * name order, each directory once (one reached again through a damaged image is not
 * walked again). An entry that does not decode, or whose path would exceed PATH_MAX - 1
 * bytes, is skipped with what lies below it. Iterative: no recursion on the image's depth.
 * Returns 0, FN's value, -ENOMEM, or -EUCLEAN when more entries were met than the
 * directory entry table holds. */
int stp_treewalk_tree(const struct stp_image *img, stp_tree_fn fn, void *ctx);

#endif
