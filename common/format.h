/* SPDX-License-Identifier: MIT */
/*
 * The stipple on-disk format: constants, the decoded form of each record, and the
 * functions that encode and decode them field by field. This is the only place that
 * knows byte offsets; man/stipple.5 documents the same tables. All integers are
 * little-endian.
 *
 * Decoders take untrusted bytes and never read past the length they are given; they
 * return 0 or -EUCLEAN (damaged) / -EPROTONOSUPPORT (valid but unsupported). Encoders
 * write exactly the record size. Every function here is pure and thread-safe.
 */
#ifndef STP_FORMAT_H
#define STP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STP_MAGIC "STIPPLE\0"
#define STP_MAGIC_LEN 8
#define STP_FORMAT_VERSION 1u

#define STP_SB_SIZE 256u           /* superblock, at offset 0 of the image */
#define STP_META_HDR_SIZE 96u      /* header of the decoded metadata */
#define STP_META_MAGIC 0x4154454du /* the bytes "META" */
#define STP_INODE_SIZE 64u
#define STP_DIRENT_SIZE 12u
#define STP_EXTENT_SIZE 24u
#define STP_XATTR_SIZE 16u
#define STP_BLOCKENT_SIZE 24u
#define STP_LOOKUP_SIZE 12u
/* Names a start-up looked up (feature LOOKUPS): priming repeats each lookup at mount, so
 * this bounds the lookups an image can make a mount do. */
#define STP_LOOKUP_MAX 65536u

#define STP_BLOCK_LOG_MIN 16u /* 64 KiB */
#define STP_BLOCK_LOG_MAX 30u /* 1 GiB */
#define STP_NAME_MAX 255u
/* Linux takes a path, and a symbolic link's target, of at most PATH_MAX (4096) bytes with
 * the NUL: symlink(2) refuses a longer target (ENAMETOOLONG), and the kernel reads a
 * target into one page. The path limits of the builder and the readers derive from it. */
#define STP_LINK_MAX 4095u /* bytes of a symbolic link's target, without the NUL */
#define STP_ROOT_INO 0u
/* The page of the hot region: there each file starts at a multiple of it in the stream,
 * so that one stream page holds bytes of one file (stipple(5), HOT REGION). The mount
 * warms and tracks the region, and records reads, in these pages. */
#define STP_HOT_PAGE 4096u

/* Bounds a reader puts on what the superblock promises, before it allocates anything.
 * Decoded metadata: some ten million entries; a stored dictionary: mkstipple trains
 * 112 KiB ones, and zstd's own tools advise about 100 KiB; 16 MiB leaves room for any
 * other writer while keeping what an image can make a reader hold small. */
#define STP_META_SIZE_MAX (1ull << 30)
#define STP_DICT_SIZE_MAX (16ull << 20)
/* A zstd frame yields at most 128 KiB per block of at least 4 bytes (an RLE block):
 * no frame of N bytes decodes to more than N * 32768 bytes. */
#define STP_ZSTD_RATIO_MAX 32768u
/* Extended attributes as Linux bounds them (XATTR_NAME_MAX, XATTR_SIZE_MAX). */
#define STP_XATTR_NAME_MAX 255u
#define STP_XATTR_VALUE_MAX 65536u
/* An inode's attribute names, each with its NUL, fit in Linux's XATTR_LIST_MAX, or
 * listxattr(2) could not return them: so an inode has at most half as many. */
#define STP_XATTR_LIST_MAX 65536u
#define STP_XATTR_COUNT_MAX (STP_XATTR_LIST_MAX / 2)

/* Feature bits. An image that sets an incompatible bit we do not know is refused. */
#define STP_FEAT_INCOMPAT_DICT (1ull << 0)     /* blocks may use the stored dictionary */
#define STP_FEAT_INCOMPAT_BCJ_X86 (1ull << 1)  /* blocks may be x86-64 BCJ filtered */
#define STP_FEAT_INCOMPAT_BCJ_ARM64 (1ull << 2)/* blocks may be AArch64 BCJ filtered */
#define STP_FEAT_INCOMPAT_META_PAGES (1ull << 3)/* metadata in pages decoded on demand */
#define STP_FEAT_INCOMPAT_HOT_BLOCKS (1ull << 4)/* the hot region has blocks of its own size */
#define STP_FEAT_INCOMPAT_BCJ_RELATIVE (1ull << 5)/* filters count from each block's start */
#define STP_FEAT_INCOMPAT_LOOKUPS (1ull << 6)  /* the metadata has a lookup table */
/* The signature block also holds each block's content hash (stipple(5)). Incompatible:
 * a reader that does not know it would find the block the wrong size for block_count. */
