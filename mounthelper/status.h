/* SPDX-License-Identifier: MIT */
/*
 * The state of a running mount, as `stipple status` shows it. The daemon answers a
 * getxattr of STP_STATUS_XATTR on the mount's root (not listed by listxattr) with
 * "key=value" lines; the daemon can open no socket or file once confined, and this needs
 * neither. Keys: image, pid, block_size, metadata_bytes, cache_budget, cache_resident,
 * cache_pinned, cache_hits, cache_misses, blocks_decoded, warm_workers, hot_blocks,
 * warmed, warm_held, warm_stored_bytes, warm_done.
 *
 * stp_status_format() is thread-safe.
 */
#ifndef STP_STATUS_H
#define STP_STATUS_H

#include <stddef.h>

#define STP_STATUS_XATTR "user.stipple.status"

struct stp_fs;

/* Writes the status text into BUF (LEN bytes); returns its length, or -ERANGE. */
int stp_status_format(const struct stp_fs *fs, char *buf, size_t len);

#endif
