/* SPDX-License-Identifier: MIT */
/*
 * Where the stable layout ends a block early: at file boundaries chosen by the files
 * themselves, so that the blocks around an unchanged run of files come out the same
 * from one release to the next. A cut pads the block with zeros up to its end (bytes of
 * no extent). Depends only on the pieces, their order and the block size, never on the
 * threads or the memory cap. Pure functions: thread-safe.
 */
#ifndef MKSTP_CUTS_H
#define MKSTP_CUTS_H

#include <stdint.h>

#include "order.h"

/* The rule for blocks of BLOCK bytes (a power of two). */
struct cut_rule {
	uint64_t block;
	uint64_t min_fill; /* no cut before the block holds this much */
	uint64_t mean_gap; /* past min_fill, a cut comes after this many bytes on average */
};

void cuts_rule(struct cut_rule *r, unsigned block_log);

/* Bytes piece PC adds to the stream, as far as the cut rule counts them: none for a
 * copy of another file (it is stored once, earlier). */
uint64_t cuts_piece_len(const struct piece *pc);

/* Whether to end the block, which holds FILL bytes (below r->block), before a piece of
 * LEN bytes: when the piece is a block or more (its inner blocks then start on a block
 * boundary) or when it would overflow a block filled past the minimum. */
int cuts_before(const struct cut_rule *r, uint64_t fill, uint64_t len);

/* Whether to end the block, which holds FILL bytes, after piece PC of LEN bytes: past
 * the minimum, with a chance of LEN / mean_gap drawn from the hash of the piece's path
 * and start, so that the same piece decides the same in every release. */
int cuts_after(const struct cut_rule *r, uint64_t fill, const struct piece *pc, uint64_t len);

#endif
