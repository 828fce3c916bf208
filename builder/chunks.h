/* SPDX-License-Identifier: MIT */
/*
 * Cuts inside large files (--cut-inside), chosen by their bytes with a gear hash, the
 * way casync and FastCDC cut a stream: a run of bytes that did not change between two
 * releases is cut the same way in both, even when bytes were inserted before it, so its
 * blocks come out the same. Each cut piece gets a block of its own (cuts.h pads the
 * rest with zeros). Depends only on the files' bytes and the block size, never on the
 * threads or the memory cap. Not thread-safe (main thread, before packing).
 */
#ifndef MKSTP_CHUNKS_H
#define MKSTP_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#include "order.h"

/* Pieces from this many bytes on are cut, at blocks of 2^BLOCK_LOG bytes and chunks of
 * 2^MEAN_LOG on average (0: the default, 1/128 block but 64 KiB at least). */
uint64_t chunks_threshold(unsigned block_log, unsigned mean_log);

struct base;

/* Replaces each cold piece of *ORDER[nhot..*count) at least chunks_threshold() long by
 * the pieces its content cuts it into, each marked alone; *ORDER may move. With BASE
 * (not NULL) a piece is cut only when an eighth of its bytes or more lie in cuts that
 * OLD's file at its path has too (base_old_bytes). A file that cannot be read is left
 * whole, for the packer to report. Returns 0, -ENOMEM, or -errno for OLD (reported). */
int chunks_split(struct piece **order, size_t nhot, size_t *count, unsigned block_log,
		 unsigned mean_log, struct base *base);

#endif
