/* SPDX-License-Identifier: MIT */
/*
 * Dictionary training. Samples are cut from the files' bytes as the stream will hold
 * them, at evenly spaced positions, within a fixed budget: no option but the block size
 * changes what is sampled, and the trainer runs single-threaded with fixed parameters, so
 * the dictionary does not depend on --threads or --memory.
 */
#define ZDICT_STATIC_LINKING_ONLY /* ZDICT_optimizeTrainFromBuffer_fastCover */
#include "dict.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zdict.h>

#include "report.h"
#include "source.h"
#include "tree.h"

#define DICT_CAPACITY (112u << 10)          /* zstd's usual size */
#define SAMPLE_BUDGET (100u * DICT_CAPACITY) /* zstd's advice: about 100x the dictionary */
#define SAMPLE_MAX (16u << 10)               /* a few thousand samples, not a few hundred */
#define INPUT_MIN (8u * DICT_CAPACITY)       /* below this a dictionary cannot pay for itself */
/* The level the trainer scores and gathers entropy statistics at: level 19 would compress
 * every sample several times over, taking seconds for little difference. */
#define TRAIN_LEVEL 3

/* The pieces as one stream, read forward. */
struct sampler {
	const struct piece *pieces;
	size_t npieces, cur;  /* cur: the piece holding position cur_start.. */
	uint64_t total, cur_start;
};

/* Bytes of PC the stream holds: none for a copy of a file stored earlier. */
static uint64_t piece_len(const struct piece *pc)
{
	return pc->file->same_as ? 0 : pc->end - pc->start;
}

/* Reads up to LEN stream bytes at POS (not before the previous call's POS) into BUF;
 * a file that shrank since the scan gives fewer bytes (the packer reports it). */
static int sampler_read(struct sampler *s, uint64_t pos, uint8_t *buf, size_t len, size_t *got)
{
	*got = 0;
	while (s->cur < s->npieces && s->cur_start + piece_len(&s->pieces[s->cur]) <= pos)
		s->cur_start += piece_len(&s->pieces[s->cur++]);
	for (size_t i = s->cur; i < s->npieces && *got < len; i++) {
		const struct piece *pc = &s->pieces[i];
		uint64_t skip = i == s->cur ? pos - s->cur_start : 0;
		size_t want = len - *got;
		struct source_file sf;
		ssize_t r;
		int rc;

		if (!piece_len(pc) || pc->file->trouble)
			continue;
		rc = source_file_open(pc->file, &sf);
		if (rc == -ENOMEM)
			return rc;
		if (rc) { /* the packer reads it again (a change) or counts it failed */
			pc->file->trouble = rc == -ESTALE ? NODE_OK : NODE_FAILED;
			break;
		}
		if (piece_len(pc) - skip < want)
			want = (size_t)(piece_len(pc) - skip);
		do
			r = source_file_pread(&sf, buf + *got, want, pc->start + skip);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			pc->file->trouble = report_errno(tree_path(pc->file), errno, "reading") ?
					    NODE_FAILED : NODE_OK;
		source_file_close(&sf);
		if (r < 0)
			break;
		*got += (size_t)r;
		if ((size_t)r < want)
			break;
	}
	return 0;
}

/* Cuts the samples: all of the stream when it fits the budget, else evenly spaced. */
static int take_samples(struct sampler *s, unsigned block_log, uint8_t **buf, size_t **sizes,
			unsigned *count)
{
	size_t len = (size_t)1 << block_log < SAMPLE_MAX ? (size_t)1 << block_log : SAMPLE_MAX;
	uint64_t n = (s->total + len - 1) / len, stride = len, used = 0;
	int rc = 0;

	if (n > SAMPLE_BUDGET / len) {
		n = SAMPLE_BUDGET / len;
		stride = s->total / n;
	}
	*buf = malloc(n * len);
	*sizes = malloc(n * sizeof(**sizes));
	if (!*buf || !*sizes)
		return -ENOMEM;
	*count = 0;
	for (uint64_t k = 0; k < n && !rc; k++) {
		size_t got;

		rc = sampler_read(s, k * stride, *buf + used, len, &got);
		if (!rc && got) {
			(*sizes)[(*count)++] = got;
			used += got;
		}
	}
	return rc;
}

int dict_train(const struct piece *order, size_t n, unsigned block_log, uint8_t **dict,
	       size_t *len)
{
	struct sampler s = { .pieces = order, .npieces = n };
	ZDICT_fastCover_params_t params = {
		.d = 8, .f = 20, .steps = 4, .nbThreads = 1, .accel = 1,
		.zParams = { .compressionLevel = TRAIN_LEVEL, .notificationLevel = 0 },
	};
	uint8_t *samples = NULL, *out = NULL;
	size_t *sizes = NULL, made;
	unsigned count = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		s.total += piece_len(&order[i]);
	*dict = NULL;
	*len = 0;
	if (s.total < INPUT_MIN)
		goto out;
	rc = take_samples(&s, block_log, &samples, &sizes, &count);
	out = rc ? NULL : malloc(DICT_CAPACITY);
	if (rc || !out) {
		rc = rc ? rc : -ENOMEM;
		goto out;
	}
	made = ZDICT_optimizeTrainFromBuffer_fastCover(out, DICT_CAPACITY, samples, sizes, count,
						       &params);
	if (ZDICT_isError(made))
		goto out; /* too few or too uniform samples: no dictionary */
	*dict = out;
	*len = made;
	out = NULL;
out:
	free(out);
	free(samples);
	free(sizes);
	return rc;
}
