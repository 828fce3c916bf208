/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the superblock decoder on any 256 bytes (shorter inputs are zero-padded),
 * as given and with its checksum (the last 8 bytes) recomputed, so that mutations reach
 * the field checks behind the checksum.
 */
#include <errno.h>
#include <string.h>

#include "format.h"
#include "fuzz.h"
#include "log.h"

static void decode(const uint8_t in[STP_SB_SIZE])
{
	struct stp_superblock sb, sb2;
	uint8_t again[STP_SB_SIZE];
	uint64_t bad, bad2;
	int rc;

	memset(&sb, 0, sizeof(sb)); /* padding too: the two are compared with memcmp */
	memset(&sb2, 0, sizeof(sb2));
	rc = stp_sb_decode(in, &sb, &bad);
	FUZZ_ASSERT(rc == 0 || rc == -EUCLEAN || rc == -EPROTONOSUPPORT);
	if (rc == -EPROTONOSUPPORT)
		FUZZ_ASSERT((bad & (bad - 1)) == 0); /* one bit named, or none for the version */
	if (rc)
		return;
	FUZZ_ASSERT(bad == 0);
	FUZZ_ASSERT(sb.block_log >= STP_BLOCK_LOG_MIN && sb.block_log <= STP_BLOCK_LOG_MAX);
	FUZZ_ASSERT(sb.hot_size <= sb.data_size);
	FUZZ_ASSERT(sb.meta_offset >= STP_SB_SIZE && sb.meta_offset <= sb.image_size);
	FUZZ_ASSERT(sb.meta_stored_size <= sb.image_size - sb.meta_offset);
	/* What decodes re-encodes to something that decodes to the same fields. */
	stp_sb_encode(&sb, again);
	FUZZ_ASSERT(stp_sb_decode(again, &sb2, &bad2) == 0);
	FUZZ_ASSERT(!memcmp(&sb, &sb2, sizeof(sb)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t in[STP_SB_SIZE] = { 0 };

	stp_log_set_handler(NULL);
	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
	decode(in);
	stp_put64(in + STP_SB_SIZE - 8, stp_checksum(in, STP_SB_SIZE - 8));
	decode(in);
	return 0;
}
