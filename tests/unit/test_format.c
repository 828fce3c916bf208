/* SPDX-License-Identifier: MIT */
/*
 * Golden byte vectors for the on-disk records of common/format.h. Each expected image of
 * a record is written by hand from the field tables (offset, size, little-endian), never
 * from the encoder's output, so a change to the format fails here until the tables in
 * man/stipple.5, format.c and this file agree again. Then every decoder is fed the
 * bytes back, and the superblock decoder is fed damaged and unsupported variants.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "format.h"
#include "image.h"
#include "log.h"

#include "check.h"
#include "golden.h"

static void test_checksum(void)
{
	/* XXH3-64 with seed 0: published reference values. */
	CHECK_EQ(stp_checksum("", 0), 0x2d06800538d394c2ull);
	CHECK_EQ(stp_checksum("abc", 3), 0x78af5f94892f3950ull);
}

/* Superblock: every field with distinct bytes so that a swapped or shifted field shows. */
static const struct stp_superblock golden_sb = {
	.version = 1,
	.feat_compat = 0x8000000000000002ull, /* compat bits: unknown ones are fine */
	.feat_ro_compat = 0,
	.feat_incompat = STP_FEAT_INCOMPAT_DICT | STP_FEAT_INCOMPAT_BCJ_X86,
	.block_log = 20,
	.data_size = 0x123456789ull,
	.block_count = 0x1235, /* ceil(0x123456789 / 1 MiB) */
	.hot_size = 0xabcdef,
	.meta_offset = 0x1122334455ull,
	.meta_stored_size = 0x10203,
	.meta_size = 0x30405060, /* room for 0xc0ffee inodes, less than 1 GiB */
	.meta_checksum = 0xfedcba9876543210ull,
	.meta_codec = STP_CODEC_ZSTD,
	.dict_offset = 0x100,
	.dict_size = 0x7070,
	.dict_checksum = 0x0123456789abcdefull,
	.image_size = 0x20000000000ull,
	.inode_count = 0xc0ffee,
};

/* Offsets: magic 0 (8), version 8 (4), superblock size 12 (4), feat_compat 16 (8),
 * feat_ro_compat 24 (8), feat_incompat 32 (8), block_log 40 (4), hot_block_log 44 (4),
 * data_size 48 (8), block_count 56 (8), hot_size 64 (8), meta_offset 72 (8),
 * meta_stored_size 80 (8), meta_size 88 (8), meta_checksum 96 (8), meta_codec 104 (4),
 * reserved 108 (4), dict_offset 112 (8), dict_size 120 (8), dict_checksum 128 (8),
 * image_size 136 (8), inode_count 144 (4), sig_offset 148 (8), sig_size 156 (8),
 * reserved 164..247 zero,
 * checksum 248 (8) = XXH3-64 of bytes 0..247. */
static const uint8_t golden_sb_bytes[STP_SB_SIZE] = {
	'S', 'T', 'I', 'P', 'P', 'L', 'E', 0,
	[8] = 0x01, 0x00, 0x00, 0x00,
	[12] = 0x00, 0x01, 0x00, 0x00,
	[16] = 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
	[24] = 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[32] = 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[40] = 0x14, 0x00, 0x00, 0x00,
	[44] = 0x00, 0x00, 0x00, 0x00,
	[48] = 0x89, 0x67, 0x45, 0x23, 0x01, 0x00, 0x00, 0x00,
	[56] = 0x35, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[64] = 0xef, 0xcd, 0xab, 0x00, 0x00, 0x00, 0x00, 0x00,
	[72] = 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x00, 0x00,
	[80] = 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
	[88] = 0x60, 0x50, 0x40, 0x30, 0x00, 0x00, 0x00, 0x00,
	[96] = 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
	[104] = 0x01, 0x00, 0x00, 0x00,
	[112] = 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[120] = 0x70, 0x70, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[128] = 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,
	[136] = 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
	[144] = 0xee, 0xff, 0xc0, 0x00,
	/* 248..255: the checksum, filled in by seal() */
};

#define SB_CHECKSUM_OFF 248u

static void seal(uint8_t sb[STP_SB_SIZE])
{
	put_le(sb, SB_CHECKSUM_OFF, XXH3_64bits(sb, SB_CHECKSUM_OFF), 8);
}

static void golden_sb_sealed(uint8_t out[STP_SB_SIZE])
{
	memcpy(out, golden_sb_bytes, STP_SB_SIZE);
	seal(out);
}

static void test_sb_encode(void)
{
	uint8_t want[STP_SB_SIZE], got[STP_SB_SIZE];

	golden_sb_sealed(want);
	memset(got, 0xaa, sizeof(got));
	stp_sb_encode(&golden_sb, got);
	check_bytes("superblock", got, want, STP_SB_SIZE);
}

static void test_sb_decode(void)
{
	uint8_t in[STP_SB_SIZE];
	struct stp_superblock sb;
	uint64_t bad = 99;

	golden_sb_sealed(in);
	memset(&sb, 0x5a, sizeof(sb));
	CHECK_EQ(stp_sb_decode(in, &sb, &bad), 0);
	CHECK_EQ(bad, 0);
	CHECK_EQ(sb.version, golden_sb.version);
	CHECK_EQ(sb.feat_compat, golden_sb.feat_compat);
	CHECK_EQ(sb.feat_ro_compat, golden_sb.feat_ro_compat);
	CHECK_EQ(sb.feat_incompat, golden_sb.feat_incompat);
	CHECK_EQ(sb.block_log, golden_sb.block_log);
	CHECK_EQ(sb.data_size, golden_sb.data_size);
	CHECK_EQ(sb.block_count, golden_sb.block_count);
	CHECK_EQ(sb.hot_size, golden_sb.hot_size);
	CHECK_EQ(sb.meta_offset, golden_sb.meta_offset);
	CHECK_EQ(sb.meta_stored_size, golden_sb.meta_stored_size);
	CHECK_EQ(sb.meta_size, golden_sb.meta_size);
	CHECK_EQ(sb.meta_checksum, golden_sb.meta_checksum);
	CHECK_EQ(sb.meta_codec, golden_sb.meta_codec);
	CHECK_EQ(sb.dict_offset, golden_sb.dict_offset);
	CHECK_EQ(sb.dict_size, golden_sb.dict_size);
	CHECK_EQ(sb.dict_checksum, golden_sb.dict_checksum);
	CHECK_EQ(sb.image_size, golden_sb.image_size);
	CHECK_EQ(sb.inode_count, golden_sb.inode_count);
}

/* Decodes IN after changing LEN bytes at OFF to V (and re-sealing when RESEAL):
 * returns the decoder's result, *bad the feature it reported. */
static int decode_changed(size_t off, uint64_t v, size_t len, int reseal, uint64_t *bad)
{
	uint8_t in[STP_SB_SIZE];
	struct stp_superblock sb;

	golden_sb_sealed(in);
	put_le(in, off, v, len);
	if (reseal)
		seal(in);
	return stp_sb_decode(in, &sb, bad);
}