#define STP_FEAT_INCOMPAT_CONTENT_HASHES (1ull << 7)
#define STP_FEAT_INCOMPAT_KNOWN \
	(STP_FEAT_INCOMPAT_DICT | STP_FEAT_INCOMPAT_BCJ_X86 | STP_FEAT_INCOMPAT_BCJ_ARM64 | \
	 STP_FEAT_INCOMPAT_META_PAGES | STP_FEAT_INCOMPAT_HOT_BLOCKS | \
	 STP_FEAT_INCOMPAT_BCJ_RELATIVE | STP_FEAT_INCOMPAT_LOOKUPS | \
	 STP_FEAT_INCOMPAT_CONTENT_HASHES)
#define STP_FEAT_RO_COMPAT_KNOWN 0ull
/* A compatible bit: a reader that does not know it reads the image with XXH3 alone. */
#define STP_FEAT_COMPAT_SIGNED (1ull << 0)     /* a signature block ends the image */

/* The signature block (stipple(5), SIGNATURE BLOCK): a fixed header of
 * STP_SIG_HDR_SIZE bytes, then nhashes hashes of STP_SIG_HASH_LEN bytes. */
#define STP_SIG_MAGIC "STPSIGN1"
#define STP_SIG_HDR_SIZE 120u
#define STP_SIG_HASH_LEN 32u
#define STP_SIG_KEY_ID_LEN 32u
#define STP_SIG_LEN 64u            /* an Ed25519 signature */
#define STP_SIG_HASH_SHA256 1u
/* Where the signature lies in the header: the root hash covers the rest. */
#define STP_SIG_SIG_OFFSET 48u
/* The hashes before the blocks': the metadata's, then the dictionary's. */
#define STP_SIG_HASH_META 0u
#define STP_SIG_HASH_DICT 1u
#define STP_SIG_HASH_BLOCK0 2u

/* How a stored block, a metadata page or the metadata is encoded. */
enum stp_codec { STP_CODEC_RAW = 0, STP_CODEC_ZSTD = 1, STP_CODEC_ZSTD_DICT = 2 };
/* meta_codec of an image whose metadata is cut into pages (feature META_PAGES): the
 * stored metadata is then the page table, one STP_BLOCKENT_SIZE entry per page of
 * STP_META_PAGE_SIZE decoded bytes (the last page: the rest), each page stored on its
 * own, raw or as one zstd frame (stipple(5), METADATA PAGES). */
#define STP_META_CODEC_PAGES 2u
#define STP_META_PAGE_SIZE 65536u
/* The most a page may take stored: as for the whole metadata, what zstd's bound allows
 * (ZSTD_compressBound is a little less). */
#define STP_META_PAGE_STORED_MAX (STP_META_PAGE_SIZE + STP_META_PAGE_SIZE / 256 + 64)
/* Filter applied to a block before compression, undone after decompression. */
enum stp_filter { STP_FILTER_NONE = 0, STP_FILTER_X86 = 1, STP_FILTER_ARM64 = 2 };

struct stp_superblock {
	uint32_t version;
	uint64_t feat_compat, feat_ro_compat, feat_incompat;
	uint32_t block_log;     /* block size = 1 << block_log */
	uint32_t hot_block_log; /* feature HOT_BLOCKS: the hot region's blocks; else 0 */
	uint64_t data_size;     /* bytes in the uncompressed data stream */
	uint64_t block_count;   /* ceil(data_size / block size), or with hot blocks: stipple(5) */
	uint64_t hot_size;      /* the first hot_size stream bytes are the hot region */
	uint64_t meta_offset, meta_stored_size, meta_size, meta_checksum;
	uint32_t meta_codec;
	uint64_t dict_offset, dict_size, dict_checksum;
	uint64_t image_size;    /* the whole file: a shorter file is truncated */
	uint32_t inode_count;
	uint64_t sig_offset, sig_size; /* the signature block; both 0 when unsigned */
};

