/* SPDX-License-Identifier: MIT */
/*
 * The state of a running mount, as `stipple status` shows it (common/mountstatus.h says
 * how it is asked). Keys: image, pid, block_size, metadata_bytes, cache_budget, cache_resident,
 * cache_pinned, cache_hits, cache_misses, blocks_decoded, warm_workers, hot_blocks,
 * warmed, warm_held, warm_stored_bytes, warm_done.
 *
 * stp_status_format() is thread-safe.
 */
#ifndef STP_STATUS_H
#define STP_STATUS_H

#include <stddef.h>

#include "mountstatus.h"

struct stp_fs;

/* Writes the status text into BUF (LEN bytes); returns its length, or -ERANGE. */
int stp_status_format(const struct stp_fs *fs, char *buf, size_t len);

#endif
