/* SPDX-License-Identifier: MIT */
/*
 * zstd parameter sweep over the blocks of real images (run by hand):
 *
 *   build_params [-r ROUNDS] [-n MAXBLOCKS] [-e EVERY] IMAGE... -- SET...
 *
 * Takes each IMAGE's zstd blocks as mkstipple compressed them (BCJ already applied where
 * it won), decoded with libzstd alone, and compresses them again with every SET,
 * interleaved round by round (A B C .. A B C), one block after another on one thread
 * unless the set asks for zstd's own workers. Prints per set: the bytes (checked to be
 * the same every round and to decode back to the block), median CPU seconds of the
 * process (user + system, every thread) and wall seconds. -e E keeps every E-th block
 * (a sample of a large tree), -n N at most N blocks.
 *
 * A SET is comma-separated KEY=VALUE on top of zstd's level 19 for the block's size:
 * L (level), w (windowLog, default the block's), c (chainLog), h (hashLog), s (searchLog),
 * m (minMatch), t (targetLength), st (strategy 1-9), ldm (0/1), lh (ldmHashLog),
 * lm (ldmMinMatch), lb (ldmBucketSizeLog), lr (ldmHashRateLog), nw (nbWorkers),
 * js (jobSize, bytes or with K/M), ov (overlapLog). "-" alone: level 19 as is.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#define MAXSETS 64
#define MAXBLOCKS 4096

struct block {
	void *data;
	size_t len;
};

static struct block blocks[MAXBLOCKS];
static size_t nblocks;

static void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	if (!f) {
		perror(path);
		exit(2);
	}
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 1 << 24;
			buf = realloc(buf, cap);
			if (!buf)
				exit(3);
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r);
	fclose(f);
	*len = n;
	return buf;
}

/* Every zstd frame of at least 64 KiB of content that decodes, found by its magic. */
static void take_blocks(const char *path, size_t every, size_t max)
{
	size_t len, i = 0, seen = 0;
	unsigned char *img = read_file(path, &len);

	while (i + 4 <= len && nblocks < MAXBLOCKS && (!max || seen < max * every)) {
		unsigned long long csize;
		size_t fsize, got;
		void *out;

		if (memcmp(img + i, "\x28\xb5\x2f\xfd", 4)) {
			i++;
			continue;
		}
		csize = ZSTD_getFrameContentSize(img + i, len - i);
		fsize = ZSTD_findFrameCompressedSize(img + i, len - i);
		if (csize >= ZSTD_CONTENTSIZE_ERROR || csize < 65536 || ZSTD_isError(fsize)) {
			i++;
			continue;
		}
		out = malloc(csize);
		got = ZSTD_decompress(out, csize, img + i, fsize);
		if (ZSTD_isError(got) || got != csize) {
			free(out);
			i++;
			continue;
		}
		if (seen++ % every == 0) {
			blocks[nblocks].data = out;
			blocks[nblocks++].len = got;
		} else {
			free(out);
		}
		i += fsize;
	}
	free(img);
}

static size_t size_arg(const char *v)
{
	char *end;
	size_t n = strtoull(v, &end, 10);

	if (*end == 'K')
		n <<= 10;
	else if (*end == 'M')
		n <<= 20;
	return n;
}

/* The keys of a SET and the parameters they set. */
static const struct {
	const char *key;
	ZSTD_cParameter param;
} keys[] = {
	{ "w", ZSTD_c_windowLog },
	{ "c", ZSTD_c_chainLog },
	{ "h", ZSTD_c_hashLog },
	{ "s", ZSTD_c_searchLog },
	{ "m", ZSTD_c_minMatch },
	{ "t", ZSTD_c_targetLength },
	{ "st", ZSTD_c_strategy },
	{ "ldm", ZSTD_c_enableLongDistanceMatching },
	{ "lh", ZSTD_c_ldmHashLog },
	{ "lm", ZSTD_c_ldmMinMatch },
	{ "lb", ZSTD_c_ldmBucketSizeLog },
	{ "lr", ZSTD_c_ldmHashRateLog },
	{ "nw", ZSTD_c_nbWorkers },
	{ "js", ZSTD_c_jobSize },
	{ "ov", ZSTD_c_overlapLog },
};

/* Sets KEY=VALUE of a SET on CC (L, taken before, is skipped); -1 with a message. */
static int set_one(ZSTD_CCtx *cc, const char *key, const char *value)
{
	size_t k;

	if (!strcmp(key, "L"))
		return 0;
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (!strcmp(key, keys[k].key))
			break;
	if (k == sizeof(keys) / sizeof(keys[0])) {
		fprintf(stderr, "unknown key %s\n", key);
		return -1;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, keys[k].param, (int)size_arg(value)))) {
		fprintf(stderr, "bad value %s=%s\n", key, value);
		return -1;
	}
	return 0;
}

static int set_params(ZSTD_CCtx *cc, const char *set, size_t srclen)
{
	char buf[512], *tok, *save;
	int level = 19;
	unsigned wlog = 10;

	snprintf(buf, sizeof(buf), "%s", set);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strncmp(tok, "L=", 2))
			level = atoi(tok + 2);
	while ((1ull << wlog) < srclen)
		wlog++;
	/* the level's parameters for a source of this size (ZSTD_compress2 picks them), the
	 * window widened to the block as mkstipple does */
	ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, (int)wlog);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_dictIDFlag, 0);
	snprintf(buf, sizeof(buf), "%s", set);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq)
			continue;
		*eq = 0;
		if (set_one(cc, tok, eq + 1))
			return -1;
	}
	return 0;
}

