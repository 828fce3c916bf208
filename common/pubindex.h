/* SPDX-License-Identifier: MIT */
/*
 * The index of a published image (stipple(5), PUBLISHED INDEX): `stipple publish` splits
 * an image into one file per stored block, named by its SHA-256, and this index, which
 * holds the rest of the image verbatim (superblock, metadata, dictionary, signature
 * block) and a table saying where each block lies and what it hashes to. A reader puts
 * the one-file image back together from the two ("virtual image").
 *
 * The layout, all little-endian:
 *   header (64 bytes), block_count entries (48 bytes each), the image's superblock
 *   (256 bytes), the image's bytes from tail_offset to image_size, and in version 2
 *   delta_count delta entries (160 bytes each): for a block, a delta file that rebuilds
 *   its content from blocks of an earlier release (stp_delta_*, delta.h).
 *
 * Decoders take untrusted bytes and never read past the length they are given; they
 * return 0, -EUCLEAN (damaged) or -EPROTONOSUPPORT (a version or hash this reader does
 * not know), and when REASON is not NULL point *REASON at a static sentence saying which
 * rule failed. Encoders write exactly the record size. Nothing here allocates, prints or
 * keeps state: every function is pure and thread-safe.
 */
#ifndef STP_PUBINDEX_H
#define STP_PUBINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define STP_PUBINDEX_MAGIC "STPINDX1"
#define STP_PUBINDEX_MAGIC_LEN 8u
#define STP_PUBINDEX_VERSION 1u
/* An index with a delta table; written only when it has deltas, so that an index
 * without them stays readable by every reader of version 1. */
#define STP_PUBINDEX_VERSION_DELTAS 2u
#define STP_PUBINDEX_HASH_SHA256 1u
#define STP_PUBINDEX_HASH_LEN 32u
#define STP_PUBINDEX_HDR_SIZE 64u
#define STP_PUBINDEX_ENTRY_SIZE 48u
#define STP_PUBINDEX_DELTA_SIZE 160u
#define STP_PUBINDEX_BASES_MAX 2u
/* the store files a block may take: itself, its delta, its rebuilt content and the
 * delta's bases */
#define STP_PUBINDEX_FILES_PER_BLOCK (3u + STP_PUBINDEX_BASES_MAX)
/* "HH/H64" and its NUL: the block file's name below DIR/blocks/. */
#define STP_PUBINDEX_NAME_MAX 68u

struct stp_pubindex_header {
	uint32_t version;      /* STP_PUBINDEX_VERSION */
	uint32_t hash;         /* STP_PUBINDEX_HASH_SHA256 */
	uint64_t image_size;   /* of the one-file image */
	uint64_t tail_offset;  /* first image byte after the last block's stored bytes */
	uint64_t block_count;  /* entries; the superblock's block_count */
	uint64_t checksum;     /* stp_pubindex_checksum */
	uint64_t delta_count;  /* version 2: delta entries after the tail; else 0 */
};

struct stp_pubindex_entry {
	uint64_t offset;       /* of the block's stored bytes in the image */
	uint32_t stored_size;
	uint8_t sha256[STP_PUBINDEX_HASH_LEN]; /* of the stored bytes: names the block file */
};

/* A delta file for block BLOCK: a zstd frame that decodes, with the content of the
 * BASE_COUNT base blocks one after the other as its prefix, to the block's content
 * (content_size bytes whose SHA-256 is content_sha256). A block's content is what its
 * stored bytes decode to as a zstd frame without a dictionary, before any BCJ filter is
 * undone (a raw block: its stored bytes): a mount can so rebuild it from block files
 * alone, without the metadata of the release the bases came from. */
struct stp_pubindex_delta {
	uint64_t block;
	uint32_t delta_size;   /* of the delta file */
	uint32_t content_size; /* the block's decoded size */
	uint32_t base_count;   /* 1 or 2 */
	uint8_t delta_sha256[STP_PUBINDEX_HASH_LEN];   /* names the delta file */
	uint8_t content_sha256[STP_PUBINDEX_HASH_LEN];
	/* the bases' stored bytes' SHA-256 (their block files); the unused one zero */
	uint8_t base_sha256[STP_PUBINDEX_BASES_MAX][STP_PUBINDEX_HASH_LEN];
};

/* Where the parts lie in an index of COUNT entries (COUNT bounded by the caller). */
static inline uint64_t stp_pubindex_sb_offset(uint64_t count)
{
	return STP_PUBINDEX_HDR_SIZE + count * STP_PUBINDEX_ENTRY_SIZE;
}
static inline uint64_t stp_pubindex_tail_file_offset(uint64_t count)
{
	return stp_pubindex_sb_offset(count) + STP_SB_SIZE;
}

