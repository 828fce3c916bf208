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

/* A broken promise: report it and crash so that the fuzzer keeps the input. */
#define FUZZ_ASSERT(cond)                                                                \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
			abort();                                                         \
		}                                                                        \
	} while (0)

#endif
