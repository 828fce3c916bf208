/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: stp_pubindex_check on any bytes taken as a published index, as given and
 * with its checksums (the index's, and its superblock copy's) recomputed, so that
 * mutations reach the rules behind them (version 2's delta table too). What the check accepts must keep its promises:
 * the length and entries the rules state, and entries and header that encode back to
 * the same bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz.h"
#include "log.h"
#include "pubindex.h"

/* The delta entries of an accepted index: ascending, within their bounds, and encoding
 * back to the same bytes. */
static void accepted_deltas(const uint8_t *idx, const struct stp_pubindex_header *h,
			    const struct stp_superblock *sb)
{
	uint8_t again[STP_PUBINDEX_DELTA_SIZE];
	uint64_t next = 0;

	for (uint64_t i = 0; i < h->delta_count; i++) {
		struct stp_pubindex_delta d;

		FUZZ_ASSERT(stp_pubindex_delta_at(idx, h, i, &d) == 0);
		FUZZ_ASSERT(d.block >= next && d.block < h->block_count);
		FUZZ_ASSERT(d.content_size == stp_sb_block_len(sb, d.block));
		FUZZ_ASSERT(d.delta_size && d.delta_size <= stp_block_stored_max(d.content_size));
		FUZZ_ASSERT(d.base_count >= 1 && d.base_count <= STP_PUBINDEX_BASES_MAX);
		stp_pubindex_encode_delta(&d, again);
		FUZZ_ASSERT(!memcmp(again, idx + stp_pubindex_delta_offset(h) +
				    i * STP_PUBINDEX_DELTA_SIZE, STP_PUBINDEX_DELTA_SIZE));
		next = d.block + 1;
	}
}

/* An accepted index: what stp_pubindex_check promised, checked again here. */
static void accepted(const uint8_t *idx, size_t len, const struct stp_pubindex_header *h,
		     const struct stp_superblock *sb)
{
	uint8_t again[STP_PUBINDEX_ENTRY_SIZE > STP_PUBINDEX_HDR_SIZE ? STP_PUBINDEX_ENTRY_SIZE
								      : STP_PUBINDEX_HDR_SIZE];
	char name[STP_PUBINDEX_NAME_MAX];
	uint64_t end = STP_SB_SIZE;

	FUZZ_ASSERT(h->block_count == sb->block_count && h->image_size == sb->image_size);
	FUZZ_ASSERT(h->tail_offset >= STP_SB_SIZE && h->tail_offset <= h->image_size);
	FUZZ_ASSERT(stp_pubindex_delta_offset(h) + h->delta_count * STP_PUBINDEX_DELTA_SIZE == len);
	FUZZ_ASSERT(h->version == STP_PUBINDEX_VERSION_DELTAS || !h->delta_count);
	stp_pubindex_encode_header(h, again);
	FUZZ_ASSERT(!memcmp(again, idx, STP_PUBINDEX_HDR_SIZE));
	for (uint64_t i = 0; i < h->block_count; i++) {
		struct stp_pubindex_entry e;

		FUZZ_ASSERT(stp_pubindex_entry_at(idx, i, &e) == 0);
		FUZZ_ASSERT(e.offset == end && e.stored_size > 0);
		end += e.stored_size;
		stp_pubindex_encode_entry(&e, again);
		FUZZ_ASSERT(!memcmp(again, idx + STP_PUBINDEX_HDR_SIZE + i * STP_PUBINDEX_ENTRY_SIZE,
				    STP_PUBINDEX_ENTRY_SIZE));
		FUZZ_ASSERT(strlen(stp_pubindex_block_name(e.sha256, name)) ==
			    STP_PUBINDEX_NAME_MAX - 1);
	}
	FUZZ_ASSERT(end == h->tail_offset);
	accepted_deltas(idx, h, sb);
}

static void check(const uint8_t *idx, size_t len)
{
	struct stp_pubindex_header h;
	struct stp_superblock sb;
	const char *why = NULL;
	int rc = stp_pubindex_check(idx, len, &h, &sb, &why);

	FUZZ_ASSERT(rc == 0 || rc == -EUCLEAN || rc == -EPROTONOSUPPORT);
	if (rc)
		FUZZ_ASSERT(why != NULL);
	else
		accepted(idx, len, &h, &sb);
}

/* Recomputes the superblock copy's checksum and the index's, where the count the header
 * states leaves room for them in LEN bytes. */
static void reseal(uint8_t *idx, size_t len)
{
	uint64_t count, sb_at, deltas;

	if (len < STP_PUBINDEX_HDR_SIZE)
		return;
	count = stp_le64(idx + 32);
	if (count > (len - STP_PUBINDEX_HDR_SIZE) / STP_PUBINDEX_ENTRY_SIZE)
		return;
	sb_at = stp_pubindex_sb_offset(count);
	if (sb_at + STP_SB_SIZE <= len)
		stp_put64(idx + sb_at + STP_SB_SIZE - 8, stp_checksum(idx + sb_at, STP_SB_SIZE - 8));
	if (stp_le32(idx + 8) != STP_PUBINDEX_VERSION_DELTAS) {
		stp_put64(idx + 40, stp_pubindex_checksum(idx, idx + STP_PUBINDEX_HDR_SIZE, count));
		return;
	}
	/* version 2: the delta table ends the file, when the count fits */
	deltas = stp_le64(idx + 48);
	if (deltas <= (len - sb_at) / STP_PUBINDEX_DELTA_SIZE)
		stp_put64(idx + 40, stp_pubindex_checksum2(idx, idx + STP_PUBINDEX_HDR_SIZE, count,
							   idx + len - deltas * STP_PUBINDEX_DELTA_SIZE,
							   deltas));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);

	FUZZ_ASSERT(copy);
	stp_log_set_handler(NULL);
	memcpy(copy, data, size);
	check(copy, size); /* a copy of its own length: a read past it shows under a sanitizer */
	reseal(copy, size);
	check(copy, size);
	free(copy);
	return 0;
}
