/* SPDX-License-Identifier: MIT */
/*
 * One side of `stipple diff`: an image, or a directory of the file system, seen the same
 * way: entries by path ("/" for the root, "/a/b" below), their type, mode, owner, size,
 * device number, link target, extended attributes and bytes. Symbolic links are never
 * followed below the root: a directory side opens each entry beneath the root's
 * descriptor (stp_beneath_open), non-blocking, and checks it is the node it stat'ed, so
 * a FIFO or symlink swapped in while diff runs is an error, never waited on or followed.
 * Extended attributes are read through /proc/self/fd.
 *
 * Single-threaded. Functions return 0 or a negative errno and print nothing: the caller
 * names the side and the path.
 */
#ifndef STP_DIFFSIDE_H
#define STP_DIFFSIDE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"

struct stp_cli;
struct stp_image;
struct stp_side;

/* Opens ARG: a directory, or else an image (a file or a URL); a directory or an image
 * that cannot be opened is reported (stp_cli_problem, stp_cli_open), naming ARG. The side is the caller's (stp_side_close). */
int stp_side_open(const struct stp_cli *cli, const char *arg, struct stp_side **out);
void stp_side_close(struct stp_side *side);
/* The image of an image side; NULL for a directory. */
const struct stp_image *stp_side_image(const struct stp_side *side);

struct stp_side_node {
	uint32_t mode, uid, gid, rdev_major, rdev_minor;
	uint64_t size;
	uint64_t dev, ino;      /* who it is: the image's inode number (dev 0), or st_dev, st_ino */
	struct stp_inode inode; /* an image side's */
};

int stp_side_stat(struct stp_side *side, const char *path, struct stp_side_node *node);

/* 1 the first time directory NODE is entered on SIDE, 0 after (a hostile image may hold
 * a directory in itself: the caller reports and skips it), or -ENOMEM. */
int stp_side_first_visit(struct stp_side *side, const struct stp_side_node *node);

/* The names in directory PATH, in byte order, as NUL-terminated strings in one array:
 * *NAMES is the caller's to free with stp_side_free_names. */
int stp_side_list(struct stp_side *side, const char *path, const struct stp_side_node *node,
		  char ***names, size_t *count);
void stp_side_free_names(char **names, size_t count);

/* The target of symlink PATH, NUL-terminated, into TARGET; its length in *LEN. */
int stp_side_readlink(struct stp_side *side, const char *path, const struct stp_side_node *node,
		      char target[STP_LINK_MAX + 1], size_t *len);

/* The extended attributes of PATH, sorted by name (the caller's: stp_side_free_xattrs). */
struct stp_side_xattr {
	char *name;
	void *value;
	size_t len;
};
int stp_side_xattrs(struct stp_side *side, const char *path, const struct stp_side_node *node,
		    struct stp_side_xattr **xattrs, size_t *count);
void stp_side_free_xattrs(struct stp_side_xattr *xattrs, size_t count);

/* A regular file open for reading, from its start. */
struct stp_side_file;
int stp_side_file_open(struct stp_side *side, const char *path,
		       const struct stp_side_node *node, struct stp_side_file **out);
/* Up to LEN bytes into BUF: the count (0 at the end) or a negative errno. */
ssize_t stp_side_file_read(struct stp_side_file *f, void *buf, size_t len);
void stp_side_file_close(struct stp_side_file *f);

#endif
