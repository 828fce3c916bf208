/* SPDX-License-Identifier: MIT */
/*
 * The order of file data in the stream: the hot list's files first, in its order, then
 * what its ranges leave of those files (smallest first), then the rest grouped so that
 * similar content sits together; on request, programs cut so
 * that their code sits apart from their tables and data. Deterministic: depends only on
 * the tree, the hot list and that choice. Not thread-safe.
 */
#ifndef MKSTP_ORDER_H
#define MKSTP_ORDER_H

#include <stddef.h>

#include "tree.h"

/* A run of one file's bytes, [start, end), as it goes into the stream. */
struct piece {
	struct node *file;
	uint64_t start, end;
	uint8_t alone;   /* a cut of a large file (chunks.h): a block of its own */
};

/* Fills *out (caller frees) with *count pieces that together hold every byte of every
 * primary regular file of T once, in stream order; the first *nhot of them are the hot
 * region. A file is one piece unless the hot list names ranges of it (those, widened by
 * MARGIN bytes on each side, go to the hot region, the rest later) or, with CODE_APART, it is machine code whose code lies
 * within it (the code sorts apart from its other bytes). An empty file is one empty
 * piece. HOT_LIST may be NULL. A hot list that cannot be read is an error; a listed path
 * missing from the tree is a warning. On success T->files is freed (NULL; nfiles stays):
 * the pieces take its place. */
int order_files(struct tree *t, const char *hot_list, uint64_t margin, int code_apart,
		struct piece **out, size_t *nhot, size_t *count);

#endif