/* The fixed header of the signature block. */
struct stp_sighdr {
	uint32_t hash_alg;                   /* STP_SIG_HASH_SHA256 */
	uint8_t key_id[STP_SIG_KEY_ID_LEN];  /* SHA-256 of the raw public key */
	uint8_t sig[STP_SIG_LEN];            /* Ed25519 signature of the root hash */
	uint64_t nhashes;                    /* stp_sig_nhashes() */
};

/* Header of the decoded metadata: where each table starts and how many records it has.
 * The lookup table is there only with feature LOOKUPS (both fields 0 without it). */
struct stp_meta_header {
	uint32_t inode_count, dirent_count, extent_count, xattr_count, block_count;
	uint64_t strings_size;
	uint64_t inode_off, dirent_off, extent_off, xattr_off, block_off, strings_off;
	uint32_t lookup_count;
	uint64_t lookup_off;
};

struct stp_inode {
	uint32_t mode, uid, gid, nlink;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint64_t size;   /* file bytes, link target length, or directory entry count */
	uint64_t data;   /* REG: first extent; DIR: first dirent; LNK: strings offset; CHR/BLK: rdev */
	uint32_t count;  /* REG: extent count; DIR: dirent count */
	uint32_t xattr_first, xattr_count;
	uint32_t parent; /* DIR: the directory that lists it (root: itself) */
};

struct stp_dirent {
	uint32_t ino;
	uint32_t name_off;
	uint16_t name_len;
	uint8_t dtype; /* DT_* of the target */
};

/* A run of file bytes stored in the data stream. File bytes no extent covers read as 0. */
struct stp_extent {
	uint64_t file_off, stream_off, length;
};

/* A name a recorded start-up looked up in directory DIR, found or not, in the order it
 * did: priming looks it up again so that the kernel knows the answer beforehand. */
struct stp_lookup {
	uint32_t dir;
	uint32_t name_off;
	uint16_t name_len;
};

struct stp_xattr {
	uint32_t name_off, value_off, value_len;
	uint16_t name_len;
};

struct stp_blockent {
	uint64_t offset;      /* of the stored bytes in the image file */
	uint32_t stored_size;
	uint8_t codec, filter;
	uint64_t checksum;    /* XXH3-64 of the stored bytes */
};

/* Little-endian field access. */
static inline uint16_t stp_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t stp_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t stp_le64(const uint8_t *p) { return stp_le32(p) | (uint64_t)stp_le32(p + 4) << 32; }
static inline void stp_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void stp_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void stp_put64(uint8_t *p, uint64_t v)
{
	stp_put32(p, (uint32_t)v);
	stp_put32(p + 4, (uint32_t)(v >> 32));
}

/* The device number of a character or block device inode, as its data field holds it
 * (stipple(5)): the major in the high 32 bits, the minor in the low 32. */
static inline uint64_t stp_rdev_pack(uint32_t major, uint32_t minor)
{
	return (uint64_t)major << 32 | minor;
}
static inline uint32_t stp_rdev_major(uint64_t data) { return (uint32_t)(data >> 32); }
static inline uint32_t stp_rdev_minor(uint64_t data) { return (uint32_t)data; }

/* Superblock. decode checks magic, checksum, reserved bytes, version, feature bits and
 * that every range and size it states is consistent and fits in image_size (the rules
 * of stipple(5)); on an unknown incompatible feature it returns -EPROTONOSUPPORT and sets
 * *bad_feature. decode_reason does the same and, on -EUCLEAN, points *reason at a
 * static string saying which rule failed. */
void stp_sb_encode(const struct stp_superblock *sb, uint8_t out[STP_SB_SIZE]);
int stp_sb_decode(const uint8_t in[STP_SB_SIZE], struct stp_superblock *sb, uint64_t *bad_feature);
int stp_sb_decode_reason(const uint8_t in[STP_SB_SIZE], struct stp_superblock *sb,
			 uint64_t *bad_feature, const char **reason);

/*
 * Where the blocks lie in the data stream (stipple(5), BLOCKS), on a superblock the
 * decoder accepted. Without hot blocks, block i starts at i << block_log. With them,
 * the hot region is cut into blocks of 1 << hot_block_log (its last one shorter), and
 * the rest of the stream, from hot_size on, into blocks of 1 << block_log. Either way
 * only the last block of each run may be short.
 */
