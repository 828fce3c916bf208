/* SPDX-License-Identifier: MIT */
/*
 * The one reader of the list files that options name (--exclude-from, -pf, -T,
 * --hot-list): records that end in a delimiter, handed over one by one. What a record
 * means, which ones are comments, and what is said about a bad one, is the caller's.
 *
 * Not thread-safe (it reads a FILE the caller owns).
 */
#ifndef STP_BUILDER_LINES_H
#define STP_BUILDER_LINES_H

#include <stddef.h>
#include <stdio.h>

/* Called with a record (its delimiter removed, LEN bytes, NUL-terminated; the buffer is
 * the reader's and is reused), and its NUMBER, counted from 1. 0 goes on; anything else
 * stops the reading and is returned. */
typedef int (*lines_fn)(void *arg, char *rec, size_t len, unsigned number);

/* A record is at most this long: a path and the byte ranges a hot list gives it leave
 * room to spare; a longer one is no list at all (a FIFO or a huge file named by
 * mistake or by someone else), and reading it whole would cost its size in memory. */
#define LINES_RECORD_MAX (16u << 20)

/* Calls EACH(ARG, ...) for every record of F, records ending in DELIM ('\n', or '\0' for
 * -T --null; the last one may lack it). Returns what EACH stopped with, else -E2BIG for a
 * record over LINES_RECORD_MAX (said, naming NAME and the record's number), -ENOMEM, or
 * -EIO when F could not be read to its end (ferror(F) is then set: the caller says so),
 * else 0. F stays the caller's to close. */
int lines_each(FILE *f, const char *name, int delim, lines_fn each, void *arg);

/* PATH opened for lines_each if it is a regular file, or a pipe the caller handed over
 * as a descriptor (/dev/fd/N, /proc/self/fd/N, /dev/stdin: `<(...)`), without waiting on
 * a named FIFO, which anyone who can write its folder may have put there, and without
 * opening a device a link there leads to (stp_open_if): NULL with errno set otherwise
 * (EINVAL: neither). The FILE is the caller's. */
FILE *lines_open_regular(const char *path);

/* ERR (an errno of lines_open_regular) in words. */
const char *lines_strerror(int err);

#endif