static void test_sb_rejects(void)
{
	uint64_t bad;

	/* Damage. */
	CHECK_EQ(decode_changed(0, 'X', 1, 1, &bad), -EUCLEAN);          /* magic */
	CHECK_EQ(decode_changed(7, 1, 1, 1, &bad), -EUCLEAN);            /* magic's NUL */
	CHECK_EQ(decode_changed(48, 0x8a, 1, 0, &bad), -EUCLEAN);        /* checksum */
	CHECK_EQ(decode_changed(249, 0x00, 1, 0, &bad), -EUCLEAN);       /* checksum itself */
	CHECK_EQ(decode_changed(12, 255, 4, 1, &bad), -EUCLEAN);         /* record size */
	CHECK_EQ(decode_changed(40, 15, 4, 1, &bad), -EUCLEAN);          /* block_log < 64K */
	CHECK_EQ(decode_changed(40, 31, 4, 1, &bad), -EUCLEAN);          /* block_log > 1G */
	CHECK_EQ(decode_changed(44, 16, 4, 1, &bad), -EUCLEAN);          /* hot_block_log, no bit */
	CHECK_EQ(decode_changed(108, 1, 1, 1, &bad), -EUCLEAN);          /* reserved 108.. */
	CHECK_EQ(decode_changed(111, 0x80, 1, 1, &bad), -EUCLEAN);       /* ..111 */
	CHECK_EQ(decode_changed(148, 1, 1, 1, &bad), -EUCLEAN);          /* sig_offset, unsigned */
	CHECK_EQ(decode_changed(163, 1, 1, 1, &bad), -EUCLEAN);          /* sig_size, unsigned */
	CHECK_EQ(decode_changed(164, 1, 1, 1, &bad), -EUCLEAN);          /* reserved 164.. */
	CHECK_EQ(decode_changed(247, 1, 1, 1, &bad), -EUCLEAN);          /* ..247 */
	CHECK_EQ(decode_changed(40, 64, 4, 1, &bad), -EUCLEAN);          /* shift overflow */
	CHECK_EQ(decode_changed(56, 0x1234, 8, 1, &bad), -EUCLEAN);      /* block_count */
	CHECK_EQ(decode_changed(64, 0x123456790ull, 8, 1, &bad), -EUCLEAN); /* hot > data */
	CHECK_EQ(decode_changed(72, 8, 8, 1, &bad), -EUCLEAN);           /* meta in the sb */
	CHECK_EQ(decode_changed(80, 0x20000000000ull, 8, 1, &bad), -EUCLEAN); /* meta past end */
	CHECK_EQ(decode_changed(104, 7, 4, 1, &bad), -EUCLEAN);          /* meta codec */
	CHECK_EQ(decode_changed(144, 0, 4, 1, &bad), -EUCLEAN);          /* no root inode */

	/* Valid but unsupported: named by the bit that is not known. */
	CHECK_EQ(decode_changed(8, 2, 4, 1, &bad), -EPROTONOSUPPORT);    /* version too new */
	CHECK_EQ(decode_changed(32, 0x103, 8, 1, &bad), -EPROTONOSUPPORT);
	CHECK_EQ(bad, 1ull << 8);
	CHECK_EQ(decode_changed(32, 0x8000000000000003ull, 8, 1, &bad), -EPROTONOSUPPORT);
	CHECK_EQ(bad, 1ull << 63);
	CHECK_EQ(decode_changed(24, 0x10, 8, 1, &bad), -EPROTONOSUPPORT); /* ro_compat */
	CHECK_EQ(bad, 0x10);

	/* Every known incompatible feature is accepted (paged metadata: with its codec, see
	 * test_sb_paged; hot blocks with their size, test_sb_hot_blocks; content hashes when
	 * signed, test_sb_content_hashes); compat bits never matter. */
	CHECK_EQ(decode_changed(32, STP_FEAT_INCOMPAT_KNOWN & ~STP_FEAT_INCOMPAT_META_PAGES &
				~STP_FEAT_INCOMPAT_HOT_BLOCKS & ~STP_FEAT_INCOMPAT_CONTENT_HASHES,
				8, 1, &bad), 0);
	CHECK_EQ(decode_changed(32, STP_FEAT_INCOMPAT_KNOWN, 8, 1, &bad), -EUCLEAN);
	CHECK_EQ(decode_changed(16, ~0ull & ~STP_FEAT_COMPAT_SIGNED, 8, 1, &bad), 0);
	/* but the signed bit needs its signature block */
	CHECK_EQ(decode_changed(16, STP_FEAT_COMPAT_SIGNED, 8, 1, &bad), -EUCLEAN);
}

/* The golden superblock, signed: 0x1235 blocks give a signature block of
 * 120 + 32 * 0x1237 = 0x24758 bytes, which ends the 2^41-byte image. */
#define GOLD_SIG_SIZE 0x24758ull
#define GOLD_SIG_OFF (0x20000000000ull - GOLD_SIG_SIZE)

static void golden_signed(uint8_t out[STP_SB_SIZE])
{
	static const uint8_t fields[] = {
		/* 148: sig_offset */ 0xa8, 0xb8, 0xfd, 0xff, 0xff, 0x01, 0x00, 0x00,
		/* 156: sig_size */ 0x58, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
	};

	memcpy(out, golden_sb_bytes, STP_SB_SIZE);
	out[16] = 0x03;
	memcpy(out + 148, fields, sizeof(fields));
	seal(out);
}

static void test_sb_signed(void)
{
	struct stp_superblock want = golden_sb, sb;
	uint8_t gold[STP_SB_SIZE], got[STP_SB_SIZE];
	const char *why;
	uint64_t bad;

	want.feat_compat |= STP_FEAT_COMPAT_SIGNED;
	want.sig_offset = GOLD_SIG_OFF;
	want.sig_size = GOLD_SIG_SIZE;
	CHECK_EQ(stp_sig_size(0x1235 + 2), GOLD_SIG_SIZE);
	CHECK_EQ(stp_sig_nhashes(&want), 0x1235 + 2);
	golden_signed(gold);
	stp_sb_encode(&want, got);
	check_bytes("signed superblock", got, gold, STP_SB_SIZE);
	CHECK_EQ(stp_sb_decode_reason(gold, &sb, &bad, &why), 0);
	CHECK_EQ(sb.sig_offset, GOLD_SIG_OFF);
	CHECK_EQ(sb.sig_size, GOLD_SIG_SIZE);
	/* each bound at its edge */
	memcpy(got, gold, sizeof(got));
	put_le(got, 156, GOLD_SIG_SIZE + 32, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strcmp(why, "signature size does not match block_count, the metadata "
				  "pages and the content-hashes bit"));
	memcpy(got, gold, sizeof(got));
	put_le(got, 148, GOLD_SIG_OFF - 1, 8);               /* ends before image_size */
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strcmp(why, "signature block does not end the image"));
	memcpy(got, gold, sizeof(got));
	put_le(got, 136, GOLD_SIG_SIZE + 255, 8);            /* would start in the superblock */
	put_le(got, 148, 255, 8);
	put_le(got, 72, 256, 8);
	put_le(got, 112, 256, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	memcpy(got, gold, sizeof(got));
	put_le(got, 112, GOLD_SIG_OFF - 0x7070 + 1, 8);      /* dictionary overlaps it */
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strcmp(why, "signature block overlaps the metadata or the dictionary"));
	put_le(got, 112, GOLD_SIG_OFF - 0x7070, 8);          /* ends where it starts */
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), 0);
	memcpy(got, gold, sizeof(got));
	put_le(got, 72, GOLD_SIG_OFF - 0x10203 + 1, 8);      /* metadata overlaps it */
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	memcpy(got, gold, sizeof(got));
	got[200] = 1;                                        /* reserved, signed or not */
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
}

/* The golden superblock signed with content hashes: feature bit 7, and 0x1235 more
 * hashes: 120 + 32 * (2 * 0x1235 + 2) = 0x48df8 bytes, ending the 2^41-byte image. */
#define GOLD_CH_SIG_SIZE 0x48df8ull

static void golden_content_hashes(uint8_t out[STP_SB_SIZE])
{
	/* 148: sig_offset, 156: sig_size */
	static const uint8_t fields[] = { 0x08, 0x72, 0xfb, 0xff, 0xff, 0x01, 0x00, 0x00,
					  0xf8, 0x8d, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00 };

	golden_signed(out);
	out[32] = 0x83;
	memcpy(out + 148, fields, sizeof(fields));
	seal(out);
}

static void test_sb_content_hashes(void)
{
	struct stp_superblock want = golden_sb, sb;
	uint8_t gold[STP_SB_SIZE], got[STP_SB_SIZE];
	const char *why;
	uint64_t bad;

	want.feat_compat |= STP_FEAT_COMPAT_SIGNED;
	want.feat_incompat |= STP_FEAT_INCOMPAT_CONTENT_HASHES;
	want.sig_offset = 0x20000000000ull - GOLD_CH_SIG_SIZE;
	want.sig_size = GOLD_CH_SIG_SIZE;
	CHECK_EQ(stp_sig_nstored(&want), 0x1235 + 2);
	CHECK_EQ(stp_sig_nhashes(&want), 2 * 0x1235 + 2);
	CHECK_EQ(stp_sig_hash_content(&want, 0), 0x1235 + 2);
	CHECK_EQ(stp_sig_hash_content(&want, 0x1234), 2 * 0x1235 + 1);
	golden_content_hashes(gold);
	stp_sb_encode(&want, got);
	check_bytes("superblock signed with content hashes", got, gold, STP_SB_SIZE);
	CHECK_EQ(stp_sb_decode_reason(gold, &sb, &bad, &why), 0);
	CHECK_EQ(sb.feat_incompat, want.feat_incompat);
	CHECK_EQ(sb.sig_size, GOLD_CH_SIG_SIZE);
	/* the bit without its hashes, the hashes without the bit */
	golden_signed(got);
	got[32] = 0x83;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strncmp(why, "signature size does not match", 29));
	memcpy(got, gold, sizeof(got));
	got[32] = 0x03;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	/* and never on an unsigned image */
	memcpy(got, golden_sb_bytes, sizeof(got));
	got[32] = 0x83;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strcmp(why, "content-hashes feature bit set on an unsigned image"));
}

