/* SPDX-License-Identifier: MIT */
/*
 * Packing file data: files are read in stream order into blocks, identical files are
 * stored once, long runs of zeros become holes, and blocks are compressed in parallel
 * and written in order. Each block is compressed alone with fixed parameters, so the
 * output does not depend on the thread count or the memory cap. Not thread-safe itself
 * (it runs its own workers).
 */
#ifndef MKSTP_PACK_H
#define MKSTP_PACK_H

#include <stdint.h>

#include "format.h"
#include "order.h"
#include "scan.h"

/* Blocks carried into the image as they are stored in another (base.h): the first NHEAD
 * go right after the hot region, each a whole block; with TAIL one more, shorter, goes
 * after every other block (the padded last one included). PUT writes carried block I
 * (NHEAD for the tail) at image offset POS of FD, fills *BE (its offset POS) and *LEN
 * (its decoded bytes), and learns STREAM, where it lies in the new stream. 0 or -errno,
 * reported. Called from the main thread only. */
struct pack_carry {
	uint64_t nhead;
	int tail;
	int (*put)(void *ctx, uint64_t i, uint64_t stream, int fd, uint64_t pos,
		   struct stp_blockent *be, uint64_t *len);
	void *ctx;
};

/* Zero runs of a file at least this long are holes: no extent, no stream bytes. */
#define PACK_HOLE_MIN (64u << 10)

struct pack_opts {
	int level;
	unsigned block_log;
	unsigned hot_block_log; /* the hot region's blocks; block_log: no blocks of its own */
	unsigned threads;
	uint64_t memory;   /* 0: no cap */
	int bcj;           /* try BCJ filters on blocks holding machine code */
	int stable;        /* stable layout: blocks cut at files chosen by their paths
			    * (cuts.h), filters relative to each block, no dictionary */
	const struct pack_carry *carry; /* NULL: none; only with stable */
	int end_body;      /* a block padded over half with zeros ends its last zstd block
			    * where its bytes end (--cut-inside): readers decode no zeros */
	int cut_hot;       /* with stable, a release series (--cut-inside, --base): the hot
			    * region cut by content too, at the cost of its padding */
};

struct pack_result {
	uint64_t data_size;   /* stream bytes */
	uint64_t hot_size;    /* stream bytes of the hot files */
	unsigned hot_block_log; /* 0 unless the hot region has blocks of its own (feature
				 * HOT_BLOCKS, set in feat_incompat) */
	uint64_t nblocks;
	struct stp_blockent *blocks; /* caller frees */
	uint64_t end;         /* first free image offset after the blocks */
	uint64_t feat_incompat;
	uint8_t *dict;        /* the dictionary blocks were compressed with, to store once
			       * after them; NULL: none. Caller frees */
	size_t dict_size;
	uint64_t dict_gain;   /* bytes the dictionary saved in the blocks (kept or not) */
	uint64_t dict_blocks; /* blocks that use it */
	unsigned changed;     /* files that kept changing: stored as last read, whole (their
			       * size the bytes read), each warned about */
	unsigned failed;      /* files that could not be read, each reported: not stored */
};

/* Packs the pieces ORDER[0..n) (the first NHOT are hot) into FD from offset START. Sets
 * each file's extents, sorted by file offset. The hot region is cut into blocks of
 * o->hot_block_log when that is below o->block_log. Below DICT_BLOCK_LOG_LIMIT it trains a
 * dictionary and keeps it only when it makes the image smaller.
 * A file that does not read as the scan saw it (size, mtime or ctime, a short read, or
 * other bytes than its copies were compared with) is read again, whole, after the other
 * files; what was stored of it stays in the stream unused. After three reads that all
 * changed, the last is kept, with the size it was read at, and counted in r->changed. A
 * file that cannot be read is reported, counted in r->failed and given no extents: the
 * caller must not keep the image. Either way the build goes on, so that every problem is
 * reported in one pass. Returns 0, or -errno (reported) when the image cannot be written
 * or memory runs out. With o->stable the cold blocks are cut as cuts.h says (with
 * o->cut_hot the hot ones too, at their own block size, never inside a run of one
 * file), the hot region ends on a block, hot blocks are compressed whole whatever
 * o->end_body says, and filtered blocks are filtered from position 0 (feature
 * BCJ_RELATIVE). */
int pack_files(const struct piece *order, size_t n, size_t nhot, int fd, uint64_t start,
	       const struct pack_opts *o, struct pack_result *r);

/* Bytes the packer holds per block in flight and per worker at these settings, with or
 * without (DICT 0) a dictionary. The dictionary's own tables come once on top. */
void pack_memory_cost(const struct pack_opts *o, int dict, uint64_t *per_block,
		      uint64_t *per_worker);

#endif
