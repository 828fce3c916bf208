/* SPDX-License-Identifier: MIT */
/*
 * Golden vectors for the published index (common/pubindex.h, stipple(5) PUBLISHED INDEX).
 * The expected header and entry bytes are written by hand from the field tables, never
 * from the encoder; the checksum is computed here with xxhash over the bytes the table
 * says it covers. Then stp_pubindex_check is fed an index that breaks each of its rules
 * in turn, and must refuse every one, with the result the rule calls for.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "format.h"
#include "pubindex.h"

#include "check.h"
#include "golden.h"

/* The golden index: an image of two blocks of 64 KiB (block_log 16, 100000 data bytes:
 * 65536 + 34464 decoded), stored in 1000 and 2000 bytes from 256, so tail_offset 3256;
 * the tail is 160 bytes of raw metadata, so image_size 3416.
 *
 * Header: magic 0 (8) "STPINDX1", version 8 (4) = 1, hash 12 (4) = 1, image_size 16 (8),
 * tail_offset 24 (8), block_count 32 (8), checksum 40 (8), reserved 48..63 zero. */
static const uint8_t golden_hdr[STP_PUBINDEX_HDR_SIZE] = {
	'S', 'T', 'P', 'I', 'N', 'D', 'X', '1',
	[8] = 0x01, 0x00, 0x00, 0x00,
	[12] = 0x01, 0x00, 0x00, 0x00,
	[16] = 0x58, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[24] = 0xb8, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[32] = 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	/* 40..47: the checksum, computed by seal() */
};

/* Entry: offset 0 (8), stored_size 8 (4), reserved 12 (4) zero, SHA-256 16 (32). The
 * hashes are 00 01 .. 1f and 10 11 .. 2f. */
static const uint8_t golden_ent[2][STP_PUBINDEX_ENTRY_SIZE] = {
	{ 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe8, 0x03, 0x00, 0x00,
	  0x00, 0x00, 0x00, 0x00,
	  0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
	  0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19,
	  0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f },
	{ 0xe8, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x07, 0x00, 0x00,
	  0x00, 0x00, 0x00, 0x00,
	  0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c,
	  0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
	  0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f },
};

#define GOLD_IMAGE_SIZE 3416u
#define GOLD_TAIL 3256u
#define GOLD_TAIL_LEN 160u
#define GOLD_LEN (64u + 2 * 48u + 256u + GOLD_TAIL_LEN)

/* The superblock of the golden image; stp_sb_encode is pinned by test_format. */
static void golden_sb(struct stp_superblock *sb, uint64_t tail, uint64_t feat_incompat)
{
	memset(sb, 0, sizeof(*sb));
	sb->version = STP_FORMAT_VERSION;
	sb->feat_incompat = feat_incompat;
	sb->block_log = 16;
	sb->data_size = 100000;
	sb->block_count = 2;
	sb->meta_offset = tail;
	sb->meta_stored_size = sb->meta_size = GOLD_TAIL_LEN;
	sb->meta_codec = STP_CODEC_RAW;
	sb->image_size = tail + GOLD_TAIL_LEN;
	sb->inode_count = 1;
}

/* Writes the index checksum (XXH3-64 of bytes 0..39, then the N entries) into IDX. */
static void seal(uint8_t *idx, unsigned n)
{
	uint8_t cover[40 + 8 * STP_PUBINDEX_ENTRY_SIZE];

	memcpy(cover, idx, 40);
	memcpy(cover + 40, idx + 64, n * STP_PUBINDEX_ENTRY_SIZE);
	put_le(idx, 40, XXH3_64bits(cover, 40 + n * STP_PUBINDEX_ENTRY_SIZE), 8);
}

/* An index of the golden image's superblock whose N entries store SIZES bytes each,
 * contiguous from 256, with the header and the superblock stating what they imply:
 * written from the field tables with put_le. Returns its length. */
