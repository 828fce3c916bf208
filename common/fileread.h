/* SPDX-License-Identifier: MIT */
/*
 * Reading a regular file's bytes through the block cache: the extents are mapped to
 * stream ranges, the blocks pinned one at a time, and bytes no extent covers read as
 * zeros. Thread-safe.
 */
#ifndef STP_FILEREAD_H
#define STP_FILEREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stp_image;
struct stp_cache;
struct stp_inode;

/* Reads up to LEN bytes at OFF of regular file INODE into BUF; CACHE must be a cache of
 * IMG, and INODE one of IMG's inodes. Returns the byte count
 * (0 at or past the end) or a negative errno (-EUCLEAN for a damaged block or extent). */
ssize_t stp_file_read(const struct stp_image *img, struct stp_cache *cache,
		      const struct stp_inode *inode, uint64_t off, size_t len, void *buf);

#endif
