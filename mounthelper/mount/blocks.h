/* SPDX-License-Identifier: MIT */
/*
 * How a FUSE read gets a block: through the cache, with warming and filling behind it.
 * A block not resident is decoded for the read (or its decode joined); meanwhile warming
 * starts no other block, so that the read has the CPUs, and a block the read decoded
 * itself has its other pages pushed into the page cache by the filler. The ref that a
 * get returns is the cache's; its bytes are read in place with stp_cache_feed. A FUSE
 * read calls nothing else to get its blocks.
 *
 * Thread-safe, as the cache, warmer and filler are; never blocks on the kernel.
 */
#ifndef STP_BLOCKS_H
#define STP_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

struct stp_cache;
struct stp_warmer;
struct stp_filler;
struct stp_block_ref;

/* What is behind the reads of one mount; the daemon's, outliving every read. */
struct stp_blocks {
	struct stp_cache *cache;
	struct stp_warmer *warmer; /* NULL: no warming */
	struct stp_filler *filler; /* NULL: no filling */
};

/* Pins BLOCK into REF once its first END bytes can be read (stp_cache_get_range's
 * errors). START is where the read begins in the block: a read from its start may be
 * reading a file's cuts in order, and the next block is queued for decoding ahead. */
int stp_blocks_get(const struct stp_blocks *b, uint64_t block, size_t start, size_t end,
		   struct stp_block_ref *ref);
/* REF, pinned by stp_blocks_get, once its first END bytes can be read (stp_cache_wait). */
int stp_blocks_wait(const struct stp_blocks *b, struct stp_block_ref *ref, size_t end);
/* Copies bytes [FROM, FROM + LEN) of REF's block, unfiltered, to DST (stp_cache_read):
 * for bytes past ref->direct, which cannot be read in place (stp_cache_feed). */
int stp_blocks_read(const struct stp_blocks *b, const struct stp_block_ref *ref, size_t from,
		    size_t len, void *dst);
/* Lets go of REF's pin, if it holds one. */
void stp_blocks_release(const struct stp_blocks *b, struct stp_block_ref *ref);

/* A read was answered from stream bytes [OFF, OFF + LEN): warming lets go of blocks whose
 * hot pages have all been read. */
void stp_blocks_note_read(const struct stp_blocks *b, uint64_t off, uint64_t len);

#endif