static size_t build(uint8_t *idx, const uint32_t *sizes, unsigned n, uint64_t feat_incompat)
{
	struct stp_superblock sb;
	uint64_t off = 256;
	size_t at = 64;

	memset(idx, 0, 64);
	memcpy(idx, "STPINDX1", 8);
	put_le(idx, 8, 1, 4);
	put_le(idx, 12, 1, 4);
	for (unsigned i = 0; i < n; i++, at += 48) {
		memset(idx + at, 0, 48);
		put_le(idx, at, off, 8);
		put_le(idx, at + 8, sizes[i], 4);
		for (unsigned j = 0; j < 32; j++)
			idx[at + 16 + j] = (uint8_t)(0x10 * i + j);
		off += sizes[i];
	}
	put_le(idx, 16, off + GOLD_TAIL_LEN, 8);
	put_le(idx, 24, off, 8);
	put_le(idx, 32, n, 8);
	golden_sb(&sb, off, feat_incompat);
	stp_sb_encode(&sb, idx + at);
	at += 256;
	for (unsigned i = 0; i < GOLD_TAIL_LEN; i++)
		idx[at + i] = (uint8_t)(i * 3);
	seal(idx, n);
	return at + GOLD_TAIL_LEN;
}

static const uint32_t gold_sizes[2] = { 1000, 2000 };

static void test_golden_layout(void)
{
	uint8_t idx[4096], hdr[64];
	size_t len = build(idx, gold_sizes, 2, 0);

	CHECK_EQ(len, GOLD_LEN);
	memcpy(hdr, golden_hdr, 64);
	memcpy(hdr + 40, idx + 40, 8); /* the checksum seal() computed */
	check_bytes("header", idx, hdr, 64);
	check_bytes("entry 0", idx + 64, golden_ent[0], 48);
	check_bytes("entry 1", idx + 112, golden_ent[1], 48);
	CHECK_EQ(stp_pubindex_sb_offset(2), 160);
	CHECK_EQ(stp_pubindex_tail_file_offset(2), 416);
}

static void test_header_codec(void)
{
	struct stp_pubindex_header h = { .version = 1, .hash = 1, .image_size = GOLD_IMAGE_SIZE,
					 .tail_offset = GOLD_TAIL, .block_count = 2,
					 .checksum = 0x0123456789abcdefull };
	uint8_t want[64], got[64];
	struct stp_pubindex_header d;
	const char *why = NULL;

	memcpy(want, golden_hdr, 64);
	put_le(want, 40, h.checksum, 8);
	memset(got, 0xaa, sizeof(got));
	stp_pubindex_encode_header(&h, got);
	check_bytes("encoded header", got, want, 64);
	memset(&d, 0x5a, sizeof(d));
	CHECK_EQ(stp_pubindex_decode_header(want, &d, &why), 0);
	CHECK_EQ(d.version, 1);
	CHECK_EQ(d.hash, 1);
	CHECK_EQ(d.image_size, GOLD_IMAGE_SIZE);
	CHECK_EQ(d.tail_offset, GOLD_TAIL);
	CHECK_EQ(d.block_count, 2);
	CHECK_EQ(d.checksum, 0x0123456789abcdefull);
}

static void test_entry_codec(void)
{
	struct stp_pubindex_entry e = { .offset = 0x4e8, .stored_size = 2000 }, d;
	uint8_t got[48], bad[48];

	for (unsigned j = 0; j < 32; j++)
		e.sha256[j] = (uint8_t)(0x10 + j);
	memset(got, 0xaa, sizeof(got));
	stp_pubindex_encode_entry(&e, got);
	check_bytes("encoded entry", got, golden_ent[1], 48);
	CHECK_EQ(stp_pubindex_decode_entry(golden_ent[1], &d), 0);
	CHECK_EQ(d.offset, 0x4e8);
	CHECK_EQ(d.stored_size, 2000);
	CHECK(!memcmp(d.sha256, e.sha256, 32));
	memcpy(bad, golden_ent[1], 48);
	bad[15] = 1;
	CHECK_EQ(stp_pubindex_decode_entry(bad, &d), -EUCLEAN);
}

