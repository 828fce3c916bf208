/* SPDX-License-Identifier: MIT */
/*
 * The disk cache's folder (diskcache.h says what the cache holds and why it can be
 * trusted): what the monitor does in it, with the mounting user's privilege, before the
 * daemon exists. The policy is here (names, owner checks, the size bound, what goes);
 * each call made with privilege (mkdir, open, unlink, the times) is monitor.c's. It makes the folder (mkdir -p, 0700) and uses it only when
 * the mounting user owns it and no one else may write it; under the folder's lock
 * (flock) it reads or makes the secret, removes the least recently used cache files
 * beyond the size bound (only files named as the cache names them, each under an
 * exclusive lock had at once, so none in use), and opens, locks (shared) and sizes the
 * image's file. Its descriptor is handed to the daemon.
 *
 * Called from the monitor's one thread; not thread-safe.
 */
#ifndef STP_CACHEDIR_H
#define STP_CACHEDIR_H

#include <stdbool.h>
#include <stdint.h>

#include "diskcache.h"

/* Opens (creating DIR, its secret and the file as needed, and checking each) the cache
 * file of the image ID, after removing the least recently used other files of DIR until
 * the rest fits in LIMIT bytes. OUT->fd is the caller's. Errors are printed on stderr
 * after PROG: a mount goes on without a cache (OUT->fd -1). Returns 0 or that error. */
int stp_cachedir_open_file(const char *dir, const struct stp_diskcache_id *id, uint64_t limit,
			   const char *prog, struct stp_diskcache_file *out);

/* The hardened pieces the store of published blocks (store.h) is built on, for the
 * monitor. DIR (made as mkdir -p, 0700) opened as OUT when it is a directory, not a
 * symbolic link, owned by the mounting user and writable by no one else: 0, -ENOTDIR,
 * -EPERM or another negative errno. */
int stp_cachedir_open_dir(const char *dir, int *out);
/* NAME beneath AT (AT_FDCWD: a path), made 0700 when missing, opened when it is a
 * directory, not a symbolic link, owned by the mounting user and writable by no one else:
 * the descriptor, -ENOTDIR, -EPERM or another negative errno. */
int stp_cachedir_open_sub(int at, const char *name);
/* NAME beneath DIRFD opened with FLAGS (never following a link) when it is a regular
 * file the mounting user owns, mode 0600, one link, its bytes into *LEN; else removed
 * and, when FLAGS hold O_CREAT, made anew O_EXCL (*LEN 0), without it -ENOENT. The
 * descriptor, or a negative errno. */
int stp_cachedir_open_private(int dirfd, const char *name, int flags, uint64_t *len);
/* Words for stp_cachedir_open_dir's errors. */
const char *stp_cachedir_dir_error(int err);

#endif
