/* SPDX-License-Identifier: MIT */
/*
 * Warming: at mount, workers decode the image's hot region in order with several blocks
 * in flight, so that the blocks an application reads at start-up are ready before it asks.
 * A warmed block's hot bytes go into the kernel's page cache (fuse_lowlevel_notify_store)
 * for every file the kernel already knows; a block is let go as soon as its hot bytes are
 * in the page cache or have been read, and the warmer never holds more blocks than the
 * cache budget, so memory stays within (workers + budget) blocks.
 *
 * Pushes and reads: a push waits for the lock of a page that a read in flight holds, and
 * that read may wait for a buffer of the cache (cache.h). So every block warming pins
 * while it pushes is a held block: a block being pushed stays held, counted against
 * warming's share of the budget (budget - 1 blocks, at least 1), until its last push
 * ends, even once reads took all its hot pages; and a worker takes a block only while
 * held + decoding stay below that share. The filler pins one block more (fill.h). So the
 * pushes pin at most max(budget - 1, 1) + 1 blocks, below the cache's budget + extra
 * (at least budget + workers + 1, stp_mountopts_cache_extra), and a read always gets a
 * buffer in the end: its page is unlocked and the push goes on.
 *
 * stp_warm_start() must run after the sandbox is in place (it starts threads). The note
 * functions are called from the FUSE request threads and are thread-safe and cheap;
 * stp_warm_status() is thread-safe. Functions return 0 or a negative errno.
 */
#ifndef STP_WARM_H
#define STP_WARM_H

#include <stdint.h>

#include "pagestore.h"

struct stp_image;
struct stp_superblock;
struct stp_cache;
struct fuse_session;
struct stp_warmer;
struct stp_inodes;

struct stp_warm_status {
	uint64_t hot_blocks;   /* blocks in the hot region */
	uint64_t warmed;       /* of those, decoded (or failed) so far */
	uint64_t held;         /* decoded blocks the warmer holds now */
	struct stp_pagestore_stats store; /* its pushes into the page cache */
	uint64_t ahead;        /* hot blocks reads decoded themselves before warming took them */
	unsigned workers;
	int done;              /* every hot block has been decoded and its pages pushed
				* (refused stores tried again, warm.c) */
	int full;              /* not done, but holding all the budget allows until reads
				* free a block: as warm as the mount can be before the
				* application starts */
};

/* The most a warmer of an image with superblock SB allocates besides blocks, before it
 * starts: its plan (stp_warm_plan_memory), a state for each hot block, a byte for each
 * hot page. Its threads' stacks are the caller's to count. */
uint64_t stp_warm_memory(const struct stp_superblock *sb);

/* Starts WORKERS threads over IMG's hot region (none when WORKERS is 0 or the image has no
 * hot region: *out is then NULL), decoding through CACHE and pushing pages into the page
 * cache of session SE (pagestore.h) for the files INODES says the kernel knows; it
 * watches INODES for the files the kernel learns of. With SE NULL nothing is stored: a
 * recording mount must see every read, and a page served from the page cache never
 * reaches the daemon. IMG, CACHE, SE and INODES must outlive the warmer. */
int stp_warm_start(const struct stp_image *img, struct stp_cache *cache, struct fuse_session *se,
		   struct stp_inodes *inodes, unsigned workers, struct stp_warmer **out);
/* Stops the workers and waits for them (a few seconds at most: -ETIMEDOUT), but keeps the
 * warmer, whose note functions still work: for a mount that ends while the loop still
 * answers requests, since a worker's page-cache store may wait for a read that only the
 * loop can answer. Idempotent; NULL is fine. */
int stp_warm_halt(struct stp_warmer *w);
/* Stops the workers, lets go of every block and frees the warmer. NULL is fine. Call it
 * only once no request thread can reach the note functions (the FUSE loop has ended).
 * -ETIMEDOUT when a thread did not end within a few seconds (one can block for ever in
 * the kernel once the loop no longer answers): the warmer is then left allocated, its
 * cache and image must not be freed, and the process should just exit. */
int stp_warm_stop(struct stp_warmer *w);

/* A read was answered from stream bytes [OFF, OFF + LEN). */
void stp_warm_note_read(struct stp_warmer *w, uint64_t off, uint64_t len);

/* A read misses BLOCK and is about to get it from the cache: unless a worker is decoding
 * it, no worker starts another block until stp_warm_demand_end(), so that the read's
 * decode has the CPUs. Returns what stp_warm_demand_end takes as BEGUN: 1 when BLOCK is a
 * hot block warming has not taken yet, -1 when a worker is decoding it, 0 otherwise.
 * DECODED: the read decoded it itself (stp_block_ref.fresh). */
int stp_warm_demand_begin(struct stp_warmer *w, uint64_t block);
void stp_warm_demand_end(struct stp_warmer *w, int begun, int decoded);

void stp_warm_status(struct stp_warmer *w, struct stp_warm_status *out);

#endif
