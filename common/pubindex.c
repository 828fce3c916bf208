/* SPDX-License-Identifier: MIT */
/* The published index, field by field (pubindex.h, stipple(5) PUBLISHED INDEX). */
#include "pubindex.h"

#include <errno.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* a state on the stack: a checksum cannot fail */
#include <xxhash.h>

/* Header field offsets. */
enum {
	PI_MAGIC = 0, PI_VERSION = 8, PI_HASH = 12, PI_IMAGE_SIZE = 16, PI_TAIL = 24,
	PI_COUNT = 32, PI_CHECKSUM = 40, PI_RESERVED = 48, PI_DELTAS = 48, PI_RESERVED2 = 56,
};
/* Entry field offsets. */
enum { PE_OFFSET = 0, PE_STORED = 8, PE_RESERVED = 12, PE_SHA = 16 };
/* Delta entry field offsets. */
enum {
	PD_BLOCK = 0, PD_SIZE = 8, PD_CONTENT_SIZE = 12, PD_BASES = 16, PD_RESERVED = 17,
	PD_SHA = 24, PD_CONTENT_SHA = 56, PD_BASE_SHA = 88, PD_RESERVED2 = 152,
};

static int zeroed(const uint8_t *p, size_t len)
{
	while (len--)
		if (*p++)
			return 0;
	return 1;
}

static int fail(const char **reason, int rc, const char *why)
{
	if (reason)
		*reason = why;
	return rc;
}

void stp_pubindex_encode_header(const struct stp_pubindex_header *h,
				uint8_t out[STP_PUBINDEX_HDR_SIZE])
{
	memset(out, 0, STP_PUBINDEX_HDR_SIZE);
	memcpy(out + PI_MAGIC, STP_PUBINDEX_MAGIC, STP_PUBINDEX_MAGIC_LEN);
	stp_put32(out + PI_VERSION, h->version);
	stp_put32(out + PI_HASH, h->hash);
	stp_put64(out + PI_IMAGE_SIZE, h->image_size);
	stp_put64(out + PI_TAIL, h->tail_offset);
	stp_put64(out + PI_COUNT, h->block_count);
	stp_put64(out + PI_CHECKSUM, h->checksum);
	stp_put64(out + PI_DELTAS, h->delta_count);
}

int stp_pubindex_decode_header(const uint8_t in[STP_PUBINDEX_HDR_SIZE],
			       struct stp_pubindex_header *h, const char **reason)
{
	if (memcmp(in + PI_MAGIC, STP_PUBINDEX_MAGIC, STP_PUBINDEX_MAGIC_LEN))
		return fail(reason, -EUCLEAN, "not a published index (bad magic)");
	h->version = stp_le32(in + PI_VERSION);
	h->hash = stp_le32(in + PI_HASH);
	h->image_size = stp_le64(in + PI_IMAGE_SIZE);
	h->tail_offset = stp_le64(in + PI_TAIL);
	h->block_count = stp_le64(in + PI_COUNT);
	h->checksum = stp_le64(in + PI_CHECKSUM);
	h->delta_count = 0;
	if (h->version != STP_PUBINDEX_VERSION && h->version != STP_PUBINDEX_VERSION_DELTAS)
		return fail(reason, -EPROTONOSUPPORT, "unknown index version");
	if (h->hash != STP_PUBINDEX_HASH_SHA256)
		return fail(reason, -EPROTONOSUPPORT, "unknown block hash");
	if (h->version == STP_PUBINDEX_VERSION_DELTAS)
		h->delta_count = stp_le64(in + PI_DELTAS);
	if (!zeroed(in + PI_RESERVED2, STP_PUBINDEX_HDR_SIZE - PI_RESERVED2) ||
	    (h->version == STP_PUBINDEX_VERSION && !zeroed(in + PI_RESERVED, 8)))
		return fail(reason, -EUCLEAN, "index header reserved bytes not zero");
	if (h->tail_offset < STP_SB_SIZE || h->tail_offset > h->image_size)
		return fail(reason, -EUCLEAN, "tail_offset outside the image");
	return 0;
}

void stp_pubindex_encode_entry(const struct stp_pubindex_entry *e,
			       uint8_t out[STP_PUBINDEX_ENTRY_SIZE])
{
	stp_put64(out + PE_OFFSET, e->offset);
	stp_put32(out + PE_STORED, e->stored_size);
	stp_put32(out + PE_RESERVED, 0);
	memcpy(out + PE_SHA, e->sha256, STP_PUBINDEX_HASH_LEN);
}

int stp_pubindex_decode_entry(const uint8_t in[STP_PUBINDEX_ENTRY_SIZE],
			      struct stp_pubindex_entry *e)
{
	e->offset = stp_le64(in + PE_OFFSET);
	e->stored_size = stp_le32(in + PE_STORED);
	memcpy(e->sha256, in + PE_SHA, STP_PUBINDEX_HASH_LEN);
	return stp_le32(in + PE_RESERVED) ? -EUCLEAN : 0;
}