static double now(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The options before the images: -r ROUNDS, -e EVERY, -n MAXBLOCKS. Returns the index
 * of the first image, or -1 on a bad option. */
static int parse_options(int argc, char **argv, int *rounds, size_t *every, size_t *max)
{
	int i;

	for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1]; i += 2) {
		if (!strcmp(argv[i], "--")) {
			break;
		} else if (!strcmp(argv[i], "-r")) {
			*rounds = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "-e")) {
			*every = strtoull(argv[i + 1], NULL, 10);
		} else if (!strcmp(argv[i], "-n")) {
			*max = strtoull(argv[i + 1], NULL, 10);
		} else {
			fprintf(stderr, "usage: see the comment at the top of build_params.c\n");
			return -1;
		}
	}
	return i;
}

/* The largest block; the total of their sizes goes to *INBYTES. */
static size_t largest_block(size_t *inbytes)
{
	size_t b, maxlen = 0;

	for (*inbytes = 0, b = 0; b < nblocks; b++) {
		*inbytes += blocks[b].len;
		if (blocks[b].len > maxlen)
			maxlen = blocks[b].len;
	}
	return maxlen;
}

/* Compresses every block with SET into DST; the first round (CHECK) decodes each back
 * into BACK (MAXLEN bytes) and compares. The compressed total into *TOTAL; 0, or the
 * exit status after a message. */
static int compress_all(ZSTD_CCtx *cc, const char *set, int check, void *dst, void *back,
			size_t maxlen, size_t *total)
{
	for (size_t b = 0, n; b < nblocks; b++) {
		if (set_params(cc, strcmp(set, "-") ? set : "", blocks[b].len))
			return 2;
		n = ZSTD_compress2(cc, dst, ZSTD_compressBound(blocks[b].len), blocks[b].data,
				   blocks[b].len);
		if (ZSTD_isError(n)) {
			fprintf(stderr, "%s: %s\n", set, ZSTD_getErrorName(n));
			return 1;
		}
		if (check && (ZSTD_decompress(back, maxlen, dst, n) != blocks[b].len ||
			      memcmp(back, blocks[b].data, blocks[b].len))) {
			fprintf(stderr, "%s: block %zu does not decode back\n", set, b);
			return 1;
		}
		*total += n;
	}
	return 0;
}

static void print_table(const char *const *sets, int nsets, const size_t *bytes,
			double cpu[][32], double wall[][32], int rounds)
{
	printf("| set | bytes | x first | CPU s | x first | wall s |\n| --- | --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < nsets; i++) {
		double c = median(cpu[i], rounds), w = median(wall[i], rounds);
		double c0 = median(cpu[0], rounds);

		printf("| %s | %zu | %.4f | %.2f | %.3f | %.2f |\n", sets[i], bytes[i],
		       (double)bytes[i] / bytes[0], c, c / c0, w);
	}
}

int main(int argc, char **argv)
{
	int rounds = 1, nsets = 0, i, r, rc;
	size_t every = 1, max = 0, inbytes, maxlen;
	const char *sets[MAXSETS];
	size_t bytes[MAXSETS] = { 0 };
	double cpu[MAXSETS][32], wall[MAXSETS][32];
	void *dst, *back;
	ZSTD_CCtx *cc;

	i = parse_options(argc, argv, &rounds, &every, &max);
	if (i < 0)
		return 2;
	for (; i < argc && strcmp(argv[i], "--"); i++)
		take_blocks(argv[i], every ? every : 1, max);
	for (i++; i < argc && nsets < MAXSETS; i++)
		sets[nsets++] = argv[i];
	if (!nblocks || !nsets || rounds < 1 || rounds > 32) {
		fprintf(stderr, "no blocks, no sets, or rounds not 1-32\n");
		return 2;
	}
	maxlen = largest_block(&inbytes);
	fprintf(stderr, "%zu blocks, %zu bytes, zstd %s\n", nblocks, inbytes, ZSTD_versionString());
	dst = malloc(ZSTD_compressBound(maxlen));
	back = malloc(maxlen);
	cc = ZSTD_createCCtx();
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < nsets; i++) {
			double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
			size_t total = 0;

			rc = compress_all(cc, sets[i], r == 0, dst, back, maxlen, &total);
			if (rc)
				return rc;
			cpu[i][r] = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
			wall[i][r] = now(CLOCK_MONOTONIC) - w0;
			if (r && bytes[i] != total) {
				fprintf(stderr, "%s: %zu bytes, then %zu\n", sets[i], bytes[i], total);
				return 1;
			}
			bytes[i] = total;
			fprintf(stderr, "  round %d %-40s %11zu B %7.2f s CPU %7.2f s wall\n", r + 1,
				sets[i], total, cpu[i][r], wall[i][r]);
		}
	}
	print_table(sets, nsets, bytes, cpu, wall, rounds);
	return 0;
}
