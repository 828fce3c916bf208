/* SPDX-License-Identifier: MIT */
/*
 * What the golden-vector tests share (test_format.c, test_pubindex.c): a check of two
 * integers that prints both, a byte comparison naming the first bad offset, and the
 * little-endian writer the tests build expected bytes with, by hand, never through the
 * encoders they pin. Include after check.h.
 */
#ifndef STP_TEST_GOLDEN_H
#define STP_TEST_GOLDEN_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CHECK_EQ(a, b)                                                                   \
	do {                                                                             \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                         \
		if (a_ != b_) {                                                          \
			fprintf(stderr, "%s:%d: %s = %" PRId64 " (%#" PRIx64 "), "       \
				"expected %" PRId64 " (%#" PRIx64 ")\n", __FILE__, __LINE__,   \
				#a, (int64_t)a_, a_, (int64_t)b_, b_);                   \
			failures++;                                                      \
		}                                                                        \
	} while (0)

/* Compares an encoded record with its expected bytes, naming the first bad offset. */
static void __attribute__((unused))
check_bytes(const char *what, const uint8_t *got, const uint8_t *want, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (got[i] != want[i]) {
			fprintf(stderr, "%s: byte %zu is %#04x, expected %#04x\n", what, i, got[i],
				want[i]);
			failures++;
			return;
		}
	}
}

/* The little-endian bytes of V, LEN of them, at OUT + OFF. */
static void __attribute__((unused)) put_le(uint8_t *out, size_t off, uint64_t v, size_t len)
{
	for (size_t i = 0; i < len; i++)
		out[off + i] = (uint8_t)(v >> (8 * i));
}

#endif
