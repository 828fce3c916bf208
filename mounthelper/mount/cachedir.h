/* SPDX-License-Identifier: MIT */
/*
 * The disk cache's folder (diskcache.h says what the cache holds and why it can be
 * trusted): every call the monitor makes on it, with the mounting user's privilege,
 * before the daemon exists. It makes the folder (mkdir -p, 0700) and uses it only when
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

#include <stdint.h>

#include "diskcache.h"

/* Opens (creating DIR, its secret and the file as needed, and checking each) the cache
 * file of the image ID, after removing the least recently used other files of DIR until
 * the rest fits in LIMIT bytes. OUT->fd is the caller's. Errors are printed on stderr
 * after PROG: a mount goes on without a cache (OUT->fd -1). Returns 0 or that error. */
int stp_cachedir_open_file(const char *dir, const struct stp_diskcache_id *id, uint64_t limit,
			   const char *prog, struct stp_diskcache_file *out);

#endif
