/* SPDX-License-Identifier: MIT */
/*
 * Reading a regular file's bytes: the extents are mapped to stream ranges (the one walk
 * every reader uses), the blocks pinned one at a time, and bytes no extent covers read
 * as zeros. Thread-safe; nothing is kept between calls.
 */
#ifndef STP_FILEREAD_H
#define STP_FILEREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stp_image;
struct stp_cache;
struct stp_inode;

/* Stream offset of a piece that is a hole: no extent covers it, it reads as zeros. */
#define STP_FILE_HOLE UINT64_MAX

/* Called for each piece of a file range: LEN bytes at file offset FILE_OFF, stored from
 * stream offset STREAM_OFF on (possibly across blocks), or a hole. Returns 0 to go on, or
 * a negative errno that ends the walk. */
typedef int (*stp_file_piece_fn)(void *ctx, uint64_t file_off, uint64_t stream_off,
				 uint64_t len);

/* Walks [OFF, OFF + LEN) of regular file INODE of IMG, cut at the file's size, in file
 * order, calling FN(CTX, ...) for each hole and each extent piece. Returns 0, FN's
 * error, or -EUCLEAN when the extents are out of order (reported). */
int stp_file_walk(const struct stp_image *img, const struct stp_inode *inode, uint64_t off,
		  uint64_t len, stp_file_piece_fn fn, void *ctx);

/* Reads up to LEN bytes at OFF of regular file INODE into BUF; CACHE must be a cache of
 * IMG, and INODE one of IMG's inodes. Returns the byte count
 * (0 at or past the end) or a negative errno (-EUCLEAN for a damaged block or extent). */
ssize_t stp_file_read(const struct stp_image *img, struct stp_cache *cache,
		      const struct stp_inode *inode, uint64_t off, size_t len, void *buf);

#endif
