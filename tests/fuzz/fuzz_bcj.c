/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the BCJ filters. The first 9 bytes choose the filter (byte 0) and the
 * stream position (bytes 1..8, little-endian); the rest is the buffer. Decoding what
 * encoding produced must give the input back exactly, and decoding bytes that were never
 * encoded (a damaged block) must stay inside the buffer. The ELF sniffer sees the buffer
 * too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bcj.h"
#include "format.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned filter;
	uint64_t pos;
	uint8_t *buf;
	enum stp_filter sniffed;
	int rc;

	stp_log_set_handler(NULL);
	if (size < 9)
		return 0;
	filter = data[0] % 4; /* 3: a filter no build knows */
	pos = stp_le64(data + 1);
	data += 9;
	size -= 9;
	sniffed = stp_bcj_elf_filter(data, size);
	FUZZ_ASSERT(sniffed == STP_FILTER_NONE || sniffed == STP_FILTER_X86 ||
		    sniffed == STP_FILTER_ARM64);
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	rc = stp_bcj_apply(filter, buf, size, pos, 1);
	if (filter > STP_FILTER_ARM64) {
		FUZZ_ASSERT(rc == -EPROTONOSUPPORT);
		FUZZ_ASSERT(!memcmp(buf, data, size));
		goto out;
	}
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(stp_bcj_apply(filter, buf, size, pos, 0) == 0);
	FUZZ_ASSERT(!memcmp(buf, data, size));
	/* Undoing a filter on bytes that were never filtered: any result, no crash. */
	FUZZ_ASSERT(stp_bcj_apply(filter, buf, size, pos, 0) == 0);
out:
	free(buf);
	return 0;
}
