/* SPDX-License-Identifier: MIT */
/*
 * The speed of the hashes a signed image could use (stipple(5), SIGNATURE BLOCK), through
 * OpenSSL as the library uses it: SHA-256 and BLAKE2b-512 (truncated to 256 bits when
 * used). One thread; each hash runs over a 32 MiB buffer ROUNDS times, alternating, and
 * the best and median rounds are printed in MB/s (10^6 bytes per second).
 *
 *   ninja -C build tests/bench/hash_speed       (not built by default)
 *   hash_speed [ROUNDS]            (default 9)
 *
 * Measured here (2 cores with sha_ni, OpenSSL 3.0, fuzzers running niced beside it):
 * see the report of issue 16 and the figures in man/stipple.5.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_SIZE (32u << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* MB/s of one hash of LEN bytes of BUF with MD. */
static double one_round(const EVP_MD *md, const unsigned char *buf, size_t len)
{
	unsigned char out[EVP_MAX_MD_SIZE];
	unsigned int outlen;
	double t0 = now();

	if (!EVP_Digest(buf, len, out, &outlen, md, NULL)) {
		fprintf(stderr, "hash_speed: %s failed\n", EVP_MD_get0_name(md));
		exit(1);
	}
	return (double)len / (now() - t0) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	const EVP_MD *mds[2] = { EVP_sha256(), EVP_blake2b512() };
	int rounds = argc > 1 ? atoi(argv[1]) : 9;
	unsigned char *buf = malloc(BUF_SIZE);
	double *mbs;

	if (!buf || rounds < 1 || !(mbs = calloc((size_t)rounds * 2, sizeof(*mbs))))
		return 1;
	for (size_t i = 0; i < BUF_SIZE; i++) /* not compressible, not constant */
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	one_round(mds[0], buf, BUF_SIZE); /* warm up: pages, caches, CPU clock */
	one_round(mds[1], buf, BUF_SIZE);
	for (int r = 0; r < rounds; r++)
		for (int m = 0; m < 2; m++)
			mbs[m * rounds + r] = one_round(mds[m], buf, BUF_SIZE);
	for (int m = 0; m < 2; m++) {
		double *v = mbs + m * rounds;

		qsort(v, (size_t)rounds, sizeof(*v), cmp_double);
		printf("%-12s median %7.0f MB/s  best %7.0f MB/s  (%d rounds of 32 MiB)\n",
		       EVP_MD_get0_name(mds[m]), v[rounds / 2], v[rounds - 1], rounds);
	}
	free(mbs);
	free(buf);
	return 0;
}