static void test_block_name(void)
{
	/* SHA-256("abc"), FIPS 180-2's example */
	static const uint8_t abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d,
		0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10,
		0xff, 0x61, 0xf2, 0x00, 0x15, 0xad };
	char name[STP_PUBINDEX_NAME_MAX];

	memset(name, 'x', sizeof(name));
	CHECK(stp_pubindex_block_name(abc, name) == name);
	CHECK(!strcmp(name, "ba/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	      "%s", name);
	CHECK_EQ(strlen(name) + 1, STP_PUBINDEX_NAME_MAX);
}

static void test_check_accepts(void)
{
	uint8_t idx[4096];
	size_t len = build(idx, gold_sizes, 2, 0);
	struct stp_pubindex_header h;
	struct stp_superblock sb;
	struct stp_pubindex_entry e;
	const char *why = NULL;

	CHECK_EQ(stp_pubindex_check(idx, len, &h, &sb, &why), 0);
	if (why)
		fprintf(stderr, "refused: %s\n", why);
	CHECK_EQ(h.block_count, 2);
	CHECK_EQ(h.tail_offset, GOLD_TAIL);
	CHECK_EQ(sb.image_size, GOLD_IMAGE_SIZE);
	CHECK_EQ(stp_pubindex_entry_at(idx, 1, &e), 0);
	CHECK_EQ(e.offset, 1256);
	CHECK_EQ(e.stored_size, 2000);
	/* the largest stored size the bound allows: 65536 + 256 + 64, and a raw last block */
	CHECK_EQ(stp_pubindex_check(idx, build(idx, (uint32_t[]){ 65856, 34464 }, 2, 0),
				    NULL, NULL, NULL), 0);
}

/* The result of checking IDX (LEN bytes), with the reason printed for the log. */
static int check_idx(const uint8_t *idx, size_t len, const char *what)
{
	const char *why = "(none)";
	int rc = stp_pubindex_check(idx, len, NULL, NULL, &why);

	fprintf(stderr, "%s: %d, %s\n", what, rc, rc ? why : "accepted");
	return rc;
}

/* The golden index with LEN bytes at OFF set to V, resealed when RESEAL. */
static int check_changed(size_t off, uint64_t v, size_t len, int reseal, const char *what)
{
	uint8_t idx[4096];
	size_t n = build(idx, gold_sizes, 2, 0);

	put_le(idx, off, v, len);
	if (reseal)
		seal(idx, 2);
	return check_idx(idx, n, what);
}

static void test_check_rejects_header(void)
{
	uint8_t idx[4096];
	size_t len = build(idx, gold_sizes, 2, 0);

	CHECK_EQ(check_idx(idx, 63, "shorter than a header"), -EUCLEAN);
	CHECK_EQ(check_changed(0, 'X', 1, 1, "magic"), -EUCLEAN);
	CHECK_EQ(check_changed(8, 3, 4, 1, "version"), -EPROTONOSUPPORT);
	CHECK_EQ(check_changed(12, 2, 4, 1, "hash"), -EPROTONOSUPPORT);
	CHECK_EQ(check_changed(48, 1, 1, 1, "reserved 48"), -EUCLEAN);
	CHECK_EQ(check_changed(63, 0x80, 1, 1, "reserved 63"), -EUCLEAN);
	CHECK_EQ(check_changed(24, 255, 8, 1, "tail_offset below 256"), -EUCLEAN);
	CHECK_EQ(check_changed(24, GOLD_IMAGE_SIZE + 1, 8, 1, "tail_offset past image_size"),
		 -EUCLEAN);
	/* the checksum covers the header's first 40 bytes and the entries */
	CHECK_EQ(check_changed(16, GOLD_IMAGE_SIZE, 8, 0, "unchanged, not resealed"), 0);
	CHECK_EQ(check_changed(41, 0, 1, 0, "checksum itself"), -EUCLEAN);
	CHECK_EQ(check_changed(64 + 20, 0xff, 1, 0, "entry hash under the checksum"), -EUCLEAN);
	CHECK_EQ(check_changed(112 + 47, 0xff, 1, 0, "last entry byte under it"), -EUCLEAN);
	/* the tail and the superblock copy are not under it (the superblock has its own) */
	CHECK_EQ(check_changed(GOLD_LEN - 1, 0xff, 1, 0, "tail byte"), 0);
	(void)len;
}

static void test_check_rejects_length(void)
{
	uint8_t idx[4096];
	size_t len = build(idx, gold_sizes, 2, 0);

	CHECK_EQ(check_idx(idx, len - 1, "one byte short"), -EUCLEAN);
	CHECK_EQ(check_idx(idx, len + 1, "one byte over"), -EUCLEAN);
	/* a count the file cannot hold: refused from the length, before any entry is read */
	CHECK_EQ(check_changed(32, 1ull << 60, 8, 1, "count 2^60"), -EUCLEAN);
	CHECK_EQ(check_changed(32, UINT64_MAX, 8, 1, "count 2^64-1"), -EUCLEAN);
	CHECK_EQ(check_changed(32, 3, 8, 1, "count 3"), -EUCLEAN);
	/* the tail's length comes from image_size - tail_offset */
	CHECK_EQ(check_changed(16, GOLD_IMAGE_SIZE + 1, 8, 1, "image_size + 1"), -EUCLEAN);
	CHECK_EQ(check_changed(16, UINT64_MAX, 8, 1, "image_size 2^64-1"), -EUCLEAN);
}

static void test_check_rejects_entries(void)
{
	uint8_t idx[4096];
	size_t len;

	CHECK_EQ(check_changed(64 + 12, 1, 1, 1, "entry reserved"), -EUCLEAN);
	CHECK_EQ(check_changed(64, 257, 8, 1, "first entry not at 256"), -EUCLEAN);
	CHECK_EQ(check_changed(112, 1257, 8, 1, "gap between entries"), -EUCLEAN);
	CHECK_EQ(check_changed(112, 1255, 8, 1, "overlapping entries"), -EUCLEAN);
	CHECK_EQ(check_changed(112 + 8, 1999, 4, 1, "entries end before tail_offset"), -EUCLEAN);
	CHECK_EQ(check_changed(112 + 8, 2001, 4, 1, "entries run past tail_offset"), -EUCLEAN);
	/* stored_size: not 0, at most 65536 + 256 + 64 for a full block, 34464 + 134 + 64
	 * for the last */
	len = build(idx, (uint32_t[]){ 65857, 2000 }, 2, 0);
	CHECK_EQ(check_idx(idx, len, "block 0 over its bound"), -EUCLEAN);
	len = build(idx, (uint32_t[]){ 1000, 34663 }, 2, 0);
	CHECK_EQ(check_idx(idx, len, "block 1 over its bound"), -EUCLEAN);
	len = build(idx, (uint32_t[]){ 1000, 34662 }, 2, 0);
	CHECK_EQ(check_idx(idx, len, "block 1 at its bound"), 0);
	len = build(idx, (uint32_t[]){ 0, 2000 }, 2, 0);
	CHECK_EQ(check_idx(idx, len, "empty block"), -EUCLEAN);
}

static void test_check_rejects_superblock(void)
{
	uint8_t idx[4096];
	size_t len;

	/* N differs from the superblock's block_count (2) */
	len = build(idx, gold_sizes, 1, 0);
	CHECK_EQ(check_idx(idx, len, "one entry for two blocks"), -EUCLEAN);
	len = build(idx, (uint32_t[]){ 1000, 2000, 3000 }, 3, 0);
	CHECK_EQ(check_idx(idx, len, "three entries for two blocks"), -EUCLEAN);
	/* a damaged superblock copy (its own checksum), an unknown feature in it */
	CHECK_EQ(check_changed(160 + 48, 0x77, 1, 1, "superblock byte"), -EUCLEAN);
	len = build(idx, gold_sizes, 2, 1ull << 40);
	CHECK_EQ(check_idx(idx, len, "unknown superblock feature"), -EPROTONOSUPPORT);
	/* image_size differs from the superblock's: the tail and length agree with the header */
	len = build(idx, gold_sizes, 2, 0);
	put_le(idx, 16, GOLD_IMAGE_SIZE - 1, 8);
	seal(idx, 2);
	CHECK_EQ(check_idx(idx, len - 1, "image_size not the superblock's"), -EUCLEAN);
}

/* Delta entry (version 2): block 0 (8), delta_size 8 (4), content_size 12 (4),
 * base_count 16 (1), reserved 17..23, delta SHA-256 24 (32), content SHA-256 56 (32),
 * base SHA-256s 88 (32) and 120 (32), reserved 152..159. Block 1 of the golden image
 * (34464 bytes), a delta of 500 bytes on two bases; the hashes are 40.., 60.., 80..,
 * a0... */
static const uint8_t golden_delta[STP_PUBINDEX_DELTA_SIZE] = {
	0x01, 0, 0, 0, 0, 0, 0, 0,
	[8] = 0xf4, 0x01, 0x00, 0x00,
	[12] = 0xa0, 0x86, 0x00, 0x00,
	[16] = 0x02,
	[24] = 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b, 0x4c,
	0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a,
	0x5b, 0x5c, 0x5d, 0x5e, 0x5f,
	[56] = 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c,
	0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a,
	0x7b, 0x7c, 0x7d, 0x7e, 0x7f,
	[88] = 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c,
	0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a,
	0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
	[120] = 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac,
	0xad, 0xae, 0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba,
	0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
};

/* Version 2's checksum: XXH3-64 of header bytes 0..39 and 48..63, the two entries, then
 * the N delta entries at the end of IDX (LEN bytes). */
static void seal2(uint8_t *idx, size_t len, unsigned n)
{
	uint8_t cover[56 + 2 * 48 + 4 * STP_PUBINDEX_DELTA_SIZE];
	size_t table = n * STP_PUBINDEX_DELTA_SIZE;

	memcpy(cover, idx, 40);
	memcpy(cover + 40, idx + 48, 16);
	memcpy(cover + 56, idx + 64, 2 * 48);
	memcpy(cover + 56 + 96, idx + len - table, table);
	put_le(idx, 40, XXH3_64bits(cover, 56 + 96 + table), 8);
}

/* The golden index as version 2 with the N delta entries at DELTAS after its tail. */
static size_t build2(uint8_t *idx, const uint8_t (*deltas)[STP_PUBINDEX_DELTA_SIZE],
		     unsigned n)
{
	size_t len = build(idx, gold_sizes, 2, 0);

	put_le(idx, 8, 2, 4);
	put_le(idx, 48, n, 8);
	for (unsigned i = 0; i < n; i++, len += STP_PUBINDEX_DELTA_SIZE)
		memcpy(idx + len, deltas[i], STP_PUBINDEX_DELTA_SIZE);
	seal2(idx, len, n);
	return len;
}

static void test_delta_codec(void)
{
	struct stp_pubindex_delta d = { .block = 1, .delta_size = 500, .content_size = 34464,
					.base_count = 2 }, got;
	uint8_t out[STP_PUBINDEX_DELTA_SIZE], bad[STP_PUBINDEX_DELTA_SIZE];

	for (unsigned j = 0; j < 32; j++) {
		d.delta_sha256[j] = (uint8_t)(0x40 + j);
		d.content_sha256[j] = (uint8_t)(0x60 + j);
		d.base_sha256[0][j] = (uint8_t)(0x80 + j);
		d.base_sha256[1][j] = (uint8_t)(0xa0 + j);
	}
	memset(out, 0xaa, sizeof(out));
	stp_pubindex_encode_delta(&d, out);
	check_bytes("encoded delta", out, golden_delta, sizeof(out));
	CHECK_EQ(stp_pubindex_decode_delta(golden_delta, &got), 0);
	CHECK(!memcmp(&got, &d, sizeof(d)));
	/* each rule of the entry alone */
	static const struct { size_t off; uint8_t v; const char *what; } rules[] = {
		{ 17, 1, "reserved 17" }, { 23, 1, "reserved 23" }, { 152, 1, "reserved 152" },
		{ 159, 1, "reserved 159" }, { 16, 0, "no base" }, { 16, 3, "three bases" },
		{ 16, 1, "one base, a second hash" },
	};
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		memcpy(bad, golden_delta, sizeof(bad));
		bad[rules[i].off] = rules[i].v;
		CHECK(stp_pubindex_decode_delta(bad, &got) == -EUCLEAN, "%s", rules[i].what);
	}
	memcpy(bad, golden_delta, sizeof(bad));
	memset(bad + 8, 0, 4);
	CHECK(stp_pubindex_decode_delta(bad, &got) == -EUCLEAN, "delta_size 0");
	memcpy(bad, golden_delta, sizeof(bad));
	bad[16] = 1;
	memset(bad + 120, 0, 32);
	CHECK(stp_pubindex_decode_delta(bad, &got) == 0, "one base");
	CHECK_EQ(got.base_count, 1);
}