/* The golden superblock with paged metadata: feature bit 3, meta_codec 2, and as
 * stored metadata the page table, 24 bytes for each of the ceil(0x30405060 / 64 KiB) =
 * 0x3041 pages: 0x48618 bytes. Signed, its 0x1235 + 2 + 0x3041 hashes take
 * 120 + 32 * 0x4278 = 0x84f78 bytes. */
#define GOLD_PAGES 0x3041ull
#define GOLD_PAGED_SIG_SIZE 0x84f78ull

static void golden_paged(uint8_t out[STP_SB_SIZE])
{
	memcpy(out, golden_sb_bytes, STP_SB_SIZE);
	out[32] = 0x0b;                                        /* DICT | BCJ_X86 | META_PAGES */
	memcpy(out + 80, (const uint8_t[8]){ 0x18, 0x86, 0x04 }, 8); /* meta_stored_size */
	out[104] = 0x02;                                       /* meta_codec: pages */
	seal(out);
}

static void test_sb_paged(void)
{
	struct stp_superblock want = golden_sb, sb;
	uint8_t gold[STP_SB_SIZE], got[STP_SB_SIZE];
	const char *why;
	uint64_t bad;

	want.feat_incompat |= STP_FEAT_INCOMPAT_META_PAGES;
	want.meta_codec = STP_META_CODEC_PAGES;
	want.meta_stored_size = GOLD_PAGES * STP_BLOCKENT_SIZE;
	golden_paged(gold);
	stp_sb_encode(&want, got);
	check_bytes("paged superblock", got, gold, STP_SB_SIZE);
	CHECK_EQ(stp_sb_decode_reason(gold, &sb, &bad, &why), 0);
	CHECK_EQ(sb.meta_codec, STP_META_CODEC_PAGES);
	CHECK_EQ(sb.meta_stored_size, 0x48618);
	CHECK_EQ(stp_meta_pages(&sb), GOLD_PAGES);
	CHECK_EQ(stp_meta_pages(&golden_sb), 0);
	CHECK_EQ(stp_sig_hash_page(&sb, 0), 2 + 0x1235);
	/* a page table of one entry more, or less */
	memcpy(got, gold, sizeof(got));
	put_le(got, 80, 0x48618 + STP_BLOCKENT_SIZE, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strcmp(why, "page table size does not match meta_size"));
	put_le(got, 80, 0x48618 - STP_BLOCKENT_SIZE, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	/* the codec without the bit, the bit without the codec */
	memcpy(got, gold, sizeof(got));
	got[32] = 0x03;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	CHECK(why && !strcmp(why, "paged metadata without its feature bit, or the bit without it"));
	memcpy(got, gold, sizeof(got));
	got[104] = 0x01;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	/* signed: the pages' hashes follow the blocks' */
	memcpy(got, gold, sizeof(got));
	got[16] = 0x03;
	put_le(got, 148, 0x20000000000ull - GOLD_PAGED_SIG_SIZE, 8);
	put_le(got, 156, GOLD_PAGED_SIG_SIZE, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), 0);
	CHECK_EQ(stp_sig_nhashes(&sb), 0x1235 + 2 + GOLD_PAGES);
	CHECK_EQ(stp_sig_size(stp_sig_nhashes(&sb)), GOLD_PAGED_SIG_SIZE);
	put_le(got, 148, 0x20000000000ull - GOLD_SIG_SIZE, 8);
	put_le(got, 156, GOLD_SIG_SIZE, 8);                  /* the blocks' hashes alone */
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
}

/* Signature block header: magic 0 (8), hash algorithm 8 (4), reserved 12 (4), key id
 * 16 (32), signature 48 (64), number of hashes 112 (8). */
static void test_sighdr(void)
{
	struct stp_superblock sb = { .block_count = 3 };
	struct stp_sighdr h = { .hash_alg = 1, .nhashes = 5 }, d;
	uint8_t want[STP_SIG_HDR_SIZE] = { 'S', 'T', 'P', 'S', 'I', 'G', 'N', '1', [8] = 1,
					   [112] = 5 }, got[STP_SIG_HDR_SIZE];

	for (int i = 0; i < 32; i++)
		want[16 + i] = h.key_id[i] = (uint8_t)(0xa0 + i);
	for (int i = 0; i < 64; i++)
		want[48 + i] = h.sig[i] = (uint8_t)(0x10 + i);
	memset(got, 0xee, sizeof(got));
	stp_sighdr_encode(&h, got);
	check_bytes("signature block header", got, want, sizeof(want));
	memset(&d, 0x55, sizeof(d));
	CHECK_EQ(stp_sighdr_decode(want, &sb, &d), 0);
	CHECK_EQ(d.hash_alg, 1);
	CHECK_EQ(d.nhashes, 5);
	CHECK(!memcmp(d.key_id, h.key_id, 32) && !memcmp(d.sig, h.sig, 64));
	memcpy(got, want, sizeof(got));
	got[7] = '2';
	CHECK_EQ(stp_sighdr_decode(got, &sb, &d), -EUCLEAN);       /* magic */
	memcpy(got, want, sizeof(got));
	got[15] = 1;
	CHECK_EQ(stp_sighdr_decode(got, &sb, &d), -EUCLEAN);       /* reserved */
	memcpy(got, want, sizeof(got));
	got[112] = 4;
	CHECK_EQ(stp_sighdr_decode(got, &sb, &d), -EUCLEAN);       /* nhashes != blocks + 2 */
	sb.feat_incompat = STP_FEAT_INCOMPAT_CONTENT_HASHES;          /* 3 more: 8 */
	CHECK_EQ(stp_sighdr_decode(want, &sb, &d), -EUCLEAN);
	got[112] = 8;
	CHECK_EQ(stp_sighdr_decode(got, &sb, &d), 0);
	sb.feat_incompat = 0;
	memcpy(got, want, sizeof(got));
	got[8] = 2;
	CHECK_EQ(stp_sighdr_decode(got, &sb, &d), -EPROTONOSUPPORT); /* unknown hash */
}

/* The golden superblock with hot blocks: feature bit 4 and hot_block_log 16. The hot
 * region's 0xabcdef bytes take ceil(0xabcdef / 64 KiB) = 0xac blocks, the last 0xcdef
 * bytes long; the 0x12299a99a bytes after it ceil(/ 1 MiB) = 0x122a, the last 0x9999a
 * bytes long: 0x12d6 blocks in all. */
#define GOLD_HOT_BLOCKS 0xacull
#define GOLD_HB_COUNT 0x12d6ull

static void golden_hot_blocks(uint8_t out[STP_SB_SIZE])
{
	memcpy(out, golden_sb_bytes, STP_SB_SIZE);
	out[32] = 0x13;                                        /* DICT | BCJ_X86 | HOT_BLOCKS */
	out[44] = 0x10;                                        /* hot_block_log */
	memcpy(out + 56, (const uint8_t[8]){ 0xd6, 0x12 }, 8); /* block_count */
	seal(out);
}

