/* SPDX-License-Identifier: MIT */
/*
 * Reaching the source tree without following what was swapped in. Every entry is opened
 * beneath its parent directory's descriptor, each directory from SOURCE down opened with
 * O_NOFOLLOW and checked against the scan by device and inode, and every file opened with
 * O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, then checked with fstat to be the regular file the
 * scan saw: a symlink, a FIFO or another file put in its place is refused, never read.
 * One source per process; not thread-safe (only the main thread reads the tree).
 * Every function that fails reports the problem naming the path (report.h) and returns
 * -errno.
 *
 * An archive is the other kind of source (source_use_archive): a file's bytes lie in the
 * archive itself or in the spool archive.c filled, at the node's data_off. Nothing else
 * writes there, so the change checks always pass.
 */
#ifndef MKSTP_SOURCE_H
#define MKSTP_SOURCE_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "tree.h"

/* Opens SOURCE, a directory or a symlink to one, and keeps its descriptor
 * (owned here until source_close) for the other functions. Sets *ST from it. Returns the
 * descriptor or -errno. */
int source_open_root(const char *source, struct stat *st);
/* A descriptor of directory DIR (a node of the tree), owned here and valid until the next
 * call of source_dir_fd or source_close; or -errno. */
int source_dir_fd(const struct node *dir);
/* Opens regular file F, its name in DIRFD, for reading and checks that it is the file
 * the scan saw (device and inode) and still a regular file; sets *NOW from it. Returns a
 * new descriptor (the caller closes it) or -errno, reported. */
int source_openat_file(int dirfd, const struct node *f, struct stat *now);
/* The attributes of node N as they are now, not following a symlink; 0 or -errno. */
int source_stat(const struct node *n, struct stat *st);
/* 1 when NOW is the file SCANNED describes, unchanged: device, inode, type, size, mtime
 * and ctime to the nanosecond (ctime catches a rewrite that put the mtime back). */
int source_same(const struct node_stat *scanned, const struct stat *now);
/* One regular file opened for reading: its byte 0 is at BASE in FD. */
struct source_file {
	const struct node *node;
	int fd;
	int owned;         /* FD is the file's own (a directory's file), closed on close */
	uint64_t base;
	uint64_t size;     /* archives: reads stop here, where the next entry's bytes begin */
};

/* Opens regular file F of the tree (source_openat_file beneath its directory, or its
 * place in the archive). 0; -ESTALE, not reported, when F is the file scanned but its
 * size, mtime or ctime differ now; or -errno, reported. */
int source_file_open(const struct node *f, struct source_file *sf);
/* Opens F as source_file_open does, but takes its attributes as they are now into F
 * (tree_set_stat) rather than refusing a change: to read a changed file again. */
int source_file_reopen(struct node *f, struct source_file *sf);
/* pread of file bytes [OFF, OFF + LEN): bytes read, 0 at the end, or -1 with errno. */
ssize_t source_file_pread(const struct source_file *sf, void *buf, size_t len, uint64_t off);
/* Where data may begin from file offset OFF on, below END: the end of the hole of the
 * file's descriptor that OFF lies in (SEEK_DATA), END when the hole reaches it, OFF when
 * OFF is not in a hole or the file system cannot tell. Bytes before it read as zeros, so
 * a file that is one huge hole (a sparse archive entry in the spool) costs nothing. */
uint64_t source_file_data(const struct source_file *sf, uint64_t off, uint64_t end);
/* 1 when the file is still the one scanned, with nothing past its scanned size (always
 * for an archive); 0 when it changed. */
int source_file_unchanged(const struct source_file *sf);
void source_file_close(struct source_file *sf);
/* Makes the tree's files come from ARCHIVE or, for nodes with in_spool, SPOOL (either may
 * be -1 when unused; both owned by the caller and kept open until source_close):
 * source_file_open gives the descriptor at the node's data_off, and source_stat gives
 * the node's own attributes. */
void source_use_archive(int archive, int spool);
/* Closes the descriptors kept. */
void source_close(void);

#endif