static void test_check_deltas(void)
{
	uint8_t idx[4096], two[2][STP_PUBINDEX_DELTA_SIZE];
	struct stp_pubindex_header h;
	struct stp_pubindex_delta d;
	size_t len = build2(idx, &golden_delta, 1);

	CHECK_EQ(len, GOLD_LEN + 160);
	CHECK_EQ(check_idx(idx, len, "version 2, one delta"), 0);
	CHECK_EQ(stp_pubindex_check(idx, len, &h, NULL, NULL), 0);
	CHECK_EQ(h.version, 2);
	CHECK_EQ(h.delta_count, 1);
	CHECK_EQ(stp_pubindex_delta_offset(&h), GOLD_LEN);
	CHECK_EQ(stp_pubindex_delta_at(idx, &h, 0, &d), 0);
	CHECK_EQ(d.block, 1);
	CHECK_EQ(check_idx(idx, build2(idx, NULL, 0), "version 2, no delta"), 0);
	/* the checksum covers bytes 48..63 and the table; the length counts the table */
	len = build2(idx, &golden_delta, 1);
	idx[len - 100] ^= 1;
	CHECK_EQ(check_idx(idx, len, "delta byte under the checksum"), -EUCLEAN);
	len = build2(idx, &golden_delta, 1);
	CHECK_EQ(check_idx(idx, len - 1, "delta table one byte short"), -EUCLEAN);
	put_le(idx, 48, 1ull << 60, 8);
	seal2(idx, len, 1);
	CHECK_EQ(check_idx(idx, len, "delta_count 2^60"), -EUCLEAN);
	len = build2(idx, &golden_delta, 1);
	put_le(idx, 56, 1, 1);
	seal2(idx, len, 1);
	CHECK_EQ(check_idx(idx, len, "version 2 reserved 56"), -EUCLEAN);
	/* the entry against the image: its block, its order, its sizes */
	memcpy(two[0], golden_delta, 160);
	put_le(two[0], 0, 2, 8);
	CHECK_EQ(check_idx(idx, build2(idx, two, 1), "block past the count"), -EUCLEAN);
	memcpy(two[1], golden_delta, 160);
	memcpy(two[0], golden_delta, 160);
	CHECK_EQ(check_idx(idx, build2(idx, two, 2), "one block twice"), -EUCLEAN);
	put_le(two[0], 0, 0, 8);
	put_le(two[0], 12, 65536, 4);
	CHECK_EQ(check_idx(idx, build2(idx, two, 2), "blocks 0 and 1"), 0);
	CHECK_EQ(check_idx(idx, build2(idx, (const uint8_t (*)[160])two[1], 1), "block 1"), 0);
	memcpy(two[1], two[0], 160);
	memcpy(two[0], golden_delta, 160);
	CHECK_EQ(check_idx(idx, build2(idx, two, 2), "blocks 1 then 0"), -EUCLEAN);
	memcpy(two[0], golden_delta, 160);
	put_le(two[0], 12, 34465, 4);
	CHECK_EQ(check_idx(idx, build2(idx, two, 1), "content_size not the block's"), -EUCLEAN);
	memcpy(two[0], golden_delta, 160);
	put_le(two[0], 8, 34464 + 134 + 65, 4);
	CHECK_EQ(check_idx(idx, build2(idx, two, 1), "delta_size over the bound"), -EUCLEAN);
	put_le(two[0], 8, 34464 + 134 + 64, 4);
	CHECK_EQ(check_idx(idx, build2(idx, two, 1), "delta_size at the bound"), 0);
}

int main(void)
{
	RUN(test_golden_layout);
	RUN(test_header_codec);
	RUN(test_entry_codec);
	RUN(test_block_name);
	RUN(test_check_accepts);
	RUN(test_check_rejects_header);
	RUN(test_check_rejects_length);
	RUN(test_check_rejects_entries);
	RUN(test_check_rejects_superblock);
	RUN(test_delta_codec);
	RUN(test_check_deltas);
	return tap_done();
}
