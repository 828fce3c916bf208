/* SPDX-License-Identifier: MIT */
/* A read's block: cache first, then a decode that warming makes room for and filling uses. */
#include "blocks.h"

#include "cache.h"
#include "fill.h"
#include "warm.h"

int stp_blocks_get(const struct stp_blocks *b, uint64_t block, size_t end,
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

void stp_blocks_note_read(const struct stp_blocks *b, uint64_t off, uint64_t len)
{
	stp_warm_note_read(b->warmer, off, len);
}
