/* SPDX-License-Identifier: MIT */
/*
 * Reaching the source tree without following what was swapped in. Every entry is opened
 * beneath its parent directory's descriptor, each directory from SOURCE down opened with
 * O_NOFOLLOW and checked against the scan by device and inode, and every file opened with
 * O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, then checked with fstat to be the regular file the
 * scan saw: a symlink, a FIFO or another file put in its place is refused, never read.
 * One source per process; not thread-safe (only the main thread reads the tree).
 * Every function that fails prints a message naming the path and returns -errno.
 */
#ifndef MKSTP_SOURCE_H
#define MKSTP_SOURCE_H

#include <sys/stat.h>

#include "scan.h"

/* Opens SOURCE, which must be a directory and not a symlink, and keeps its descriptor
 * (owned here until source_close) for the other functions. Sets *ST from it. Returns the
 * descriptor or -errno. */
int source_open_root(const char *source, struct stat *st);
/* A descriptor of directory DIR (a node of the tree), owned here and valid until the next
 * call of source_dir_fd or source_close; or -errno. */
int source_dir_fd(const struct node *dir);
/* Opens NAME in DIRFD for reading and checks that it is the regular file WANT describes;
 * PATH names it in messages. Returns a new descriptor (the caller closes it) or -errno. */
int source_openat_file(int dirfd, const char *name, const char *path, const struct stat *want);
/* source_openat_file for a regular file F of the tree. */
int source_open_file(const struct node *f);
/* The attributes of node N as they are now, not following a symlink; 0 or -errno. */
int source_stat(const struct node *n, struct stat *st);
/* 1 when NOW is the file SCANNED describes, unchanged: device, inode, type, size, mtime
 * and ctime to the nanosecond (ctime catches a rewrite that put the mtime back). */
int source_same(const struct stat *scanned, const struct stat *now);
/* Reports that PATH changed since the scan; returns -EAGAIN. */
int source_changed(const char *path);
/* Reports "mkstipple: PATH: WHAT: <errno ERR's text>" and returns -ERR. */
int source_fail(const char *path, int err, const char *what);
/* Closes the descriptors kept. */
void source_close(void);

#endif
