/* SPDX-License-Identifier: MIT */
/* What order.c keeps to itself, declared for its unit test (tests/unit/test_order.c). */
#ifndef MKSTP_ORDER_INTERNAL_H
#define MKSTP_ORDER_INTERNAL_H

#include "scan.h"

/* Sets N's hot ranges from the ranges text S of its hot-list line: each range that
 * starts inside the file is cut at its size and widened by MARGIN bytes on each side
 * (the start rounded down to a page), then they are sorted and merged. Ranges that cover the
 * whole file leave N with none (hot_ranges NULL: the whole file is hot). Returns 0,
 * -ERANGE when every range lies past the end (N is left with none), -EINVAL when S is
 * malformed, -ENOMEM. */
int order_parse_ranges(struct node *n, const char *s, uint64_t margin);

#endif
