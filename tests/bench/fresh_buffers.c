/* SPDX-License-Identifier: MIT */
/*
 * What a fresh block buffer costs against a reused one, the way the daemon's cache makes
 * them (common/cache.c): an anonymous mapping, made resident with MADV_POPULATE_WRITE,
 * written whole, unmapped. COUNT buffers of SIZE MiB each (a hot region's blocks) are made
 * fresh, then COUNT times written into one buffer made once; ROUNDS rounds, interleaved.
 *
 * usage: fresh_buffers [SIZE_MIB [COUNT [ROUNDS]]]   (default 4 8 7)
 * Prints each round's milliseconds and the medians. Build: ninja -C build
 * tests/bench/fresh_buffers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static char *map_resident(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, len, MADV_POPULATE_WRITE);
	return p;
}

/* COUNT fresh buffers, each mapped, written from SRC and unmapped. */
static double fresh(const char *src, size_t len, unsigned count)
{
	double t0 = now_ms();

	for (unsigned i = 0; i < count; i++) {
		char *p = map_resident(len);

		memcpy(p, src, len);
		munmap(p, len);
	}
	return now_ms() - t0;
}

/* One buffer mapped once, written COUNT times from SRC. */
static double reused(const char *src, size_t len, unsigned count)
{
	double t0 = now_ms();
	char *p = map_resident(len);

	for (unsigned i = 0; i < count; i++)
		memcpy(p, src, len);
	munmap(p, len);
	return now_ms() - t0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t len = (size_t)(argc > 1 ? atoi(argv[1]) : 4) << 20;
	unsigned count = argc > 2 ? (unsigned)atoi(argv[2]) : 8;
	unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 7;
	double *f = calloc(rounds, sizeof(*f)), *r = calloc(rounds, sizeof(*r));
	char *src = malloc(len);

	if (!len || !count || !rounds || !f || !r || !src)
		return 2;
	for (size_t i = 0; i < len; i++)
		src[i] = (char)(i * 2654435761u >> 24);
	for (unsigned i = 0; i < rounds; i++) {
		f[i] = fresh(src, len, count);
		r[i] = reused(src, len, count);
		printf("round %u: %u fresh buffers of %zu MiB %.2f ms, one reused %.2f ms\n", i + 1,
		       count, len >> 20, f[i], r[i]);
	}
	qsort(f, rounds, sizeof(*f), by_value);
	qsort(r, rounds, sizeof(*r), by_value);
	printf("median: fresh %.2f ms, reused %.2f ms: %.2f ms per fresh MiB\n", f[rounds / 2],
	       r[rounds / 2], (f[rounds / 2] - r[rounds / 2]) / (double)(count * (len >> 20)));
	return 0;
}
