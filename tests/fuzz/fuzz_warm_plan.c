/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the warming plan (mounthelper/mount/warmplan.c) of an image opened from
 * arbitrary bytes, checked against every promise warmplan.h makes: segments sorted by
 * stream offset, inside the hot region and the file, none crossing a block edge; the
 * per-block and per-inode indexes each list every segment once, where it belongs. Each
 * input is tried as given and resealed (fuzz.h).
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz.h"
#include "image.h"
#include "log.h"
#include "warmplan.h"

static void check_segs(const struct stp_warm_plan *p)
{
	for (uint32_t i = 0; i < p->nsegs; i++) {
		const struct stp_warm_seg *s = &p->segs[i];

		FUZZ_ASSERT(s->len > 0 && s->ino < p->ninodes);
		FUZZ_ASSERT(s->stream_off < p->hot_size && s->len <= p->hot_size - s->stream_off);
		FUZZ_ASSERT(s->file_off < s->file_size && s->len <= s->file_size - s->file_off);
		FUZZ_ASSERT(stp_sb_block_of(p->sb, s->stream_off) ==
			    stp_sb_block_of(p->sb, s->stream_off + s->len - 1));
		FUZZ_ASSERT(!i || p->segs[i - 1].stream_off <= s->stream_off);
	}
}

static void check_blocks(const struct stp_warm_plan *p)
{
	FUZZ_ASSERT(p->block_first[0] == 0 && p->block_first[p->nblocks] == p->nsegs);
	/* the block warming decodes after the hot region is one the image has */
	FUZZ_ASSERT(!p->follow || p->nblocks < p->sb->block_count);
	/* and it decodes no further than that block holds */
	FUZZ_ASSERT(!p->follow || (p->follow_end > 0 &&
				   p->follow_end <= stp_sb_block_len(p->sb, p->nblocks)));
	for (uint64_t k = 0; k < p->nblocks; k++) {
		FUZZ_ASSERT(p->block_first[k] <= p->block_first[k + 1]);
		uint64_t end = stp_sb_block_end(p->sb, k) < p->hot_size ? stp_sb_block_end(p->sb, k)
									: p->hot_size;

		/* hot pages are file pages, never padding: a block of none holds no segment */
		FUZZ_ASSERT((p->block_pages[k] > 0) == (p->block_first[k] < p->block_first[k + 1]));
		FUZZ_ASSERT(p->block_pages[k] <= (end - stp_sb_block_start(p->sb, k) +
						  STP_HOT_PAGE - 1) / STP_HOT_PAGE);
		for (uint32_t i = p->block_first[k]; i < p->block_first[k + 1]; i++)
			FUZZ_ASSERT(stp_sb_block_of(p->sb, p->segs[i].stream_off) == k);
	}
}

static void check_inodes(const struct stp_warm_plan *p)
{
	uint8_t *seen = calloc(p->nsegs ? p->nsegs : 1, 1);

	FUZZ_ASSERT(seen);
	FUZZ_ASSERT(p->ino_first[0] == 0 && p->ino_first[p->ninodes] == p->nsegs);
	for (uint32_t ino = 0; ino < p->ninodes; ino++) {
		FUZZ_ASSERT(p->ino_first[ino] <= p->ino_first[ino + 1]);
		for (uint32_t i = p->ino_first[ino]; i < p->ino_first[ino + 1]; i++) {
			uint32_t s = p->by_ino[i];

			FUZZ_ASSERT(s < p->nsegs && !seen[s] && p->segs[s].ino == ino);
			FUZZ_ASSERT(i == p->ino_first[ino] || p->by_ino[i - 1] < s);
			seen[s] = 1;
		}
	}
	free(seen);
}

static void plan(const uint8_t *data, size_t size)
{
	struct stp_warm_plan p;
	struct stp_image *img;

	if (stp_image_open_fd(fuzz_image_fd(data, size), "fuzz", &img))
		return;
	if (!stp_warm_plan_build(img, &p)) {
		FUZZ_ASSERT(p.hot_size <= stp_image_sb(img)->data_size);
		check_segs(&p);
		check_blocks(&p);
		check_inodes(&p);
	}
	stp_warm_plan_free(&p);
	stp_image_close(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_as_given_and_resealed(data, size, plan);
	return 0;
}