static inline uint64_t stp_sb_hot_blocks(const struct stp_superblock *sb)
{
	if (!sb->hot_block_log)
		return 0;
	return (sb->hot_size >> sb->hot_block_log) +
	       !!(sb->hot_size & ((1ull << sb->hot_block_log) - 1));
}

/* The most a stored block of DECODED bytes may take: what zstd's bound allows, as for
 * the metadata; a raw block takes exactly DECODED. */
static inline uint64_t stp_block_stored_max(uint64_t decoded)
{
	return decoded + (decoded >> 8) + 64;
}

/* The stream offset where blocks of the full size begin. */
static inline uint64_t stp_sb_cold_start(const struct stp_superblock *sb)
{
	return sb->hot_block_log ? sb->hot_size : 0;
}

/* The block that holds stream byte OFF (below data_size). */
static inline uint64_t stp_sb_block_of(const struct stp_superblock *sb, uint64_t off)
{
	uint64_t cold = stp_sb_cold_start(sb);

	if (off < cold)
		return off >> sb->hot_block_log;
	return stp_sb_hot_blocks(sb) + ((off - cold) >> sb->block_log);
}

/* The stream offset of block BLOCK's first byte (BLOCK below block_count). */
static inline uint64_t stp_sb_block_start(const struct stp_superblock *sb, uint64_t block)
{
	uint64_t hot = stp_sb_hot_blocks(sb);

	if (block < hot)
		return block << sb->hot_block_log;
	return stp_sb_cold_start(sb) + ((block - hot) << sb->block_log);
}

/* The position a filtered block BLOCK is filtered from: its stream offset, or 0 with
 * the bcj-relative bit, so that the same bytes filter alike wherever the block lies. */
static inline uint64_t stp_sb_filter_start(const struct stp_superblock *sb, uint64_t block)
{
	if (sb->feat_incompat & STP_FEAT_INCOMPAT_BCJ_RELATIVE)
		return 0;
	return stp_sb_block_start(sb, block);
}

/* Where stream byte OFF lies within its block. */
static inline uint64_t stp_sb_block_offset(const struct stp_superblock *sb, uint64_t off)
{
	return off - stp_sb_block_start(sb, stp_sb_block_of(sb, off));
}

/* Decoded bytes of block BLOCK: 0 past the last one. */
static inline uint64_t stp_sb_block_len(const struct stp_superblock *sb, uint64_t block)
{
	uint64_t start, end;

	if (block >= sb->block_count)
		return 0;
	start = stp_sb_block_start(sb, block);
	if (block < stp_sb_hot_blocks(sb)) {
		end = start + (1ull << sb->hot_block_log);
		return (end < sb->hot_size ? end : sb->hot_size) - start;
	}
	end = start + (1ull << sb->block_log);
	return (end < sb->data_size ? end : sb->data_size) - start;
}

/* The stream offset just past block BLOCK's last byte. */
static inline uint64_t stp_sb_block_end(const struct stp_superblock *sb, uint64_t block)
{
	return stp_sb_block_start(sb, block) + stp_sb_block_len(sb, block);
}

/* The number of metadata pages of an image: 0 unless its metadata is paged. The
 * superblock decoder bounded meta_size, so this is at most 2^14. */
static inline uint64_t stp_meta_pages(const struct stp_superblock *sb)
{
	if (sb->meta_codec != STP_META_CODEC_PAGES)
		return 0;
	return (sb->meta_size + STP_META_PAGE_SIZE - 1) / STP_META_PAGE_SIZE;
}

/* Decoded bytes of metadata page PAGE (below stp_meta_pages): all but the last are full. */
static inline size_t stp_meta_page_len(const struct stp_superblock *sb, uint64_t page)
{
	uint64_t start = page * STP_META_PAGE_SIZE;

	return sb->meta_size - start < STP_META_PAGE_SIZE ? (size_t)(sb->meta_size - start)
							   : STP_META_PAGE_SIZE;
}

/* The hashes of a signed image's stored parts: metadata (the page table when paged),
 * dictionary, each block, then each metadata page. */
