/* SPDX-License-Identifier: MIT */
/*
 * Filling the page cache from blocks that reads decode. A block is decoded whole for a
 * read that wants a few pages of it; the filler pushes the other pages it holds, of every
 * regular file the kernel knows, into the kernel's page cache
 * (fuse_lowlevel_notify_store), and when the kernel learns of a file, the pages of it that
 * lie in blocks still resident in the cache. Later reads of those pages never reach the
 * daemon.
 *
 * The kernel can only take pages of inodes it holds, so the filler watches the table of
 * the inodes it knows (inodes.h) and keeps, for the known regular files only, an index
 * from block to the file pieces stored in it; a file's pieces are freed when the kernel
 * forgets it. A file the kernel learns of is queued (a ring with a slot per inode, so
 * never full) and indexed by the filler's thread, whose walk of its extents holds no
 * lock and stops after a million pieces: a lookup never waits for a hostile file's walk.
 * Pages go in through pagestore.h, with its retry rule, but a job that meets a file whose
 * lookup reply is still on its way is queued again, due later by pagestore.h's rule,
 * rather than napping: the pushes of blocks that reads decode meanwhile go first. Memory: 9 bytes per image inode
 * and 5 per block, and 40 bytes per known file per block it touches.
 *
 * The pushes run on one thread of the filler's own, never on a request thread: a push
 * waits for the page lock that a read in flight holds, and that read is answered by a
 * request thread. No cycle can close through the daemon, because a read waits for
 * nothing a pusher holds but a buffer: a read (fuseops.c, blocks.c) takes the warmer's
 * and the filler's locks only for bookkeeping that never waits, and waits in the cache
 * only for decodes, which wait for nothing (a queued or parked one it takes over), and
 * for a buffer. While they push, this thread pins one block and warming only the blocks
 * it holds (warm.h), fewer together than the cache has buffers, so a read gets one in
 * the end, is answered, and unlocks the page. Reads the kernel queues behind others
 * (its background limit, libfuse's threads) wait only for reads the daemon answers.
 * Work goes through a queue of STP_FILL_QUEUE jobs; when it is full, the
 * job is dropped (the pages are read as before), so a request thread never waits for
 * the filler. At most STP_FILL_BLOCK_BYTES are pushed per block decoded. The thread pins
 * one resident block at a time and never decodes one; a read is answered once its bytes
 * are decoded, before the rest of the block is, and the thread waits for the decode to
 * end before it pushes any page of the block (stp_cache_get_decoded).
 *
 * stp_fill_new() must run after the sandbox is in place. stp_fill_note_decoded is
 * called from request threads: thread-safe, never blocking on the kernel, and fine with a
 * NULL filler. Functions return 0 or a negative errno.
 */
#ifndef STP_FILL_H
#define STP_FILL_H

#include <stdint.h>

#include "pagestore.h"

struct stp_image;
struct stp_superblock;
struct stp_inode;
struct stp_cache;
struct fuse_session;
struct stp_filler;
struct stp_inodes;

#define STP_FILL_QUEUE 1024u
#define STP_FILL_BLOCK_BYTES (8u << 20)

struct stp_fill_status {
	uint64_t jobs;          /* blocks and files taken from the queue */
	uint64_t dropped;       /* jobs dropped: the queue was full, or the index was */
	struct stp_pagestore_stats store; /* pushes into the page cache */
	uint64_t cpu_ns;        /* CPU time (user and system) the filler spent on jobs */
	uint64_t known;         /* regular files the kernel holds now */
	uint64_t pieces;        /* index records now (one per known file per block) */
};

/* What a filler of an image with superblock SB allocates at start: its indexes by block
 * and by inode. Its pieces come later, with lookups; when they cannot, jobs are dropped. */
uint64_t stp_fill_memory(const struct stp_superblock *sb);

/* The filler of IMG's mount: pages from CACHE go into session SE's page cache, for the
 * files INODES says the kernel knows (it watches INODES from now on, and queues them).
 * File bytes stored below stream offset WARMED_END are left alone: the warmer pushes
 * those (the hot region, while warming runs; 0 without warming), once. IMG, CACHE, SE
 * and INODES must outlive it. *out is the caller's (stp_fill_stop); its work waits for
 * stp_fill_run. */
int stp_fill_new(const struct stp_image *img, struct stp_cache *cache, struct fuse_session *se,
		 struct stp_inodes *inodes, uint64_t warmed_end, struct stp_filler **out);
/* Starts F's thread; until then F only queues work (the daemon's loop starts it beside
 * the first requests: serveloop.h). Called once, from any thread, before
 * stp_fill_halt. */
int stp_fill_run(struct stp_filler *f);
/* Stops the thread and waits a few seconds for it (-ETIMEDOUT: a push is stuck in the
 * kernel), keeping the filler; as stp_warm_halt. Idempotent; NULL is fine. */
int stp_fill_halt(struct stp_filler *f);
/* Halts, then frees. Only once no request thread can reach the note functions.
 * -ETIMEDOUT: the filler is left allocated and the process should just exit. */
int stp_fill_stop(struct stp_filler *f);

/* A read decoded BLOCK (it was not resident). */
void stp_fill_note_decoded(struct stp_filler *f, uint64_t block);

void stp_fill_status(struct stp_filler *f, struct stp_fill_status *out);

#endif
