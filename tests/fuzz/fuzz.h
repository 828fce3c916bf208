/* SPDX-License-Identifier: MIT */
/*
 * The libFuzzer entry point every target in tests/fuzz defines. A target takes any bytes,
 * must never crash, leak or read out of bounds, and aborts when a decoder breaks one of
 * its own promises. replay.c calls the same function on the stored corpus in ordinary
 * unit tests; build.sh links it with libFuzzer instead.
 */
#ifndef STP_FUZZ_H
#define STP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* reseal.c, linked into every target that takes a whole image. */
/* Recomputes the checksums a mutation broke: of the superblock (its last 8 bytes) and of
 * the metadata and dictionary when they lie inside BUF, so that mutations get past the
 * checksums to the parsers behind them. Returns 1 when BUF holds a decodable superblock. */
int fuzz_reseal(uint8_t *buf, size_t size);
/* A memfd holding DATA, for stp_image_open_fd (which takes it over). Aborts on failure. */
int fuzz_image_fd(const uint8_t *data, size_t size);

/* Runs FN on DATA as given, then (when that changes anything) on a copy resealed by
 * fuzz_reseal, with the library's messages silenced. */
typedef void (*fuzz_image_fn)(const uint8_t *data, size_t size);
void fuzz_as_given_and_resealed(const uint8_t *data, size_t size, fuzz_image_fn fn);

/* A broken promise: report it and crash so that the fuzzer keeps the input. */
#define FUZZ_ASSERT(cond)                                                                \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
			abort();                                                         \
		}                                                                        \
	} while (0)

#endif