static inline uint64_t stp_sig_nstored(const struct stp_superblock *sb)
{
	return sb->block_count + 2 + stp_meta_pages(sb);
}
/* All its hashes: the stored parts', then with CONTENT_HASHES each block's content's. */
static inline uint64_t stp_sig_nhashes(const struct stp_superblock *sb)
{
	return stp_sig_nstored(sb) +
	       (sb->feat_incompat & STP_FEAT_INCOMPAT_CONTENT_HASHES ? sb->block_count : 0);
}
/* Where the hash of block BLOCK's content (delta.h) is among them, with CONTENT_HASHES. */
static inline uint64_t stp_sig_hash_content(const struct stp_superblock *sb, uint64_t block)
{
	return stp_sig_nstored(sb) + block;
}
/* Where the hash of metadata page PAGE is among them. */
static inline uint64_t stp_sig_hash_page(const struct stp_superblock *sb, uint64_t page)
{
	return STP_SIG_HASH_BLOCK0 + sb->block_count + page;
}

/* Bytes of a signature block of NHASHES hashes. */
static inline uint64_t stp_sig_size(uint64_t nhashes)
{
	return STP_SIG_HDR_SIZE + nhashes * STP_SIG_HASH_LEN;
}

/* The signature block's header. decode checks the magic, the reserved bytes, that the
 * hash is one this reader knows (-EPROTONOSUPPORT otherwise) and that nhashes is
 * stp_sig_nhashes of SB (whose decoder bounded sig_size by the same rule). */
void stp_sighdr_encode(const struct stp_sighdr *h, uint8_t out[STP_SIG_HDR_SIZE]);
int stp_sighdr_decode(const uint8_t in[STP_SIG_HDR_SIZE], const struct stp_superblock *sb,
		      struct stp_sighdr *h);

void stp_meta_header_encode(const struct stp_meta_header *h, uint8_t out[STP_META_HDR_SIZE]);
/* Checks every table lies inside meta_len bytes, aligned, without overlap of the header,
 * and that the lookup table, when there is one, has at most STP_LOOKUP_MAX records. */
int stp_meta_header_decode(const uint8_t *in, size_t meta_len, struct stp_meta_header *h);

void stp_inode_encode(const struct stp_inode *ino, uint8_t out[STP_INODE_SIZE]);
/* The record decoders below return -EUCLEAN when a reserved byte is not zero: a later
 * format may give those bytes a meaning this reader would miss. */
int stp_inode_decode(const uint8_t in[STP_INODE_SIZE], struct stp_inode *ino);
void stp_dirent_encode(const struct stp_dirent *d, uint8_t out[STP_DIRENT_SIZE]);
int stp_dirent_decode(const uint8_t in[STP_DIRENT_SIZE], struct stp_dirent *d);
/* Whether NAME (LEN bytes) is a name a directory entry may hold (stipple(5)): 1 to
 * STP_NAME_MAX bytes, no '/' or NUL, not "." or "..". The readers refuse any other, and
 * mkstipple writes no other. */
bool stp_name_ok(const char *name, size_t len);
void stp_extent_encode(const struct stp_extent *e, uint8_t out[STP_EXTENT_SIZE]);
void stp_extent_decode(const uint8_t in[STP_EXTENT_SIZE], struct stp_extent *e);
void stp_xattr_encode(const struct stp_xattr *x, uint8_t out[STP_XATTR_SIZE]);
int stp_xattr_decode(const uint8_t in[STP_XATTR_SIZE], struct stp_xattr *x);
void stp_lookup_encode(const struct stp_lookup *l, uint8_t out[STP_LOOKUP_SIZE]);
int stp_lookup_decode(const uint8_t in[STP_LOOKUP_SIZE], struct stp_lookup *l);
void stp_blockent_encode(const struct stp_blockent *b, uint8_t out[STP_BLOCKENT_SIZE]);
int stp_blockent_decode(const uint8_t in[STP_BLOCKENT_SIZE], struct stp_blockent *b);

/* The order of names in a directory: as bytes, a shorter name before the longer one it
 * begins. Negative, zero or positive, as memcmp. */
int stp_name_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* XXH3-64 of a byte range: the checksum of every checksummed part of an image. */
uint64_t stp_checksum(const void *p, size_t len);

#endif
