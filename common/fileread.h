/* SPDX-License-Identifier: MIT */
/*
 * Reading a regular file's bytes. stp_file_walk is the one walk every reader uses (cat,
 * extract, extract --tar, bench, the mount's reads and its page-cache filler): it maps a
 * file range through the extents to stored blocks, cut at block edges, so that a reader
 * only pins one block per piece. stp_file_read is the plain reader built on it.
 * Thread-safe; nothing is kept between calls.
 */
#ifndef STP_FILEREAD_H
#define STP_FILEREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stp_image;
struct stp_cache;
struct stp_inode;

/* The block of a piece that is a hole: no extent covers it, it reads as zeros. */
#define STP_FILE_HOLE UINT64_MAX

/* LEN (> 0) bytes at file offset FILE_OFF: a hole (block == STP_FILE_HOLE, the other
 * fields 0), or the bytes [IN_BLOCK, IN_BLOCK + LEN) of stored block BLOCK, at stream
 * offset STREAM_OFF. A piece never crosses a block edge as the superblock places it;
 * whether the decoded block really holds those bytes is the reader's to check
 * (stp_file_piece_check). */
struct stp_file_piece {
	uint64_t file_off, len;
	uint64_t block, in_block, stream_off;
};

/* Called for each piece, in file order. Returns 0 to go on, or any other value, which
 * ends the walk and is returned by it. P is valid during the call only. */
typedef int (*stp_file_piece_fn)(void *ctx, const struct stp_file_piece *p);

/* Walks [OFF, OFF + LEN) of regular file INODE of IMG, cut at the file's size, calling
 * FN(CTX, ...) for each hole and each piece of a block. Returns 0, FN's error, or
 * -EUCLEAN when the extents are out of order (reported). */
int stp_file_walk(const struct stp_image *img, const struct stp_inode *inode, uint64_t off,
		  uint64_t len, stp_file_piece_fn fn, void *ctx);
/* The same over INODE's extents as the caller read them already (stp_image_extent),
 * V[0..inode->count), sorted by file offset: a reader that checked them reads them once.
 * V is the caller's; thread-safe as V is. */
struct stp_extent;
int stp_file_walk_read(const struct stp_image *img, const struct stp_inode *inode,
		       const struct stp_extent *v, uint64_t off, uint64_t len,
		       stp_file_piece_fn fn, void *ctx);

/* 0 when the decoded block of piece P, SIZE bytes, holds the piece's bytes; else the
 * damage is reported (naming IMG) and -EUCLEAN returned. */
int stp_file_piece_check(const struct stp_image *img, const struct stp_file_piece *p,
			 size_t size);

/* The file pages of STP_FILE_PAGE bytes that hold stored bytes of regular file INODE,
 * into *PAGES: what a mount reports as the file's blocks (holes take none). 0, or the
 * walk's error. O(extents): each extent's range counts whole, however many blocks it
 * crosses (as does stp_file_seek's). */
#define STP_FILE_PAGE 4096u
int stp_file_stored_pages(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t *pages);

/* lseek's SEEK_DATA (DATA true) or SEEK_HOLE on regular file INODE from OFF: into *OUT,
 * the first offset at or after OFF where stored bytes begin, or where a hole does (the
 * end of the file counts as one). -ENXIO when OFF is at or past the end, or, for data,
 * when no stored byte follows OFF; else the walk's error. */
int stp_file_seek(const struct stp_image *img, const struct stp_inode *inode, uint64_t off,
		  bool data, uint64_t *out);

/* Reads up to LEN bytes at OFF of regular file INODE into BUF; CACHE must be a cache of
 * IMG, and INODE one of IMG's inodes. Returns the byte count
 * (0 at or past the end) or a negative errno (-EUCLEAN for a damaged block or extent). */
ssize_t stp_file_read(const struct stp_image *img, struct stp_cache *cache,
		      const struct stp_inode *inode, uint64_t off, size_t len, void *buf);

#endif
