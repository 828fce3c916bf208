/* SPDX-License-Identifier: MIT */
/*
 * Opening an archive for libarchive (archive_in.c): the formats and filters mkstipple
 * reads, and whether the archive is a zip, which archive_in.c reads under C.UTF-8 (a
 * zip's names marked UTF-8 come from libarchive only in a UTF-8 locale).
 *
 * An input that can seek (a regular file, standard input redirected from one included)
 * is read from where its descriptor stands, but a zip's directory there is followed where
 * it points, before that too, as in a file behind a self-extracting program. Any input
 * is a zip when its first bytes are a signature libarchive's zip reader takes and not a
 * tar header (a tar's first name may begin with a zip's signature); a stream that cannot
 * seek (a pipe) is read to tell, and those bytes are given back to libarchive ahead of
 * the rest. A file that only ends as a zip is one when libarchive, bidding with every
 * format mkstipple reads, takes it for one: a zip behind a program, not a tar whose last
 * member is a zip.
 *
 * Not thread-safe; one input per archive read.
 */
#ifndef MKSTP_ARCHIVE_OPEN_H
#define MKSTP_ARCHIVE_OPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct archive;

#define ARCHIVE_OPEN_BLOCK (128u * 1024)
#define ARCHIVE_OPEN_HEAD 512 /* a tar header */

struct archive_input {
	int fd;			/* not owned */
	bool can_seek;		/* a regular file */
	off_t start;		/* where the archive begins in it */
	uint8_t head[ARCHIVE_OPEN_HEAD]; /* a stream's first bytes, read to tell its format */
	size_t head_len, head_given;
	uint8_t *block;		/* a stream's reads, ARCHIVE_OPEN_BLOCK bytes */
};

/* An input reading FD, which is read from where it stands. Returns 0 or -errno (fstat,
 * lseek). */
int archive_input_init(struct archive_input *in, int fd);

/* Whether the input is a zip, as above. Call it before archive_input_open, once. A read
 * error makes it false: libarchive then meets the error itself. */
bool archive_input_is_zip(struct archive_input *in);

/* A libarchive reader of the input, opened, in *OUT, which reads through IN: IN must
 * outlive it. Returns 0, -ENOMEM, or -EINVAL when libarchive refused it: *OUT is then the
 * reader, for its error string (freed by the caller with archive_read_free either way). */
int archive_input_open(struct archive_input *in, struct archive **out);

/* Frees what the input holds, once its reader is freed; the descriptor stays open. */
void archive_input_free(struct archive_input *in);

#endif
