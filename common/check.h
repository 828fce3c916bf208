/* SPDX-License-Identifier: MIT */
/*
 * The library's strict mode: what only a pass over the whole image can find. Opening an
 * image checks the superblock, the metadata, the dictionary and every block table entry,
 * and each record is checked each time it is decoded (stipple(5), CHECKS); on top of
 * that, stp_image_check_all decodes every data block and walks the whole tree.
 *
 * Thread-safe (the image is immutable); nothing is kept between calls. The words these
 * functions produce are thread-safe too (no strerror).
 */
#ifndef STP_CHECK_H
#define STP_CHECK_H

#include <stddef.h>
#include <stdint.h>

struct stp_image;
struct stp_tree_problem;

/* One problem: PATH is the entry it concerns ("/a/b"), or NULL when it concerns the
 * image as a whole; MSG says what is wrong. Both valid during the call only. */
typedef void (*stp_check_report_fn)(void *ctx, const char *path, const char *msg);

struct stp_check_counts {
	uint64_t problems;   /* reported through the callback and counted */
	uint64_t entries;    /* directory entries reached from the root */
};

/*
 * Decodes every data block; then checks, over the whole tree, that each directory's
 * entries ascend without duplicates and give their inode's type, that each directory
 * names its real parent, that a file's extents are sorted, apart, and clear of damaged
 * blocks, that no symlink target holds a NUL, that no two inodes share extent or
 * directory entry records, that no directory is reached twice, that every inode is
 * reached from the root, and that link counts are right. A directory's link count is
 * 2 plus its subdirectories, or 1 (from a filesystem that does not count them).
 *
 * Each problem goes to FN (the walk's "skipping the rest of the directory" too, which
 * is not counted). Returns 0 when the pass went to the end (COUNTS says what it found),
 * or -ENOMEM or -EUCLEAN (the walk cannot go on) when it stopped.
 */
int stp_image_check_all(const struct stp_image *img, stp_check_report_fn fn, void *ctx,
			struct stp_check_counts *counts);

/* The words for a problem the tree walk met ("entry 3: damaged or unsafe name"), into
 * BUF of LEN bytes. Returns BUF. */
const char *stp_check_tree_problem(const struct stp_tree_problem *p, char *buf, size_t len);

#endif
