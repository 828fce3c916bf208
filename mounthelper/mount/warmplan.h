/* SPDX-License-Identifier: MIT */
/*
 * The warming plan: which bytes of which files each block of the hot region holds. Built
 * once from the image inside the sandbox, read-only afterwards (any number of threads may
 * read it). Its size and the work to build it are linear in the metadata: the files are
 * visited through stp_treewalk_files, and a segment is a file's hot extent cut at block
 * edges.
 */
#ifndef STP_WARMPLAN_H
#define STP_WARMPLAN_H

#include <stdint.h>

struct stp_image;
struct stp_superblock;

/* Hot bytes of one file inside one block. */
struct stp_warm_seg {
	uint32_t ino;
	uint64_t file_off, stream_off, len;
	uint64_t file_size;     /* the file's: its last page may be partial */
};

struct stp_warm_plan {
	const struct stp_superblock *sb; /* the image's: where its blocks lie */
	uint64_t hot_size, nblocks;   /* the hot region, and the blocks that hold it */
	uint32_t ninodes;
	struct stp_warm_seg *segs;    /* by stream offset, none crossing a block edge */
	uint32_t nsegs;
	/* segments of inode i: segs[by_ino[ino_first[i]] .. by_ino[ino_first[i + 1] - 1]], in
	 * stream order */
	uint32_t *by_ino, *ino_first;
	/* segments of block k: segs[block_first[k] .. block_first[k + 1] - 1] */
	uint32_t *block_first;
	uint32_t *block_pages;        /* hot pages (STP_HOT_PAGE) of block k */
	/* block nblocks, the first after the hot region, holds the whole rest of a file
	 * that has hot bytes too (mkstipple puts the rests of partly hot files there), where
	 * a launch that strays past its recorded ranges reads; FOLLOW_END: where the last of
	 * those rests ends in it, in bytes from the block's start. A rest that goes on into
	 * later blocks does not count. */
	int follow;
	uint64_t follow_end;
};

/* The blocks that hold SB's hot region (its bytes below data_size). */
uint64_t stp_warm_plan_blocks(const struct stp_superblock *sb);

/* The most a plan of an image with superblock SB may allocate: its block and inode
 * indexes, and a segment for each block plus one for each extent the metadata can hold
 * (a plan with more, from hot extents that overlap, is refused as damaged). */
uint64_t stp_warm_plan_memory(const struct stp_superblock *sb);

/* Builds IMG's plan into *P (zeroed first; freed with stp_warm_plan_free even on
 * failure). An image without a hot region gets an empty plan. -ENOMEM, or -EUCLEAN when
 * the walk over the files found the image damaged, or the hot extents of its files
 * overlap (each stream page of the hot region holds bytes of one file, stipple(5)), so
 * that the segments would outnumber the blocks and the extents together. */
int stp_warm_plan_build(const struct stp_image *img, struct stp_warm_plan *p);
void stp_warm_plan_free(struct stp_warm_plan *p);

#endif
