/* SPDX-License-Identifier: MIT */
/* A read's block: cache first, then a decode that warming makes room for and filling uses. */
#include "blocks.h"

#include "cache.h"
#include "fill.h"
#include "warm.h"

/* The block, decoded if need be: warming makes room for the decode, filling uses it. */
static int get(const struct stp_blocks *b, uint64_t block, size_t end,
	       struct stp_block_ref *ref)
{
	int begun, err;

	if (stp_cache_contains(b->cache, block))
		return stp_cache_get_range(b->cache, block, end, ref);
	begun = stp_warm_demand_begin(b->warmer, block);
	err = stp_cache_get_range(b->cache, block, end, ref);
	stp_warm_demand_end(b->warmer, begun, !err && ref->fresh);
	if (!err && ref->fresh)
		stp_fill_note_decoded(b->filler, block);
	return err;
}

int stp_blocks_get(const struct stp_blocks *b, uint64_t block, size_t start, size_t end,
		   struct stp_block_ref *ref)
{
	int err = get(b, block, end, ref);

	if (!err && !start)
		stp_cache_read_ahead(b->cache, block + 1);
	return err;
}

int stp_blocks_wait(const struct stp_blocks *b, struct stp_block_ref *ref, size_t end)
{
	return stp_cache_wait(b->cache, ref, end);
}

int stp_blocks_read(const struct stp_blocks *b, const struct stp_block_ref *ref, size_t from,
		    size_t len, void *dst)
{
	return stp_cache_read(b->cache, ref, from, len, dst);
}

void stp_blocks_release(const struct stp_blocks *b, struct stp_block_ref *ref)
{
	stp_cache_release(b->cache, ref);
}

void stp_blocks_note_read(const struct stp_blocks *b, uint64_t off, uint64_t len)
{
	stp_warm_note_read(b->warmer, off, len);
}
