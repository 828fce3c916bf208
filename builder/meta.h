/* SPDX-License-Identifier: MIT */
/*
 * Building the metadata: the inode, directory entry, extent, extended attribute and block
 * tables and the string pool, encoded with common/format.h. Not thread-safe.
 */
#ifndef MKSTP_META_H
#define MKSTP_META_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "tree.h"

/* Encodes the metadata of T (files already packed) and BLOCKS into a new buffer *out of
 * *len bytes, owned by the caller. Returns 0 or -errno (-EFBIG, reported: a table
 * overflows, or the whole is over STP_META_SIZE_MAX, which every reader refuses). */
int meta_build(const struct tree *t, const struct stp_blockent *blocks, uint64_t nblocks,
	       uint8_t **out, size_t *len);

/* Before packing: -EFBIG (reported) when T's metadata, without its extents and block
 * table yet, is already over what meta_build could write; else 0. */
int meta_check_size(const struct tree *t);

#endif
