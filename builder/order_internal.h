/* SPDX-License-Identifier: MIT */
/* What order.c keeps to itself, declared for its unit test (tests/unit/test_order.c). */
#ifndef MKSTP_ORDER_INTERNAL_H
#define MKSTP_ORDER_INTERNAL_H

#include <stdint.h>

#include "tree.h"

/* One range of a hot-list line once widened: bytes [start, end) of FILE; RANK, its
 * place in the list (ranges are ranked in the order the list gives them). */
struct hot_entry {
	struct node *file;
	uint64_t start, end, rank;
};

/* The hot list's ranges; zero-initialised before use, freed with order_hot_free. */
struct hot_set {
	struct hot_entry *v;
	size_t n, cap;
	uint64_t next_rank;
};

/* Adds to H the ranges text S of a hot-list line of N (NULL: the whole file): each range
 * that starts inside the file is cut at its size and widened by MARGIN bytes on each
 * side (the start rounded down to a page). Returns 0, -ERANGE when every range lies past
 * the end (none added), -EINVAL when S is malformed (none added), -ENOMEM. */
int order_add_ranges(struct hot_set *h, struct node *n, const char *s, uint64_t margin);

/* Turns H's ranges into the hot region's pieces, in its order: a file's bytes that
 * several ranges cover go with the earliest ranked, H's entries become disjoint pieces
 * sorted by rank (then start), and each file gets its hot ranges (sorted, merged; none
 * when one piece is the whole file: hot_ranges NULL) and its hot flag. 0 or -ENOMEM. */
int order_resolve_ranges(struct hot_set *h);
void order_hot_free(struct hot_set *h);

#endif
