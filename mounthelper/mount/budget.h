/* SPDX-License-Identifier: MIT */
/*
 * The memory a mount may take, worked out by the monitor from the options and the
 * checked superblock before anything else of the image is read: the budget's blocks, one
 * per warming worker and one more, the metadata (stp_image_meta_memory), the dictionary,
 * and the bookkeeping by hot block, block and inode (stp_budget_books: some 130 bytes a
 * 64 KiB hot block). A mount that could take more than half of this machine's memory is
 * refused; the figure becomes the daemon's RLIMIT_DATA, so that a forged image meets a
 * clear error, never the host's OOM killer.
 *
 * No state; thread-safe.
 */
#ifndef STP_BUDGET_H
#define STP_BUDGET_H

#include <stdint.h>

struct stp_mount_opts;
struct stp_superblock;

/* What a daemon serving O over an image with superblock SB allocates besides its blocks
 * and metadata pages, all of it sized by the superblock before the mount is live: the
 * warmer's and the filler's bookkeeping (warm.h, fill.h), and its tables by inode
 * (directories listed, the priming plan, the recorder, a tree walk's marks). */
uint64_t stp_budget_books(const struct stp_mount_opts *o, const struct stp_superblock *sb);

/* What the fetcher of a published image whose index is INDEX_LEN bytes (0: none, 0
 * returned) holds: the index, and a block buffer for each of its channels (at most
 * STP_PUBLISHED_BUFFERS_MAX), each as large as a block of SB can be stored; and the
 * kernel's memory for the store files it pins (some 2 KiB each). */
uint64_t stp_budget_fetcher(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			    uint64_t index_len);

/* 0 with the daemon's bound in *LIMIT, or -ENOMEM with the reason said after PROG. The
 * fetcher's memory counts in the half-memory rule, not in *LIMIT: stp_budget_fetcher of
 * the INDEX_LEN its HELLO said, or, when more, what its hard RLIMIT_DATA DATA_MAX
 * (stp_fetcher_data_max; 0: no fetcher) allows beyond stp_fetcher_data_fixed, so that
 * the rule binds a fetcher that lies in its HELLO. */
int stp_budget_check(const struct stp_mount_opts *o, const struct stp_superblock *sb,
		     uint64_t index_len, uint64_t data_max, const char *prog, uint64_t *limit);

#endif
