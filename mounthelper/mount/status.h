/* SPDX-License-Identifier: MIT */
/*
 * The state of a running mount, as `stipple status` shows it (common/mountstatus.h says
 * how it is asked). Keys: image, pid, block_size, metadata_bytes, cache_budget, cache_resident,
 * cache_pinned, cache_hits, cache_misses, blocks_decoded, blocks_ahead, cache_parked (1
 * while a block's decode is parked part-way: cache.h), warm_workers_set (as the options
 * asked), hot_bytes (the image's hot region), warm_workers (the workers warming really
 * runs with: 0 when it is off or failed to start), hot_blocks, warmed, warm_held,
 * warm_stored_bytes, warm_done, warm_full, warm_ahead (hot blocks reads decoded
 * themselves before warming took them), cache_waits (gets that waited for a buffer),
 * warm_store_failures, warm_store_ns (time in the kernel's copy of warmed pages),
 * warm_store_retries, fill_store_retries, fill_store_failures (pagestore.h),
 * fill (1 when on), fill_jobs, fill_dropped, fill_stored_bytes, fill_cpu_ns,
 * fill_known, fill_pieces (fill.h), inodes_known (inodes the kernel holds: inodes.h),
 * read_failures (reads answered with an error),
 * read_failures_logged, read_failures_suppressed (by the rate limit),
 * read_failures_unsent (lines syslog did not take: readfail.h); a URL mount's also net_requests (HTTP requests,
 * retries included), net_retries, net_failures (reads that failed for good), net_bytes
 * (fetched for reads), disk_cache (1 when in use), disk_cache_hits, disk_cache_bytes
 * (reads and bytes it answered): imgsrc.h.
 *
 * stp_status_format() is thread-safe.
 */
#ifndef STP_STATUS_H
#define STP_STATUS_H

#include <stddef.h>

#include "mountstatus.h"

struct stp_image;
struct stp_cache;
struct stp_warmer;
struct stp_filler;
struct stp_readfail;
struct stp_inodes;

/* Writes the status of the mount of IMG, served through CACHE, warmed by WARMER and
 * filled by FILLER (NULL when off), the kernel's inodes counted by INODES, its failed
 * reads counted by READFAIL (NULL: none),
 * where the options asked for WORKERS_SET workers, into BUF (LEN bytes); returns its
 * length, or -ERANGE. */
int stp_status_format(const struct stp_image *img, struct stp_cache *cache,
		      struct stp_warmer *warmer, struct stp_filler *filler,
		      struct stp_inodes *inodes, struct stp_readfail *readfail, unsigned workers_set,
		      char *buf, size_t len);

#endif
