/* SPDX-License-Identifier: MIT */
/*
 * What each step of decoding a block costs, through the library's own pieces: the
 * positioned read of its stored bytes, their XXH3 checksum, zstd, the BCJ unfilter, and
 * a copy of the decoded bytes the size of what a page-cache push copies. One thread;
 * each step is timed alone over every block of the range, ROUNDS times, and the median
 * round is printed per step (ms in all and MB/s of decoded bytes). The image's stored
 * bytes are read once before timing, so the pread is from the page cache, as in a
 * mount whose image file is cached. Blocks with the dictionary (codec 2) are decoded
 * whole by stp_image_decode_block and counted under zstd.
 *
 *   ninja -C build tests/bench/read_steps       (not built by default)
 *   read_steps IMAGE [hot|all|FIRST-LAST] [ROUNDS]   (default: hot, 5 rounds)
 *
 * "hot" is the blocks that hold the hot region: what warming decodes at mount.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "bcj.h"
#include "format.h"
#include "image.h"

enum { STEP_PREAD, STEP_SUM, STEP_ZSTD, STEP_BCJ, STEP_COPY, NSTEPS };
static const char *const step_names[NSTEPS] = { "pread", "checksum", "zstd", "bcj", "copy" };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct buffers {
	uint8_t *stored, *out, *copy;
	ZSTD_DCtx *dctx;
};

/* One pass over blocks [FIRST, LAST] of IMG, adding each step's seconds to T. */
static int one_round(const struct stp_image *img, uint64_t first, uint64_t last,
		     struct buffers *b, double t[NSTEPS])
{
	const struct stp_superblock *sb = stp_image_sb(img);

	for (uint64_t k = first; k <= last; k++) {
		struct stp_blockent be;
		size_t size = stp_image_block_decoded_size(img, k);
		double t0;
		int rc = stp_image_block(img, k, &be);

		if (rc)
			return rc;
		if (be.codec == STP_CODEC_ZSTD_DICT) {
			t0 = now();
			rc = stp_image_decode_block(img, k, b->out);
			t[STEP_ZSTD] += now() - t0;
			if (rc)
				return rc;
			continue;
		}
		t0 = now();
		if (pread(stp_image_fd(img), b->stored, be.stored_size, (off_t)be.offset) !=
		    (ssize_t)be.stored_size)
			return -EIO;
		t[STEP_PREAD] += now() - t0;
		t0 = now();
		if (stp_checksum(b->stored, be.stored_size) != be.checksum)
			return -EUCLEAN;
		t[STEP_SUM] += now() - t0;
		t0 = now();
		if (be.codec == STP_CODEC_ZSTD) {
			size_t n = ZSTD_decompressDCtx(b->dctx, b->out, size, b->stored, be.stored_size);

			if (ZSTD_isError(n) || n != size)
				return -EUCLEAN;
		} else {
			memcpy(b->out, b->stored, size);
		}
		t[STEP_ZSTD] += now() - t0;
		t0 = now();
		if (be.filter != STP_FILTER_NONE)
			stp_bcj_apply(be.filter, b->out, size, stp_sb_block_start(sb, k), 0);
		t[STEP_BCJ] += now() - t0;
		t0 = now();
		memcpy(b->copy, b->out, size);
		t[STEP_COPY] += now() - t0;
	}
	return 0;
}

static int parse_range(const struct stp_superblock *sb, const char *arg, uint64_t *first,
		       uint64_t *last)
{
	*first = 0;
	*last = sb->block_count ? sb->block_count - 1 : 0;
	if (!strcmp(arg, "all"))
		return 0;
	if (!strcmp(arg, "hot")) {
		if (!sb->hot_size)
			return -EINVAL;
		*last = stp_sb_block_of(sb, sb->hot_size - 1);
		return 0;
	}
	return sscanf(arg, "%lu-%lu", first, last) == 2 && *first <= *last &&
	       *last < sb->block_count ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct stp_image *img;
	struct buffers b;
	uint64_t first, last, bytes = 0;
	int rounds = argc > 3 ? atoi(argv[3]) : 5, rc;

	if (argc < 2 || rounds < 1) {
		fprintf(stderr, "usage: read_steps IMAGE [hot|all|FIRST-LAST] [ROUNDS]\n");
		return 2;
	}
	if ((rc = stp_image_open(argv[1], &img))) {
		fprintf(stderr, "read_steps: %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	if (parse_range(stp_image_sb(img), argc > 2 ? argv[2] : "hot", &first, &last)) {
		fprintf(stderr, "read_steps: %s: no such block range (or no hot region)\n", argv[1]);
		return 2;
	}
	/* a zstd block may store up to the compress bound of its size */
	b.stored = malloc(ZSTD_compressBound(stp_image_block_size(img)));
	b.out = malloc(stp_image_block_buffer_size(img));
	b.copy = malloc(stp_image_block_buffer_size(img));
	b.dctx = ZSTD_createDCtx();
	if (!b.stored || !b.out || !b.copy || !b.dctx)
		return 1;
	for (uint64_t k = first; k <= last; k++)
		bytes += stp_image_block_decoded_size(img, k);

	double *t = calloc((size_t)rounds * NSTEPS, sizeof(*t)), total = 0;

	if (!t)
		return 1;
	one_round(img, first, last, &b, (double[NSTEPS]){ 0 }); /* into the page cache */
	for (int r = 0; r < rounds; r++)
		if ((rc = one_round(img, first, last, &b, t + (size_t)r * NSTEPS))) {
			fprintf(stderr, "read_steps: block decode failed: %s\n", strerror(-rc));
			return 1;
		}
	printf("%s: blocks %lu-%lu, %.1f MiB decoded; median of %d rounds, one thread\n",
	       argv[1], first, last, bytes / 1048576.0, rounds);
	for (int s = 0; s < NSTEPS; s++) {
		double v[rounds];

		for (int r = 0; r < rounds; r++)
			v[r] = t[(size_t)r * NSTEPS + s];
		qsort(v, (size_t)rounds, sizeof(double), cmp_double);
		total += v[rounds / 2];
		printf("  %-9s %9.1f ms %9.0f MB/s\n", step_names[s], v[rounds / 2] * 1e3,
		       v[rounds / 2] > 0 ? bytes / v[rounds / 2] / 1e6 : 0.0);
	}
	printf("  %-9s %9.1f ms %9.0f MB/s\n", "all", total * 1e3, bytes / total / 1e6);
	free(t);
	ZSTD_freeDCtx(b.dctx);
	stp_image_close(img);
	return 0;
}
