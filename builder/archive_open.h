/* SPDX-License-Identifier: MIT */
/*
 * Opening an archive for libarchive (archive_in.c): the formats and filters mkstipple
 * reads, and whether the archive is a zip, which archive_in.c reads under C.UTF-8 (a
 * zip's names marked UTF-8 come from libarchive only in a UTF-8 locale).
 *
 * A file is a zip when it begins as one, or when it ends as one (a self-extracting
 * program before it) and libarchive, bidding with every format, takes it for one. A
 * stream that cannot seek (standard input, a pipe) is a zip when it begins as one: its
 * first bytes are read to tell, and given back to libarchive ahead of the rest.
 *
 * Not thread-safe; one input per archive read.
 */
#ifndef MKSTP_ARCHIVE_OPEN_H
#define MKSTP_ARCHIVE_OPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct archive;

#define ARCHIVE_OPEN_BLOCK (128u * 1024)

struct archive_input {
	int fd;			/* not owned */
	bool seekable;		/* a regular file, read from offset 0 */
	uint8_t head[4];	/* a stream's first bytes, read to tell its format */
	size_t head_len, head_given;
	uint8_t *block;		/* a stream's reads, ARCHIVE_OPEN_BLOCK bytes */
};

/* An input reading FD (SEEKABLE: a regular file). */
void archive_input_init(struct archive_input *in, int fd, bool seekable);

/* Whether the input is a zip, as above. Call it before archive_input_open, once. A read
 * error makes it false: libarchive then meets the error itself. */
bool archive_input_is_zip(struct archive_input *in);

/* A libarchive reader of the input, opened, in *OUT. Returns 0, -ENOMEM, or -EINVAL when
 * libarchive refused it: *OUT is then the reader, for its error string (freed by the
 * caller with archive_read_free either way). */
int archive_input_open(struct archive_input *in, struct archive **out);

/* Frees what the input holds; the descriptor stays open. */
void archive_input_free(struct archive_input *in);

#endif