/* The header. encode writes h->checksum as given (compute it with stp_pubindex_checksum
 * over the encoded header and entries, then encode again, or stp_put64 it at byte 40),
 * and delta_count at byte 48 (version 2; it must be 0 for version 1).
 * decode checks the magic, the version and hash (-EPROTONOSUPPORT), the reserved bytes
 * (in version 1, bytes 48..63; in 2, 56..63) and 256 <= tail_offset <= image_size; not
 * the checksum, which covers the entries. */
void stp_pubindex_encode_header(const struct stp_pubindex_header *h,
				uint8_t out[STP_PUBINDEX_HDR_SIZE]);
int stp_pubindex_decode_header(const uint8_t in[STP_PUBINDEX_HDR_SIZE],
			       struct stp_pubindex_header *h, const char **reason);

/* One block entry. decode refuses a reserved field that is not zero. */
void stp_pubindex_encode_entry(const struct stp_pubindex_entry *e,
			       uint8_t out[STP_PUBINDEX_ENTRY_SIZE]);
int stp_pubindex_decode_entry(const uint8_t in[STP_PUBINDEX_ENTRY_SIZE],
			      struct stp_pubindex_entry *e);

/* One delta entry. decode refuses reserved bytes that are not zero, a base_count other
 * than 1 or 2, a second base hash that is not zero when there is one base, and a
 * delta_size or content_size of 0. */
void stp_pubindex_encode_delta(const struct stp_pubindex_delta *d,
			       uint8_t out[STP_PUBINDEX_DELTA_SIZE]);
int stp_pubindex_decode_delta(const uint8_t in[STP_PUBINDEX_DELTA_SIZE],
			      struct stp_pubindex_delta *d);

/* The header's checksum: XXH3-64 of header bytes 0..39 followed by the COUNT encoded
 * entries at ENTRIES (COUNT * STP_PUBINDEX_ENTRY_SIZE bytes). */
uint64_t stp_pubindex_checksum(const uint8_t hdr[STP_PUBINDEX_HDR_SIZE], const uint8_t *entries,
			       uint64_t count);
/* Version 2's: XXH3-64 of header bytes 0..39 and 48..63, the COUNT entries, then the
 * NDELTAS encoded delta entries at DELTAS. */
uint64_t stp_pubindex_checksum2(const uint8_t hdr[STP_PUBINDEX_HDR_SIZE], const uint8_t *entries,
				uint64_t count, const uint8_t *deltas, uint64_t ndeltas);
/* Where the delta table of an index of header H starts. */
static inline uint64_t stp_pubindex_delta_offset(const struct stp_pubindex_header *h)
{
	return stp_pubindex_tail_file_offset(h->block_count) + (h->image_size - h->tail_offset);
}

/* The whole-index rules, on the LEN bytes of an index file at IDX: the header decodes,
 * the checksum matches, LEN is exactly 64 + 48 * N + 256 + (image_size - tail_offset),
 * every entry decodes, the entries start at 256, follow one another without a gap and
 * end at tail_offset, each stored_size is at most what zstd makes of its block's decoded
 * size (and not 0), the superblock copy decodes (stp_sb_decode), and its block_count and
 * image_size are the header's; in version 2, LEN holds delta_count delta entries more,
 * each decodes, their blocks ascend apart below block_count, each content_size is its
 * block's decoded size and each delta_size at most what zstd makes of that size.
 * Bounded by LEN, never by the header's counts alone.
 * On success fills *H and *SB (either may be NULL). -EUCLEAN or -EPROTONOSUPPORT (an
 * unknown index version or hash, or an unknown feature of the superblock) with *REASON. */
int stp_pubindex_check(const uint8_t *idx, size_t len, struct stp_pubindex_header *h,
		       struct stp_superblock *sb, const char **reason);

/* Entry I (below the block_count of an index stp_pubindex_check accepted). */
int stp_pubindex_entry_at(const uint8_t *idx, uint64_t i, struct stp_pubindex_entry *e);
/* Delta entry I (below the delta_count of an index of header H that check accepted). */
int stp_pubindex_delta_at(const uint8_t *idx, const struct stp_pubindex_header *h, uint64_t i,
			  struct stp_pubindex_delta *d);

/* The block file's name below DIR/blocks/: "HH/H64", the lowercase hex SHA-256 after a
 * directory of its first two digits, NUL-terminated. Returns OUT. */
char *stp_pubindex_block_name(const uint8_t sha[STP_PUBINDEX_HASH_LEN],
			      char out[STP_PUBINDEX_NAME_MAX]);

#endif