static void test_sb_hot_blocks(void)
{
	struct stp_superblock want = golden_sb, sb;
	uint8_t gold[STP_SB_SIZE], got[STP_SB_SIZE];
	const char *why;
	uint64_t bad, hot = golden_sb.hot_size, last = GOLD_HB_COUNT - 1;

	want.feat_incompat |= STP_FEAT_INCOMPAT_HOT_BLOCKS;
	want.hot_block_log = 16;
	want.block_count = GOLD_HB_COUNT;
	golden_hot_blocks(gold);
	stp_sb_encode(&want, got);
	check_bytes("hot-blocks superblock", got, gold, STP_SB_SIZE);
	CHECK_EQ(stp_sb_decode_reason(gold, &sb, &bad, &why), 0);
	CHECK_EQ(sb.hot_block_log, 16);
	CHECK_EQ(stp_sb_hot_blocks(&sb), GOLD_HOT_BLOCKS);
	/* the geometry at each edge */
	CHECK_EQ(stp_sb_block_of(&sb, 0), 0);
	CHECK_EQ(stp_sb_block_of(&sb, 0xffff), 0);
	CHECK_EQ(stp_sb_block_of(&sb, 0x10000), 1);
	CHECK_EQ(stp_sb_block_of(&sb, hot - 1), GOLD_HOT_BLOCKS - 1);
	CHECK_EQ(stp_sb_block_of(&sb, hot), GOLD_HOT_BLOCKS);
	CHECK_EQ(stp_sb_block_of(&sb, hot + 0xfffff), GOLD_HOT_BLOCKS);
	CHECK_EQ(stp_sb_block_of(&sb, hot + 0x100000), GOLD_HOT_BLOCKS + 1);
	CHECK_EQ(stp_sb_block_of(&sb, golden_sb.data_size - 1), last);
	CHECK_EQ(stp_sb_block_start(&sb, 1), 0x10000);
	CHECK_EQ(stp_sb_block_start(&sb, GOLD_HOT_BLOCKS), hot);
	CHECK_EQ(stp_sb_block_start(&sb, GOLD_HOT_BLOCKS + 1), hot + 0x100000);
	CHECK_EQ(stp_sb_block_len(&sb, 0), 0x10000);
	CHECK_EQ(stp_sb_block_len(&sb, GOLD_HOT_BLOCKS - 1), 0xcdef);
	CHECK_EQ(stp_sb_block_len(&sb, GOLD_HOT_BLOCKS), 0x100000);
	CHECK_EQ(stp_sb_block_len(&sb, last), 0x9999a);
	CHECK_EQ(stp_sb_block_len(&sb, last + 1), 0);
	CHECK_EQ(stp_sb_block_end(&sb, GOLD_HOT_BLOCKS - 1), hot);
	CHECK_EQ(stp_sb_block_end(&sb, last), golden_sb.data_size);
	CHECK_EQ(stp_sb_block_offset(&sb, hot + 0x100005), 5);
	CHECK_EQ(stp_sig_nhashes(&sb), GOLD_HB_COUNT + 2);
	/* without the feature the same stream is 0x1235 blocks of 1 MiB */
	CHECK_EQ(stp_sb_block_of(&golden_sb, hot), hot >> 20);
	CHECK_EQ(stp_sb_block_start(&golden_sb, 3), 3ull << 20);
	CHECK_EQ(stp_sb_block_len(&golden_sb, 0x1234), 0x56789);
	/* refused: the size at or above block_log, below 64 KiB, or missing; the old count */
	memcpy(got, gold, sizeof(got));
	got[44] = 20;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	got[44] = 15;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	got[44] = 0;
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	memcpy(got, gold, sizeof(got));
	put_le(got, 56, 0x1235, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
	put_le(got, 56, GOLD_HB_COUNT + 1, 8);
	seal(got);
	CHECK_EQ(stp_sb_decode_reason(got, &sb, &bad, &why), -EUCLEAN);
}

/* Decodes the golden superblock with N fields changed (offset, value, length), re-sealed;
 * *why is the rule the decoder names. */
struct sb_change { size_t off; uint64_t v; size_t len; };

static int decode_fields(const struct sb_change *c, size_t n, const char **why)
{
	uint8_t in[STP_SB_SIZE];
	struct stp_superblock sb;
	uint64_t bad;

	golden_sb_sealed(in);
	for (size_t i = 0; i < n; i++)
		put_le(in, c[i].off, c[i].v, c[i].len);
	seal(in);
	return stp_sb_decode_reason(in, &sb, &bad, why);
}

#define DECODE(why, ...)                                                             \
	decode_fields((const struct sb_change[]){ __VA_ARGS__ },                       \
		      sizeof((const struct sb_change[]){ __VA_ARGS__ }) /                 \
			      sizeof(struct sb_change), (why))

/* What the superblock promises must fit in the image and in what a reader will
 * allocate: each rule at its edge, accepted on one side and refused on the other. The
 * golden superblock: meta at 0x1122334455, 0x10203 stored, 0x30405060 decoded, zstd;
 * dictionary at 0x100, 0x7070 bytes; image_size 2^41; 0xc0ffee inodes; 0x1235 blocks. */
/* The golden superblock with bcj-relative: feature bit 5 beside the dictionary and
 * x86 bits, nothing else changed. Filters then count from 0 in every block. */
static void test_sb_bcj_relative(void)
{
	struct stp_superblock want = golden_sb, sb;
	uint8_t gold[STP_SB_SIZE], got[STP_SB_SIZE];
	const char *why;
	uint64_t bad;

	memcpy(gold, golden_sb_bytes, STP_SB_SIZE);
	gold[32] = 0x23;                                       /* DICT | BCJ_X86 | BCJ_RELATIVE */
	seal(gold);
	want.feat_incompat |= STP_FEAT_INCOMPAT_BCJ_RELATIVE;
	stp_sb_encode(&want, got);
	check_bytes("bcj-relative superblock", got, gold, STP_SB_SIZE);
	CHECK_EQ(stp_sb_decode_reason(gold, &sb, &bad, &why), 0);
	CHECK_EQ(sb.feat_incompat, want.feat_incompat);
	CHECK_EQ(stp_sb_filter_start(&sb, 0), 0);
	CHECK_EQ(stp_sb_filter_start(&sb, 3), 0);
	CHECK_EQ(stp_sb_block_start(&sb, 3), 3ull << 20); /* the geometry is unchanged */
	/* without it a block is filtered from its stream position, as before */
	CHECK_EQ(stp_sb_filter_start(&golden_sb, 3), 3ull << 20);
}

static void test_sb_bounds(void)
{
	const uint64_t image = 0x20000000000ull, meta = 0x30405060, inodes_min = 96 + 64 * 0xc0ffeeull;
	const char *why;

	CHECK_EQ(DECODE(&why, { 108, 1, 1 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "superblock reserved bytes not zero"));
	/* metadata inside image_size, without overflow */
	CHECK_EQ(DECODE(&why, { 136, 0x1122334455ull + 0x10203 - 1, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "metadata lies outside image_size"));
	CHECK_EQ(DECODE(&why, { 136, 0x1122334455ull + 0x10203, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 72, ~0ull - 4, 8 }), -EUCLEAN);
	CHECK_EQ(DECODE(&why, { 80, ~0ull, 8 }), -EUCLEAN);
	CHECK_EQ(DECODE(&why, { 72, 255, 8 }), -EUCLEAN);                 /* in the superblock */
	CHECK_EQ(DECODE(&why, { 72, 256, 8 }), 0);
	/* decoded metadata: at most 1 GiB, at least what the inodes and blocks need */
	CHECK_EQ(DECODE(&why, { 88, (1ull << 30) + 1, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "metadata size above 1 GiB"));
	CHECK_EQ(DECODE(&why, { 88, 1ull << 30, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 88, inodes_min - 1, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "metadata size too small for inode_count and block_count"));
	CHECK_EQ(DECODE(&why, { 88, inodes_min, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 144, 1, 4 }, { 88, 96 + 24 * 0x1235 - 1, 8 }), -EUCLEAN);
	CHECK_EQ(DECODE(&why, { 144, 1, 4 }, { 88, 96 + 24 * 0x1235, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 144, 1, 4 }, { 56, 0, 8 }, { 48, 0, 8 }, { 64, 0, 8 },
			{ 80, 100, 8 }, { 88, 159, 8 }), -EUCLEAN);      /* one inode: 96 + 64 */
	CHECK(why && !strcmp(why, "metadata size too small for inode_count and block_count"));
	CHECK_EQ(DECODE(&why, { 144, 1, 4 }, { 56, 0, 8 }, { 48, 0, 8 }, { 64, 0, 8 },
			{ 80, 100, 8 }, { 88, 160, 8 }), 0);
	/* raw metadata is its own size; a zstd frame neither too long nor too short */
	CHECK_EQ(DECODE(&why, { 104, 0, 4 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "raw metadata: stored size differs from decoded size"));
	CHECK_EQ(DECODE(&why, { 104, 0, 4 }, { 80, meta, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 80, meta / 32768 - 1, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "metadata size more than its stored size can decode to"));
	CHECK_EQ(DECODE(&why, { 80, meta / 32768, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 80, meta + meta / 256 + 65, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "stored metadata larger than zstd makes it"));
	CHECK_EQ(DECODE(&why, { 80, meta + meta / 256 + 64, 8 }), 0);
	/* the dictionary: at most 16 MiB, after the superblock, inside image_size */
	CHECK_EQ(DECODE(&why, { 120, (16ull << 20) + 1, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "dictionary above 16 MiB"));
	CHECK_EQ(DECODE(&why, { 120, 16ull << 20, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 112, 255, 8 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "dictionary lies outside image_size"));
	CHECK_EQ(DECODE(&why, { 112, image - 0x7070 + 1, 8 }), -EUCLEAN);
	CHECK_EQ(DECODE(&why, { 112, image - 0x7070, 8 }), 0);
	CHECK_EQ(DECODE(&why, { 112, ~0ull, 8 }, { 120, 0x8000, 8 }), -EUCLEAN);
	CHECK_EQ(DECODE(&why, { 112, ~0ull, 8 }, { 120, 0, 8 }), 0); /* no dictionary */
	CHECK_EQ(DECODE(&why, { 0, 'X', 1 }), -EUCLEAN);
	CHECK(why && !strcmp(why, "not a stipple image (bad magic)"));
}

/* Metadata header: magic 0 (4) "META", inode_count 4, dirent_count 8, extent_count 12,
 * xattr_count 16, block_count 20 (u32 each), strings_size 24 (8), then the offsets of
 * the inode 32, dirent 40, extent 48, xattr 56, block 64 and string 72 tables (u64),
 * lookup_count 80 (u32), reserved 84..87 zero, lookup_off 88 (u64); no lookup table
 * here: both 0. */
static const struct stp_meta_header golden_mh = {
	.inode_count = 3, .dirent_count = 2, .extent_count = 1, .xattr_count = 4,
	.block_count = 5, .strings_size = 0x21,
	.inode_off = 96, .dirent_off = 288, .extent_off = 312, .xattr_off = 336,
	.block_off = 400, .strings_off = 520,
};

static const uint8_t golden_mh_bytes[STP_META_HDR_SIZE] = {
	[0] = 'M', 'E', 'T', 'A',
	[4] = 0x03, 0x00, 0x00, 0x00,
	[8] = 0x02, 0x00, 0x00, 0x00,
	[12] = 0x01, 0x00, 0x00, 0x00,
	[16] = 0x04, 0x00, 0x00, 0x00,
	[20] = 0x05, 0x00, 0x00, 0x00,
	[24] = 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[32] = 0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[40] = 0x20, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[48] = 0x38, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[56] = 0x50, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[64] = 0x90, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	[72] = 0x08, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

#define GOLDEN_META_LEN (520 + 0x21)

static int mh_decode_changed(size_t off, uint64_t v, size_t len, size_t meta_len)
{
	uint8_t in[STP_META_HDR_SIZE];
	struct stp_meta_header h;

	memcpy(in, golden_mh_bytes, sizeof(in));
	put_le(in, off, v, len);
	return stp_meta_header_decode(in, meta_len, &h);
}

static void test_meta_header(void)
{
	uint8_t got[STP_META_HDR_SIZE];
	struct stp_meta_header h;

	CHECK_EQ(STP_META_MAGIC, 0x4154454d); /* "META" read as little-endian */
	memset(got, 0xaa, sizeof(got));
	stp_meta_header_encode(&golden_mh, got);
	check_bytes("metadata header", got, golden_mh_bytes, sizeof(got));

	memset(&h, 0x5a, sizeof(h));
	CHECK_EQ(stp_meta_header_decode(golden_mh_bytes, GOLDEN_META_LEN, &h), 0);
	CHECK_EQ(h.inode_count, 3);
	CHECK_EQ(h.dirent_count, 2);
	CHECK_EQ(h.extent_count, 1);
	CHECK_EQ(h.xattr_count, 4);
	CHECK_EQ(h.block_count, 5);
	CHECK_EQ(h.strings_size, 0x21);
	CHECK_EQ(h.inode_off, 96);
	CHECK_EQ(h.dirent_off, 288);
	CHECK_EQ(h.extent_off, 312);
	CHECK_EQ(h.xattr_off, 336);
	CHECK_EQ(h.block_off, 400);
	CHECK_EQ(h.strings_off, 520);

	CHECK_EQ(mh_decode_changed(0, 'm', 1, GOLDEN_META_LEN), -EUCLEAN);      /* magic */
	CHECK_EQ(mh_decode_changed(0, 'M', 1, GOLDEN_META_LEN - 1), -EUCLEAN);  /* strings cut */
	CHECK_EQ(mh_decode_changed(0, 'M', 1, STP_META_HDR_SIZE - 1), -EUCLEAN);
	CHECK_EQ(mh_decode_changed(32, 64, 8, GOLDEN_META_LEN), -EUCLEAN);      /* in header */
	CHECK_EQ(mh_decode_changed(40, 289, 8, GOLDEN_META_LEN), -EUCLEAN);     /* unaligned */
	CHECK_EQ(mh_decode_changed(64, 1ull << 40, 8, GOLDEN_META_LEN), -EUCLEAN);
	CHECK_EQ(mh_decode_changed(64, ~7ull, 8, GOLDEN_META_LEN), -EUCLEAN);   /* wraps */
	CHECK_EQ(mh_decode_changed(4, 0xffffffff, 4, GOLDEN_META_LEN), -EUCLEAN); /* count */
	CHECK_EQ(mh_decode_changed(24, ~0ull, 8, GOLDEN_META_LEN), -EUCLEAN);
	CHECK_EQ(mh_decode_changed(84, 1, 1, GOLDEN_META_LEN), -EUCLEAN);  /* reserved 84.. */
	CHECK_EQ(mh_decode_changed(87, 1, 1, GOLDEN_META_LEN), -EUCLEAN);  /* ..87 */
	/* a count without a table, or a table outside the metadata */
	CHECK_EQ(mh_decode_changed(80, 1, 4, GOLDEN_META_LEN), -EUCLEAN);
	CHECK_EQ(mh_decode_changed(88, 520, 8, GOLDEN_META_LEN), 0);       /* 0 records */
	CHECK_EQ(mh_decode_changed(88, 524, 8, GOLDEN_META_LEN), -EUCLEAN); /* unaligned */
	CHECK_EQ(mh_decode_changed(88, 1ull << 40, 8, GOLDEN_META_LEN), -EUCLEAN);
}

/* The golden header with a lookup table: 2 records at 560, after the strings. */
static void test_meta_header_lookups(void)
{
	struct stp_meta_header mh = golden_mh, h;
	uint8_t want[STP_META_HDR_SIZE], got[STP_META_HDR_SIZE], in[STP_META_HDR_SIZE];
	const size_t len = 560 + 2 * STP_LOOKUP_SIZE;

	memcpy(want, golden_mh_bytes, sizeof(want));
	want[80] = 0x02;
	want[88] = 0x30;
	want[89] = 0x02;
	mh.lookup_count = 2;
	mh.lookup_off = 560;
	memset(got, 0xaa, sizeof(got));
	stp_meta_header_encode(&mh, got);
	check_bytes("metadata header with lookups", got, want, sizeof(want));
	memset(&h, 0x5a, sizeof(h));
	CHECK_EQ(stp_meta_header_decode(want, len, &h), 0);
	CHECK_EQ(h.lookup_count, 2);
	CHECK_EQ(h.lookup_off, 560);
	CHECK_EQ(stp_meta_header_decode(want, len - 1, &h), -EUCLEAN);     /* cut */
	/* at most STP_LOOKUP_MAX records, whatever room the metadata has */
	memcpy(in, want, sizeof(in));
	put_le(in, 80, STP_LOOKUP_MAX, 4);
	CHECK_EQ(stp_meta_header_decode(in, 560 + STP_LOOKUP_MAX * STP_LOOKUP_SIZE, &h), 0);
	put_le(in, 80, STP_LOOKUP_MAX + 1, 4);
	CHECK_EQ(stp_meta_header_decode(in, 560 + (STP_LOOKUP_MAX + 1) * STP_LOOKUP_SIZE, &h),
		 -EUCLEAN);
}

/* Lookup: dir 0 (u32), name_off 4 (u32), name_len 8 (u16), reserved 10..11 zero. */
static void test_lookup(void)
{
	const struct stp_lookup l = { .dir = 0x01020304, .name_off = 0xa0b0c0, .name_len = 255 };
	static const uint8_t want[STP_LOOKUP_SIZE] = {
		0x04, 0x03, 0x02, 0x01, 0xc0, 0xb0, 0xa0, 0x00, 0xff, 0x00, 0x00, 0x00,
	};
	uint8_t got[STP_LOOKUP_SIZE], bad[STP_LOOKUP_SIZE];
	struct stp_lookup back;

	memset(got, 0xaa, sizeof(got));
	stp_lookup_encode(&l, got);
	check_bytes("lookup", got, want, sizeof(want));
	memset(&back, 0x5a, sizeof(back));
	CHECK_EQ(stp_lookup_decode(want, &back), 0);
	CHECK_EQ(back.dir, l.dir);
	CHECK_EQ(back.name_off, l.name_off);
	CHECK_EQ(back.name_len, l.name_len);
	memcpy(bad, want, sizeof(bad));
	bad[11] = 1;
	CHECK_EQ(stp_lookup_decode(bad, &back), -EUCLEAN);
}

/* Inode: mode 0, uid 4, gid 8, nlink 12 (u32), mtime_sec 16 (s64), mtime_nsec 24,
 * xattr_count 28 (u32), size 32, data 40 (u64), count 48, xattr_first 52, parent 56
 * (u32), reserved 60..63 zero. */
static void test_inode(void)
{
	const struct stp_inode ino = {
		.mode = 0104755, .uid = 1000, .gid = 0x10203, .nlink = 3,
		.mtime_sec = -31536000, .mtime_nsec = 999999999, .size = 0x1122334455667788ull,
		.data = 0x99, .count = 0x0a0b, .xattr_first = 0x0c0d0e, .xattr_count = 7,
		.parent = 0x42,
	};
	static const uint8_t want[STP_INODE_SIZE] = {
		[0] = 0xed, 0x89, 0x00, 0x00,                           /* 0104755 */
		[4] = 0xe8, 0x03, 0x00, 0x00,
		[8] = 0x03, 0x02, 0x01, 0x00,
		[12] = 0x03, 0x00, 0x00, 0x00,
		[16] = 0x80, 0xcc, 0x1e, 0xfe, 0xff, 0xff, 0xff, 0xff,  /* -31536000 */
		[24] = 0xff, 0xc9, 0x9a, 0x3b,                           /* 999999999 */
		[28] = 0x07, 0x00, 0x00, 0x00,
		[32] = 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
		[40] = 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		[48] = 0x0b, 0x0a, 0x00, 0x00,
		[52] = 0x0e, 0x0d, 0x0c, 0x00,
		[56] = 0x42, 0x00, 0x00, 0x00,
	};
	uint8_t got[STP_INODE_SIZE];
	struct stp_inode back;

	memset(got, 0xaa, sizeof(got));
	stp_inode_encode(&ino, got);
	check_bytes("inode", got, want, sizeof(want));
	memset(&back, 0x5a, sizeof(back));
	stp_inode_decode(want, &back);
	CHECK_EQ(back.mode, ino.mode);
	CHECK_EQ(back.uid, ino.uid);
	CHECK_EQ(back.gid, ino.gid);
	CHECK_EQ(back.nlink, ino.nlink);
	CHECK(back.mtime_sec == -31536000);
	CHECK_EQ(back.mtime_nsec, ino.mtime_nsec);
	CHECK_EQ(back.size, ino.size);
	CHECK_EQ(back.data, ino.data);
	CHECK_EQ(back.count, ino.count);
	CHECK_EQ(back.xattr_first, ino.xattr_first);
	CHECK_EQ(back.xattr_count, ino.xattr_count);
	CHECK_EQ(back.parent, ino.parent);
}

/* Directory entry: ino 0 (u32), name_off 4 (u32), name_len 8 (u16), dtype 10 (u8),
 * reserved 11 zero. */
static void test_dirent(void)
{
	const struct stp_dirent d = { .ino = 0x01020304, .name_off = 0xa0b0c0, .name_len = 255,
				      .dtype = 10 /* DT_LNK */ };
	static const uint8_t want[STP_DIRENT_SIZE] = {
		0x04, 0x03, 0x02, 0x01, 0xc0, 0xb0, 0xa0, 0x00, 0xff, 0x00, 0x0a, 0x00,
	};
	uint8_t got[STP_DIRENT_SIZE];
	struct stp_dirent back;

	memset(got, 0xaa, sizeof(got));
	stp_dirent_encode(&d, got);
	check_bytes("dirent", got, want, sizeof(want));
	memset(&back, 0x5a, sizeof(back));
	stp_dirent_decode(want, &back);
	CHECK_EQ(back.ino, d.ino);
	CHECK_EQ(back.name_off, d.name_off);
	CHECK_EQ(back.name_len, d.name_len);
	CHECK_EQ(back.dtype, d.dtype);
}

/* The names a directory entry may hold: what the readers and mkstipple's lookups share. */
static void test_name_ok(void)
{
	char longest[STP_NAME_MAX + 1];

	memset(longest, 'x', sizeof(longest));
	CHECK(stp_name_ok("a", 1));
	CHECK(stp_name_ok("...", 3));
	CHECK(stp_name_ok(".a", 2));
	CHECK(stp_name_ok(longest, STP_NAME_MAX));
	CHECK(!stp_name_ok(longest, STP_NAME_MAX + 1));
	CHECK(!stp_name_ok("", 0));
	CHECK(!stp_name_ok(".", 1));
	CHECK(!stp_name_ok("..", 2));
	CHECK(!stp_name_ok("a/b", 3));
	CHECK(!stp_name_ok("/", 1));
	CHECK(!stp_name_ok("a\0b", 3));
	CHECK(stp_name_ok("..x", 2) == 0); /* LEN counts, not the NUL */
}

/* Extent: file_off 0, stream_off 8, length 16 (u64 each). */
static void test_extent(void)
{
	const struct stp_extent e = { .file_off = 0x10000, .stream_off = 0x123456789abull,
				      .length = 0xfffffffff0ull };
	static const uint8_t want[STP_EXTENT_SIZE] = {
		0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
		0xab, 0x89, 0x67, 0x45, 0x23, 0x01, 0x00, 0x00,
		0xf0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00,
	};
	uint8_t got[STP_EXTENT_SIZE];
	struct stp_extent back;

	memset(got, 0xaa, sizeof(got));
	stp_extent_encode(&e, got);
	check_bytes("extent", got, want, sizeof(want));
	memset(&back, 0x5a, sizeof(back));
	stp_extent_decode(want, &back);
	CHECK_EQ(back.file_off, e.file_off);
	CHECK_EQ(back.stream_off, e.stream_off);
	CHECK_EQ(back.length, e.length);
}

/* Extended attribute: name_off 0, value_off 4, value_len 8 (u32), name_len 12 (u16),
 * reserved 14..15 zero. */
static void test_xattr(void)
{
	const struct stp_xattr x = { .name_off = 0x11, .value_off = 0x2233,
				     .value_len = 0x10000, .name_len = 0x1ff };
	static const uint8_t want[STP_XATTR_SIZE] = {
		0x11, 0x00, 0x00, 0x00, 0x33, 0x22, 0x00, 0x00,
		0x00, 0x00, 0x01, 0x00, 0xff, 0x01, 0x00, 0x00,
	};
	uint8_t got[STP_XATTR_SIZE];
	struct stp_xattr back;

	memset(got, 0xaa, sizeof(got));
	stp_xattr_encode(&x, got);
	check_bytes("xattr", got, want, sizeof(want));
	memset(&back, 0x5a, sizeof(back));
	stp_xattr_decode(want, &back);
	CHECK_EQ(back.name_off, x.name_off);
	CHECK_EQ(back.value_off, x.value_off);
	CHECK_EQ(back.value_len, x.value_len);
	CHECK_EQ(back.name_len, x.name_len);
}

/* Block table entry: offset 0 (u64), stored_size 8 (u32), codec 12 (u8), filter 13 (u8),
 * reserved 14..15 zero, checksum 16 (u64). */
static void test_blockent(void)
{
	const struct stp_blockent b = { .offset = 0x0807060504030201ull, .stored_size = 0x2000001,
					.codec = STP_CODEC_ZSTD_DICT, .filter = STP_FILTER_ARM64,
					.checksum = 0xdeadbeefcafef00dull };
	static const uint8_t want[STP_BLOCKENT_SIZE] = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x01, 0x00, 0x00, 0x02,
		0x02, 0x02, 0x00, 0x00,
		0x0d, 0xf0, 0xfe, 0xca, 0xef, 0xbe, 0xad, 0xde,
	};
	uint8_t got[STP_BLOCKENT_SIZE];
	struct stp_blockent back;

	memset(got, 0xaa, sizeof(got));
	stp_blockent_encode(&b, got);
	check_bytes("block entry", got, want, sizeof(want));
	memset(&back, 0x5a, sizeof(back));
	stp_blockent_decode(want, &back);
	CHECK_EQ(back.offset, b.offset);
	CHECK_EQ(back.stored_size, b.stored_size);
	CHECK_EQ(back.codec, b.codec);
	CHECK_EQ(back.filter, b.filter);
	CHECK_EQ(back.checksum, b.checksum);
}

/* The codes stored on disk for codecs and filters never move. */
static void test_enum_values(void)
{
	CHECK_EQ(STP_CODEC_RAW, 0);
	CHECK_EQ(STP_CODEC_ZSTD, 1);
	CHECK_EQ(STP_CODEC_ZSTD_DICT, 2);
	CHECK_EQ(STP_FILTER_NONE, 0);
	CHECK_EQ(STP_FILTER_X86, 1);
	CHECK_EQ(STP_FILTER_ARM64, 2);
	CHECK_EQ(STP_FEAT_INCOMPAT_DICT, 1);
	CHECK_EQ(STP_FEAT_INCOMPAT_BCJ_X86, 2);
	CHECK_EQ(STP_FEAT_INCOMPAT_BCJ_ARM64, 4);
	CHECK_EQ(STP_FEAT_INCOMPAT_META_PAGES, 8);
	CHECK_EQ(STP_FEAT_INCOMPAT_HOT_BLOCKS, 16);
	CHECK_EQ(STP_FEAT_INCOMPAT_BCJ_RELATIVE, 32);
	CHECK_EQ(STP_FORMAT_VERSION, 1);
	CHECK_EQ(STP_BLOCK_LOG_MIN, 16);
	CHECK_EQ(STP_BLOCK_LOG_MAX, 30);
	CHECK(!memcmp(STP_MAGIC, "STIPPLE\0", STP_MAGIC_LEN));
}

/* A reserved byte that is not zero makes a record damaged: a later format may give it
 * a meaning this reader would miss. */
static void test_reserved_bytes(void)
{
	uint8_t rec[STP_INODE_SIZE] = { 0 };
	struct stp_inode ino;
	struct stp_dirent d;
	struct stp_xattr x;
	struct stp_blockent b;

	CHECK_EQ(stp_inode_decode(rec, &ino), 0);
	rec[60] = 1;
	CHECK_EQ(stp_inode_decode(rec, &ino), -EUCLEAN);
	rec[60] = 0;
	rec[63] = 0x80;
	CHECK_EQ(stp_inode_decode(rec, &ino), -EUCLEAN);
	memset(rec, 0, sizeof(rec));
	CHECK_EQ(stp_dirent_decode(rec, &d), 0);
	rec[11] = 1;
	CHECK_EQ(stp_dirent_decode(rec, &d), -EUCLEAN);
	memset(rec, 0, sizeof(rec));
	CHECK_EQ(stp_xattr_decode(rec, &x), 0);
	rec[15] = 1;
	CHECK_EQ(stp_xattr_decode(rec, &x), -EUCLEAN);
	memset(rec, 0, sizeof(rec));
	CHECK_EQ(stp_blockent_decode(rec, &b), 0);
	rec[14] = 1;
	CHECK_EQ(stp_blockent_decode(rec, &b), -EUCLEAN);
}

/* --- whole images, built by hand, opened through the reader --- */

/* The last message the library logged, to check what an open says. */
static char last_log[512];

static void keep_log(enum stp_log_level level, const char *msg)
{
	(void)level;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

struct xattr_spec {
	const char *name;
	size_t name_len, value_len;
};

#define IMG_MAX (300u << 10)

/* A block table entry of a hand-made image, codec 1: OFFSET and STORED bytes. */
struct hand_block {
	uint64_t offset;
	uint32_t stored;
};

/* An image of a root directory (mode 040755, nlink 2) holding the extended attributes
 * X[0..n) (values of 'v' bytes), raw metadata right after the superblock, and NB (0 to
 * 2) data blocks whose table entries B give (one block: a 1-byte stream; two: a 64 KiB
 * block and a 1-byte one; a byte of data sits at 256, before the metadata). Every field
 * is put at the offset stipple(5) gives. Returns the image size (the superblock's
 * image_size). */
static size_t hand_image(uint8_t *img, const struct xattr_spec *x, unsigned n,
			 const struct hand_block *b, unsigned blocks)
{
	size_t meta_off = 256 + (blocks != 0), xoff = 160, boff = xoff + 16 * n,
	       soff = boff + 24 * blocks;
	uint64_t data_size = blocks ? (blocks - 1) * 65536ull + 1 : 0;
	uint8_t *m = img + meta_off;
	size_t str = 0, len;

	memset(img, 0, IMG_MAX);
	if (blocks)
		img[256] = 'd';
	for (unsigned i = 0; i < n; i++) {
		uint8_t *rec = m + xoff + 16 * i;

		put_le(rec, 0, str, 4);                        /* name_off */
		memcpy(m + soff + str, x[i].name, x[i].name_len);
		str += x[i].name_len;
		put_le(rec, 4, str, 4);                        /* value_off */
		put_le(rec, 8, x[i].value_len, 4);             /* value_len */
		put_le(rec, 12, x[i].name_len, 2);             /* name_len */
		memset(m + soff + str, 'v', x[i].value_len);
		str += x[i].value_len;
	}
	for (unsigned i = 0; i < blocks; i++) {
		put_le(m + boff + 24 * i, 0, b[i].offset, 8);
		put_le(m + boff + 24 * i, 8, b[i].stored, 4);
		m[boff + 24 * i + 12] = 1;                     /* zstd */
		put_le(m + boff + 24 * i, 16, XXH3_64bits(img + 256, 1), 8);
	}
	len = soff + str;
	memcpy(m, "META", 4);
	put_le(m, 4, 1, 4);                                    /* inodes */
	put_le(m, 16, n, 4);                                   /* xattrs */
	put_le(m, 20, blocks, 4);                              /* blocks */
	put_le(m, 24, str, 8);                                 /* strings_size */
	put_le(m, 32, 96, 8);                                  /* inode table */
	put_le(m, 40, xoff, 8);                                /* dirents: none */
	put_le(m, 48, xoff, 8);                                /* extents: none */
	put_le(m, 56, xoff, 8);
	put_le(m, 64, boff, 8);
	put_le(m, 72, soff, 8);
	put_le(m + 96, 0, 040755, 4);                          /* root: mode */
	put_le(m + 96, 12, 2, 4);                              /* nlink */
	put_le(m + 96, 28, n, 4);                              /* xattr_count */
	memcpy(img, "STIPPLE", 8);
	put_le(img, 8, 1, 4);
	put_le(img, 12, 256, 4);
	put_le(img, 40, 16, 4);                                /* 64 KiB blocks */
	put_le(img, 48, data_size, 8);
	put_le(img, 56, blocks, 8);                            /* block_count */
	put_le(img, 72, meta_off, 8);
	put_le(img, 80, len, 8);
	put_le(img, 88, len, 8);
	put_le(img, 96, XXH3_64bits(m, len), 8);
	put_le(img, 136, meta_off + len, 8);
	put_le(img, 144, 1, 4);
	seal(img);
	return meta_off + len;
}

/* Writes FILE_LEN bytes of IMG to a temporary file and opens it: the open's result. */
static int open_bytes(const uint8_t *img, size_t file_len, struct stp_image **out)
{
	char path[] = "/tmp/test_format.XXXXXX";
	int fd = mkstemp(path), rc;

	if (fd < 0 || write(fd, img, file_len) != (ssize_t)file_len) {
		perror("test_format: temporary image");
		exit(1);
	}
	close(fd);
	last_log[0] = 0;
	rc = stp_image_open(path, out);
	unlink(path);
	return rc;
}

/* Attribute 0 of the root of an image holding X alone: the reader's result. */
static int xattr_of(const struct xattr_spec *x)
{
	static uint8_t img[IMG_MAX];
	struct stp_image *im;
	struct stp_inode root;
	static uint8_t value[STP_XATTR_VALUE_MAX];
	char name[STP_XATTR_NAME_MAX + 1];
	struct stp_xattr a;
	int rc = open_bytes(img, hand_image(img, x, 1, NULL, 0), &im);

	if (rc)
		return rc;
	rc = stp_image_inode(im, STP_ROOT_INO, &root);
	if (!rc)
		rc = stp_image_xattr(im, &root, 0, &a, name);
	if (!rc)
		rc = stp_image_xattr_value(im, &a, value);
	if (!rc && (a.name_len != x->name_len || memcmp(name, x->name, a.name_len) ||
		    a.value_len != x->value_len || (a.value_len && value[a.value_len - 1] != 'v')))
		rc = -EINVAL;
	stp_image_close(im);
	return rc;
}

/* Linux bounds names to 255 bytes without NUL and values to 64 KiB: an image that
 * exceeds them is damaged, not passed on to listxattr or getxattr. */
static void test_image_xattr_bounds(void)
{
	static char longest[257];

	memset(longest, 'n', 256);
	memcpy(longest, "user.", 5);
	CHECK_EQ(xattr_of(&(struct xattr_spec){ "user.a", 6, 3 }), 0);
	CHECK_EQ(xattr_of(&(struct xattr_spec){ "user.a", 6, 0 }), 0);
	CHECK_EQ(xattr_of(&(struct xattr_spec){ longest, 255, 65536 }), 0);
	CHECK_EQ(xattr_of(&(struct xattr_spec){ longest, 256, 1 }), -EUCLEAN);
	CHECK(strstr(last_log, "extended attribute 0: name or value too long"));
	CHECK_EQ(xattr_of(&(struct xattr_spec){ "user.a", 6, 65537 }), -EUCLEAN);
	CHECK_EQ(xattr_of(&(struct xattr_spec){ "user.a\0b", 8, 1 }), -EUCLEAN);
	CHECK_EQ(xattr_of(&(struct xattr_spec){ "\0user.a", 7, 1 }), -EUCLEAN);
}

/* The attributes X[0..n) of a hand-made root: 0 when every one reads back, in order, and
 * their names with NULs fit XATTR_LIST_MAX (stp_image_xattr_sizes), else the error. */
static int xattrs_of(const struct xattr_spec *x, unsigned n)
{
	static uint8_t img[IMG_MAX];
	char name[STP_XATTR_NAME_MAX + 1];
	struct stp_image *im;
	struct stp_inode root;
	struct stp_xattr a;
	uint64_t values;
	int rc = open_bytes(img, hand_image(img, x, n, NULL, 0), &im);

	if (rc)
		return rc;
	rc = stp_image_inode(im, STP_ROOT_INO, &root);
	for (unsigned i = 0; !rc && i < n; i++)
		rc = stp_image_xattr(im, &root, i, &a, name);
	if (!rc)
		rc = stp_image_xattr_sizes(im, &root, &values);
	if (!rc && n >= 2) { /* bisection finds the last one, and not what is absent */
		rc = stp_image_xattr_find(im, &root, x[n - 1].name, &a);
		if (!rc && stp_image_xattr_find(im, &root, "zzz", &a) != -ENODATA)
			rc = -EINVAL;
	}
	stp_image_close(im);
	return rc;
}

/* stipple(5): an inode's names strictly increase in byte order, and with a NUL each
 * they fit in 64 KiB; values may share bytes of the pool. */
static void test_image_xattr_order(void)
{
	static const struct xattr_spec sorted[] = { { "user.a", 6, 1 }, { "user.b", 6, 2 } },
		reversed[] = { { "user.b", 6, 1 }, { "user.a", 6, 1 } },
		twice[] = { { "user.a", 6, 1 }, { "user.a", 6, 1 } },
		prefix[] = { { "user.ab", 7, 1 }, { "user.a", 6, 1 } };
	static struct xattr_spec many[257];
	static char names[257][256];

	CHECK_EQ(xattrs_of(sorted, 2), 0);
	CHECK_EQ(xattrs_of(reversed, 2), -EUCLEAN);
	CHECK(strstr(last_log, "extended attribute 1: names out of order or repeated"), "%s",
	      last_log);
	CHECK_EQ(xattrs_of(twice, 2), -EUCLEAN);
	CHECK_EQ(xattrs_of(prefix, 2), -EUCLEAN);
	/* 256 names of 255 bytes and their NULs: exactly 65,536 bytes; one more is over */
	for (unsigned i = 0; i < 257; i++) {
		memset(names[i], 'n', 255);
		snprintf(names[i], 16, "user.%03u", i);
		names[i][8] = 'n';
		many[i] = (struct xattr_spec){ names[i], 255, 0 };
	}
	CHECK_EQ(xattrs_of(many, 256), 0);
	CHECK_EQ(xattrs_of(many, 257), -EUCLEAN);
	CHECK(strstr(last_log, "names of 65792 bytes, over 65536"), "%s", last_log);
}

/* A file shorter than the superblock's image_size, or a block table entry pointing
 * past it, is refused when the image is opened. */
static void test_image_open_bounds(void)
{
	static uint8_t img[IMG_MAX];
	struct stp_image *im = NULL;
	size_t len = hand_image(img, NULL, 0, NULL, 0);

	CHECK_EQ(open_bytes(img, len, &im), 0);
	stp_image_close(im);
	CHECK_EQ(open_bytes(img, len - 1, &im), -EUCLEAN);
	CHECK(strstr(last_log, "truncated"));
	/* image_size 1 TiB, stated consistently, in a file of a few hundred bytes */
	put_le(img, 136, 1ull << 40, 8);
	seal(img);
	CHECK_EQ(open_bytes(img, len, &im), -EUCLEAN);
	CHECK(strstr(last_log, "truncated"));
	/* the 108..111 reserved bytes, on a sound image */
	len = hand_image(img, NULL, 0, NULL, 0);
	img[109] = 1;
	seal(img);
	CHECK_EQ(open_bytes(img, len, &im), -EUCLEAN);
	CHECK(strstr(last_log, "superblock reserved bytes not zero"));

	len = hand_image(img, NULL, 0, &(struct hand_block){ 256, 1 }, 1);
	CHECK_EQ(open_bytes(img, len, &im), 0);
	stp_image_close(im);
	len = hand_image(img, NULL, 0, &(struct hand_block){ 256, 64 }, 1);
	CHECK_EQ(open_bytes(img, len, &im), 0);
	stp_image_close(im);
	/* one byte past the end */
	len = hand_image(img, NULL, 0, &(struct hand_block){ len - 8, 9 }, 1);
	CHECK_EQ(open_bytes(img, len, &im), -EUCLEAN);
	CHECK(strstr(last_log, "block 0: table entry invalid"));
	len = hand_image(img, NULL, 0, &(struct hand_block){ 255, 1 }, 1); /* in the superblock */
	CHECK_EQ(open_bytes(img, len, &im), -EUCLEAN);
}

/* Blocks' stored bytes lie apart, in block order (stipple(5), Block table entry): a
 * second entry on the first one's frame, or before it, is refused at open. */
static void test_image_blocks_apart(void)
{
	static const struct { struct hand_block b[2]; int rc; } cases[] = {
		{ { { 256, 2 }, { 258, 1 } }, 0 },          /* end to end, as mkstipple writes */
		{ { { 256, 2 }, { 300, 1 } }, 0 },          /* a gap is fine */
		{ { { 256, 2 }, { 256, 2 } }, -EUCLEAN },   /* the same frame twice */
		{ { { 256, 2 }, { 257, 1 } }, -EUCLEAN },   /* overlapping by one byte */
		{ { { 258, 2 }, { 256, 1 } }, -EUCLEAN },   /* apart, but out of order */
	};
	static uint8_t img[IMG_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stp_image *im = NULL;
		size_t len = hand_image(img, NULL, 0, cases[i].b, 2);

		CHECK(open_bytes(img, len, &im) == cases[i].rc, "case %zu: %s", i, last_log);
		if (cases[i].rc)
			CHECK(strstr(last_log, "block 1: stored bytes overlap or precede those of "
					       "block 0"), "case %zu: %s", i, last_log);
		stp_image_close(im);
	}
}

int main(void)
{
	stp_log_set_handler(NULL);
	RUN(test_checksum);
	RUN(test_enum_values);
	RUN(test_sb_encode);
	RUN(test_sb_decode);
	RUN(test_sb_rejects);
	RUN(test_sb_bounds);
	RUN(test_sb_signed);
	RUN(test_sb_content_hashes);
	RUN(test_sb_paged);
	RUN(test_sb_hot_blocks);
	RUN(test_sb_bcj_relative);
	RUN(test_sighdr);
	RUN(test_meta_header);
	RUN(test_meta_header_lookups);
	RUN(test_lookup);
	RUN(test_inode);
	RUN(test_dirent);
	RUN(test_name_ok);
	RUN(test_extent);
	RUN(test_xattr);
	RUN(test_blockent);
	RUN(test_reserved_bytes);
	stp_log_set_handler(keep_log);
	RUN(test_image_xattr_bounds);
	RUN(test_image_xattr_order);
	RUN(test_image_open_bounds);
	RUN(test_image_blocks_apart);
	return tap_done();
}
