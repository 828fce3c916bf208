/* SPDX-License-Identifier: MIT */
/*
 * Training the zstd dictionary that small blocks share. A block compressed alone starts
 * with no history; below DICT_BLOCK_LOG_LIMIT the dictionary gives it some. Whether the
 * image keeps it is the packer's decision (pack.c). Not thread-safe; nothing is shared.
 */
#ifndef MKSTP_DICT_H
#define MKSTP_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "order.h"

/* Blocks of 1 << DICT_BLOCK_LOG_LIMIT bytes and more get no dictionary: in blocks that
 * large a dictionary saves less than the bytes it adds to the image. */
#define DICT_BLOCK_LOG_LIMIT 19u

/* Trains a dictionary on samples of the pieces ORDER[0..n), the files' bytes as the
 * stream will hold them (copies found by the packer left out). The result depends only
 * on the file bytes, their order and BLOCK_LOG. On success *dict is owned by the caller
 * (free) and holds *len bytes; *dict is NULL when the tree is too small or too uniform
 * to train on. Read errors are printed with the path. Returns 0 or -errno. */
int dict_train(const struct piece *order, size_t n, unsigned block_log, uint8_t **dict,
	       size_t *len);

#endif