void stp_pubindex_encode_delta(const struct stp_pubindex_delta *d,
			       uint8_t out[STP_PUBINDEX_DELTA_SIZE])
{
	memset(out, 0, STP_PUBINDEX_DELTA_SIZE);
	stp_put64(out + PD_BLOCK, d->block);
	stp_put32(out + PD_SIZE, d->delta_size);
	stp_put32(out + PD_CONTENT_SIZE, d->content_size);
	out[PD_BASES] = (uint8_t)d->base_count;
	memcpy(out + PD_SHA, d->delta_sha256, STP_PUBINDEX_HASH_LEN);
	memcpy(out + PD_CONTENT_SHA, d->content_sha256, STP_PUBINDEX_HASH_LEN);
	memcpy(out + PD_BASE_SHA, d->base_sha256, sizeof(d->base_sha256));
}

int stp_pubindex_decode_delta(const uint8_t in[STP_PUBINDEX_DELTA_SIZE],
			      struct stp_pubindex_delta *d)
{
	d->block = stp_le64(in + PD_BLOCK);
	d->delta_size = stp_le32(in + PD_SIZE);
	d->content_size = stp_le32(in + PD_CONTENT_SIZE);
	d->base_count = in[PD_BASES];
	memcpy(d->delta_sha256, in + PD_SHA, STP_PUBINDEX_HASH_LEN);
	memcpy(d->content_sha256, in + PD_CONTENT_SHA, STP_PUBINDEX_HASH_LEN);
	memcpy(d->base_sha256, in + PD_BASE_SHA, sizeof(d->base_sha256));
	if (!zeroed(in + PD_RESERVED, PD_SHA - PD_RESERVED) ||
	    !zeroed(in + PD_RESERVED2, STP_PUBINDEX_DELTA_SIZE - PD_RESERVED2))
		return -EUCLEAN;
	if (d->base_count < 1 || d->base_count > STP_PUBINDEX_BASES_MAX || !d->delta_size ||
	    !d->content_size)
		return -EUCLEAN;
	if (d->base_count == 1 && !zeroed(d->base_sha256[1], STP_PUBINDEX_HASH_LEN))
		return -EUCLEAN;
	return 0;
}

uint64_t stp_pubindex_checksum(const uint8_t hdr[STP_PUBINDEX_HDR_SIZE], const uint8_t *entries,
			       uint64_t count)
{
	XXH3_state_t st;

	XXH3_INITSTATE(&st);
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, hdr, PI_CHECKSUM);
	XXH3_64bits_update(&st, entries, (size_t)(count * STP_PUBINDEX_ENTRY_SIZE));
	return XXH3_64bits_digest(&st);
}

uint64_t stp_pubindex_checksum2(const uint8_t hdr[STP_PUBINDEX_HDR_SIZE], const uint8_t *entries,
				uint64_t count, const uint8_t *deltas, uint64_t ndeltas)
{
	XXH3_state_t st;

	XXH3_INITSTATE(&st);
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, hdr, PI_CHECKSUM);
	XXH3_64bits_update(&st, hdr + PI_DELTAS, STP_PUBINDEX_HDR_SIZE - PI_DELTAS);
	XXH3_64bits_update(&st, entries, (size_t)(count * STP_PUBINDEX_ENTRY_SIZE));
	XXH3_64bits_update(&st, deltas, (size_t)(ndeltas * STP_PUBINDEX_DELTA_SIZE));
	return XXH3_64bits_digest(&st);
}

int stp_pubindex_delta_at(const uint8_t *idx, const struct stp_pubindex_header *h, uint64_t i,
			  struct stp_pubindex_delta *d)
{
	return stp_pubindex_decode_delta(idx + stp_pubindex_delta_offset(h) +
					 i * STP_PUBINDEX_DELTA_SIZE, d);
}

int stp_pubindex_entry_at(const uint8_t *idx, uint64_t i, struct stp_pubindex_entry *e)
{
	return stp_pubindex_decode_entry(idx + STP_PUBINDEX_HDR_SIZE + i * STP_PUBINDEX_ENTRY_SIZE, e);
}

/* The length an index of header H must have, or 0 when its entries or its tail cannot
 * fit in LEN bytes (so that no untrusted count is multiplied, nor a sum wraps). */
static uint64_t index_length(const struct stp_pubindex_header *h, size_t len)
{
	uint64_t fixed = STP_PUBINDEX_HDR_SIZE + STP_SB_SIZE;

	uint64_t tail_at;

	if (len < fixed || h->block_count > (len - fixed) / STP_PUBINDEX_ENTRY_SIZE)
		return 0;
	tail_at = stp_pubindex_tail_file_offset(h->block_count);
	if (h->image_size - h->tail_offset > len - tail_at)
		return 0;
	tail_at += h->image_size - h->tail_offset;
	if (h->delta_count > (len - tail_at) / STP_PUBINDEX_DELTA_SIZE)
		return 0;
	return tail_at + h->delta_count * STP_PUBINDEX_DELTA_SIZE;
}

