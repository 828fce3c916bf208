/* SPDX-License-Identifier: MIT */
/*
 * The order of file data in the stream: the hot list's files first, in its order, then
 * the rest grouped so that similar content sits together. Deterministic: depends only on
 * the tree and the hot list. Not thread-safe.
 */
#ifndef MKSTP_ORDER_H
#define MKSTP_ORDER_H

#include <stddef.h>

#include "scan.h"

/* Fills *out (caller frees) with *count entries: every primary regular file of T in
 * stream order; the first *nhot of them are the hot region. A hot file with ranges
 * (node->hot_ranges) appears twice: in the hot region for its ranges, and later for the
 * rest. HOT_LIST may be NULL. A hot list that cannot be read is an error; a listed path
 * missing from the tree is a warning. */
int order_files(struct tree *t, const char *hot_list, struct node ***out, size_t *nhot,
		size_t *count);

#endif
