/* SPDX-License-Identifier: MIT */
/*
 * Cuts at file boundaries, in the manner of content-defined chunking: the anchor is the
 * piece's path, not its bytes, so a file that changed keeps its cut and the blocks after
 * it keep theirs. Scaling the chance by the piece's length makes cuts as frequent, per
 * byte, on a tree of large files as on one of small files.
 */
#include "cuts.h"

#include <limits.h>
#include <string.h>
#include <xxhash.h>

#include "tree.h"

/* Measured on real release pairs (tests/bench/RESULTS.md, "Stable blocks"): blocks at
 * least 3/4 full, then a cut every 1/32 block on average. On the Python pair at 1 MiB
 * this shared 41% of the stored bytes for 0.5% more image; a minimum of 1/2 shared 49%
 * for 1.4% more, one of 7/8 17% for 0.9% less. */
#define MIN_FILL_SHIFT 2 /* min_fill = block - block / 4 */
#define MEAN_GAP_SHIFT 5 /* mean_gap = block / 32 */

void cuts_rule(struct cut_rule *r, unsigned block_log)
{
	r->block = 1ull << block_log;
	r->min_fill = r->block - (r->block >> MIN_FILL_SHIFT);
	r->mean_gap = r->block >> MEAN_GAP_SHIFT;
}

uint64_t cuts_piece_len(const struct piece *pc)
{
	return pc->file->same_as ? 0 : pc->end - pc->start;
}

int cuts_before(const struct cut_rule *r, uint64_t fill, uint64_t len)
{
	if (!fill || !len)
		return 0;
	return len >= r->block || (fill >= r->min_fill && fill + len > r->block);
}

/* The piece's anchor: its path in the tree and where it starts in the file. */
static uint64_t anchor(const struct piece *pc)
{
	char key[PATH_MAX + 8];
	size_t len = tree_rel_path(pc->file, key, PATH_MAX);

	if (len > PATH_MAX - 1)
		len = PATH_MAX - 1; /* cut short, the same way each time */
	for (int k = 0; k < 8; k++) /* the same on every host */
		key[len + k] = (char)(pc->start >> (8 * k));
	return XXH3_64bits(key, len + 8);
}

int cuts_after(const struct cut_rule *r, uint64_t fill, const struct piece *pc, uint64_t len)
{
	if (!fill || !len || fill < r->min_fill)
		return 0;
	if (len >= r->mean_gap)
		return 1;
	/* mean_gap is a power of two: the low bits of the anchor are a uniform draw */
	return (anchor(pc) & (r->mean_gap - 1)) < len;
}