/* The entries lie contiguous from 256 to tail_offset, each within its bound. */
static const char *check_entries(const uint8_t *idx, const struct stp_pubindex_header *h,
				 const struct stp_superblock *sb)
{
	uint64_t end = STP_SB_SIZE;

	for (uint64_t i = 0; i < h->block_count; i++) {
		struct stp_pubindex_entry e;

		if (stp_pubindex_entry_at(idx, i, &e))
			return "block entry reserved bytes not zero";
		if (e.offset != end)
			return "block entries not contiguous from 256";
		if (!e.stored_size || e.stored_size > stp_block_stored_max(stp_sb_block_len(sb, i)))
			return "block stored_size out of bounds";
		end += e.stored_size;
		if (end > h->tail_offset)
			return "block entries run past tail_offset";
	}
	return end == h->tail_offset ? NULL : "block entries do not end at tail_offset";
}

/* The delta entries name blocks in ascending order, once each, with their sizes. */
static const char *check_deltas(const uint8_t *idx, const struct stp_pubindex_header *h,
				const struct stp_superblock *sb)
{
	uint64_t next = 0; /* the least block the next entry may name */

	for (uint64_t i = 0; i < h->delta_count; i++) {
		struct stp_pubindex_delta d;
		uint64_t len;

		if (stp_pubindex_delta_at(idx, h, i, &d))
			return "delta entry reserved bytes, base count or sizes wrong";
		if (d.block >= h->block_count)
			return "delta entry for a block past block_count";
		if (d.block < next)
			return "delta entries not in ascending block order";
		len = stp_sb_block_len(sb, d.block);
		if (d.content_size != len)
			return "delta content_size is not its block's decoded size";
		if (d.delta_size > stp_block_stored_max(len))
			return "delta_size out of bounds";
		next = d.block + 1;
	}
	return NULL;
}

/* The checksum the header's version calls for. */
static uint64_t index_checksum(const uint8_t *idx, const struct stp_pubindex_header *h)
{
	const uint8_t *entries = idx + STP_PUBINDEX_HDR_SIZE;

	if (h->version == STP_PUBINDEX_VERSION)
		return stp_pubindex_checksum(idx, entries, h->block_count);
	return stp_pubindex_checksum2(idx, entries, h->block_count,
				      idx + stp_pubindex_delta_offset(h), h->delta_count);
}

int stp_pubindex_check(const uint8_t *idx, size_t len, struct stp_pubindex_header *hp,
		       struct stp_superblock *sbp, const char **reason)
{
	struct stp_pubindex_header h;
	struct stp_superblock sb;
	uint64_t bad_feature;
	const char *why;
	int rc;

	if (len < STP_PUBINDEX_HDR_SIZE)
		return fail(reason, -EUCLEAN, "index shorter than its header");
	rc = stp_pubindex_decode_header(idx, &h, reason);
	if (rc)
		return rc;
	if (index_length(&h, len) != len)
		return fail(reason, -EUCLEAN, "index length does not match its header");
	if (index_checksum(idx, &h) != h.checksum)
		return fail(reason, -EUCLEAN, "index checksum mismatch");
	rc = stp_sb_decode_reason(idx + stp_pubindex_sb_offset(h.block_count), &sb, &bad_feature,
				  &why);
	if (rc == -EPROTONOSUPPORT)
		return fail(reason, rc, "superblock: unsupported format version or feature");
	if (rc)
		return fail(reason, rc, why);
	if (sb.block_count != h.block_count)
		return fail(reason, -EUCLEAN, "block_count differs from the superblock's");
	if (sb.image_size != h.image_size)
		return fail(reason, -EUCLEAN, "image_size differs from the superblock's");
	if ((why = check_entries(idx, &h, &sb)) || (why = check_deltas(idx, &h, &sb)))
		return fail(reason, -EUCLEAN, why);
	if (hp)
		*hp = h;
	if (sbp)
		*sbp = sb;
	return 0;
}

char *stp_pubindex_block_name(const uint8_t sha[STP_PUBINDEX_HASH_LEN],
			      char out[STP_PUBINDEX_NAME_MAX])
{
	static const char hex[] = "0123456789abcdef";
	char *name = out + 3; /* after "HH/", the fan-out directory as git objects have */

	for (unsigned i = 0; i < STP_PUBINDEX_HASH_LEN; i++) {
		name[2 * i] = hex[sha[i] >> 4];
		name[2 * i + 1] = hex[sha[i] & 15];
	}
	name[2 * STP_PUBINDEX_HASH_LEN] = '\0';
	out[0] = name[0];
	out[1] = name[1];
	out[2] = '/';
	return out;
}
