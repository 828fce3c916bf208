/* SPDX-License-Identifier: MIT */
/*
 * Pushing file pages into the kernel's page cache (fuse_lowlevel_notify_store), for
 * warming and filling alike: one store, one retry rule, one set of counters per user.
 *
 * The retry rule: the kernel answers ENOENT for an inode it does not hold. The inode
 * table counts a lookup before its reply is sent (inodes.h), so an inode it knows that
 * the kernel refuses is one whose reply is still on its way: the store is tried again,
 * STP_PAGESTORE_NAP_MS apart, while the table still knows the inode, at most
 * STP_PAGESTORE_TRIES times in all. An inode the kernel forgot is not in the table, and
 * costs no wait. A caller that keeps the pages a while (warming, while its blocks are
 * held; the filler, while they are cached) stores a file still refused again later,
 * doing other work meanwhile: STP_PAGESTORE_LATER_NS(r) after its r-th refusal, at most
 * STP_PAGESTORE_ROUNDS times (waits that double from 4 ms, about a second in all), so
 * that a requester slow to run on a busy machine still finds the pages. A file given up
 * is counted then (stp_pagestore_give_up), not at each refusal.
 *
 * Never call it from a thread that serves FUSE requests: a store waits for the page lock
 * a read in flight holds. A pagestore may be used by several threads at once; its
 * counters are atomic.
 */
#ifndef STP_PAGESTORE_H
#define STP_PAGESTORE_H

#include <stddef.h>
#include <stdint.h>

struct fuse_session;
struct stp_block_ref;
struct stp_inodes;

#define STP_PAGESTORE_PAGE 4096u
#define STP_PAGESTORE_CHUNK (1u << 20) /* bytes per notify_store message */
#define STP_PAGESTORE_TRIES 5u
#define STP_PAGESTORE_NAP_MS 2u
#define STP_PAGESTORE_ROUNDS 8u
#define STP_PAGESTORE_LATER_NS(r) (4000000ull << (r))

struct stp_pagestore_stats {
	uint64_t stored_bytes; /* taken by the kernel */
	uint64_t retries;      /* stores tried again (ENOENT while the inode is known) */
	uint64_t failures;     /* stores or files given up: those pages are read as usual */
	uint64_t ns;           /* spent in the stores (the kernel copying the pages) */
};

struct stp_pagestore {
	struct fuse_session *se;        /* NULL: nothing is stored */
	const struct stp_inodes *inodes;
	struct stp_pagestore_stats st;  /* atomic */
};

/* SE and INODES must outlive the pagestore. */
void stp_pagestore_init(struct stp_pagestore *ps, struct fuse_session *se,
			const struct stp_inodes *inodes);

/* The whole pages [*A, *B) of LEN bytes at FILE_OFF of a file of FILE_SIZE bytes: a page
 * the range cuts is left out, but for the file's last page when the range ends the file. */
void stp_pagestore_span(uint64_t file_off, uint64_t len, uint64_t file_size, uint64_t *a,
			uint64_t *b);

/* Pushes file bytes [A, B) of image inode INO into the page cache from REF's pinned block,
 * whose byte IN is the file's byte A (read with stp_cache_bytes: zeros past its body), at
 * most STP_PAGESTORE_CHUNK a message. Returns the bytes the kernel took: fewer than
 * B - A when it refused a store (the inode forgotten, the mount going, or a lookup reply
 * still on its way after STP_PAGESTORE_TRIES tries: not counted as a failure, the
 * caller retries or gives up). */
uint64_t stp_pagestore_push(struct stp_pagestore *ps, uint32_t ino, uint64_t a, uint64_t b,
			    const struct stp_block_ref *ref, size_t in);
/* stp_pagestore_push, each store tried once: when the kernel refuses an inode the table
 * still knows, *AGAIN is set (counted as a retry, not a failure) and the caller tries
 * again later by the rule above. */
uint64_t stp_pagestore_push_once(struct stp_pagestore *ps, uint32_t ino, uint64_t a,
				 uint64_t b, const struct stp_block_ref *ref, size_t in,
				 int *again);

/* Counts a file whose stores the caller stops retrying: its pages are read as usual. */
void stp_pagestore_give_up(struct stp_pagestore *ps);

void stp_pagestore_stats(const struct stp_pagestore *ps, struct stp_pagestore_stats *out);

#endif
