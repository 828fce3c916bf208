/* SPDX-License-Identifier: MIT */
/* Encoding and decoding of every on-disk record, field by field (see stipple.5). */
#include "format.h"

#include <errno.h>
#include <string.h>
#include <xxhash.h>

#include "log.h"

uint64_t stp_checksum(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

int stp_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

/* Superblock field offsets. */
enum {
	SB_MAGIC = 0, SB_VERSION = 8, SB_SIZE = 12, SB_FEAT_COMPAT = 16, SB_FEAT_RO = 24,
	SB_FEAT_INCOMPAT = 32, SB_BLOCK_LOG = 40, SB_HOT_BLOCK_LOG = 44, SB_DATA_SIZE = 48,
	SB_BLOCK_COUNT = 56, SB_HOT_SIZE = 64, SB_META_OFF = 72, SB_META_STORED = 80,
	SB_META_SIZE = 88, SB_META_SUM = 96, SB_META_CODEC = 104, SB_RESERVED2 = 108,
	SB_DICT_OFF = 112, SB_DICT_SIZE = 120, SB_DICT_SUM = 128, SB_IMAGE_SIZE = 136,
	SB_INODE_COUNT = 144, SB_SIG_OFF = 148, SB_SIG_SIZE = 156, SB_TAIL = 164,
	SB_CHECKSUM = 248,
};

/* True when LEN bytes at P are all zero: reserved space, refused otherwise. */
static int zeroed(const uint8_t *p, size_t len)
{
	while (len--)
		if (*p++)
			return 0;
	return 1;
}

void stp_sb_encode(const struct stp_superblock *sb, uint8_t out[STP_SB_SIZE])
{
	memset(out, 0, STP_SB_SIZE);
	memcpy(out + SB_MAGIC, STP_MAGIC, STP_MAGIC_LEN);
	stp_put32(out + SB_VERSION, sb->version);
	stp_put32(out + SB_SIZE, STP_SB_SIZE);
	stp_put64(out + SB_FEAT_COMPAT, sb->feat_compat);
	stp_put64(out + SB_FEAT_RO, sb->feat_ro_compat);
	stp_put64(out + SB_FEAT_INCOMPAT, sb->feat_incompat);
	stp_put32(out + SB_BLOCK_LOG, sb->block_log);
	stp_put32(out + SB_HOT_BLOCK_LOG, sb->hot_block_log);
	stp_put64(out + SB_DATA_SIZE, sb->data_size);
	stp_put64(out + SB_BLOCK_COUNT, sb->block_count);
	stp_put64(out + SB_HOT_SIZE, sb->hot_size);
	stp_put64(out + SB_META_OFF, sb->meta_offset);
	stp_put64(out + SB_META_STORED, sb->meta_stored_size);
	stp_put64(out + SB_META_SIZE, sb->meta_size);
	stp_put64(out + SB_META_SUM, sb->meta_checksum);
	stp_put32(out + SB_META_CODEC, sb->meta_codec);
	stp_put64(out + SB_DICT_OFF, sb->dict_offset);
	stp_put64(out + SB_DICT_SIZE, sb->dict_size);
	stp_put64(out + SB_DICT_SUM, sb->dict_checksum);
	stp_put64(out + SB_IMAGE_SIZE, sb->image_size);
	stp_put32(out + SB_INODE_COUNT, sb->inode_count);
	stp_put64(out + SB_SIG_OFF, sb->sig_offset);
	stp_put64(out + SB_SIG_SIZE, sb->sig_size);
	stp_put64(out + SB_CHECKSUM, stp_checksum(out, SB_CHECKSUM));
}

/* The largest of the bytes the metadata needs for its header and either table whose
 * length the superblock fixes: inodes and block entries (tables may share bytes, so
 * the sum is not a bound). Counts are at most 2^32, so nothing here overflows. */
static uint64_t meta_size_min(const struct stp_superblock *sb)
{
	uint64_t inodes = (uint64_t)sb->inode_count * STP_INODE_SIZE;
	uint64_t blocks = sb->block_count * STP_BLOCKENT_SIZE;

	return STP_META_HDR_SIZE + (inodes > blocks ? inodes : blocks);
}

/* True when LEN bytes at OFF lie after the superblock and end within IMAGE_SIZE. */
static int range_in_image(uint64_t off, uint64_t len, uint64_t image_size)
{
	return off >= STP_SB_SIZE && off <= image_size && len <= image_size - off;
}

/* The hot blocks' size: within range and below the block size with their feature bit,
 * 0 without it. */
static const char *sb_check_hot_blocks(const struct stp_superblock *sb)
{
	if (!(sb->feat_incompat & STP_FEAT_INCOMPAT_HOT_BLOCKS))
		return sb->hot_block_log ? "hot_block_log set without its feature bit" : NULL;
	if (sb->hot_block_log < STP_BLOCK_LOG_MIN || sb->hot_block_log >= sb->block_log)
		return "hot_block_log out of range";
	return NULL;
}

/* block_count = the hot blocks + ceil((data_size - cold start) / block size), without
 * overflow; the metadata holds block numbers in 32 bits. */
static int block_count_matches(const struct stp_superblock *sb)
{
	uint64_t cold = sb->data_size - stp_sb_cold_start(sb), bs = 1ull << sb->block_log;
	uint64_t hot = stp_sb_hot_blocks(sb);

	return sb->block_count <= UINT32_MAX && sb->block_count >= hot &&
	       cold / bs == sb->block_count - hot - (cold % bs != 0);
}

/* The size and range rules of stipple(5), in its order: NULL, or the one that fails. */
static const char *sb_check_sizes(const struct stp_superblock *sb)
{
	const char *why;

	if (sb->block_log < STP_BLOCK_LOG_MIN || sb->block_log > STP_BLOCK_LOG_MAX)
		return "block_log out of range";
	if (sb->hot_size > sb->data_size)
		return "hot_size exceeds data_size";
	if ((why = sb_check_hot_blocks(sb)))
		return why;
	if (!block_count_matches(sb))
		return "block_count does not match data_size";
	if (sb->inode_count == 0)
		return "no inodes";
	if (sb->meta_codec > STP_META_CODEC_PAGES)
		return "unknown metadata codec";
	if ((sb->meta_codec == STP_META_CODEC_PAGES) !=
	    !!(sb->feat_incompat & STP_FEAT_INCOMPAT_META_PAGES))
		return "paged metadata without its feature bit, or the bit without it";
	if (!range_in_image(sb->meta_offset, sb->meta_stored_size, sb->image_size))
		return "metadata lies outside image_size";
	if (sb->meta_size > STP_META_SIZE_MAX)
		return "metadata size above 1 GiB";
	if (sb->meta_size < meta_size_min(sb))
		return "metadata size too small for inode_count and block_count";
	if (sb->meta_codec == STP_META_CODEC_PAGES &&
	    sb->meta_stored_size != stp_meta_pages(sb) * STP_BLOCKENT_SIZE)
		return "page table size does not match meta_size";
	if (sb->meta_codec == STP_CODEC_RAW && sb->meta_stored_size != sb->meta_size)
		return "raw metadata: stored size differs from decoded size";
	/* a zstd frame: no compressor makes one longer than this (ZSTD_compressBound), and
	 * none decodes to more than STP_ZSTD_RATIO_MAX times its length */
	if (sb->meta_codec == STP_CODEC_ZSTD &&
	    sb->meta_stored_size > sb->meta_size + (sb->meta_size >> 8) + 64)
		return "stored metadata larger than zstd makes it";
	if (sb->meta_codec == STP_CODEC_ZSTD &&
	    sb->meta_size / STP_ZSTD_RATIO_MAX > sb->meta_stored_size)
		return "metadata size more than its stored size can decode to";
	if (sb->dict_size > STP_DICT_SIZE_MAX)
		return "dictionary above 16 MiB";
	if (sb->dict_size && !range_in_image(sb->dict_offset, sb->dict_size, sb->image_size))
		return "dictionary lies outside image_size";
	return NULL;
}

/* The signature block, when the feature bit says there is one, comes last: after the
 * metadata and the dictionary (and so the data), ending at image_size. sb_check_sizes
 * bounded the counts, so nothing here overflows. */
static const char *sb_check_signature(const struct stp_superblock *sb)
{
	if (!(sb->feat_compat & STP_FEAT_COMPAT_SIGNED)) {
		if (sb->sig_offset || sb->sig_size)
			return "signature fields set on an unsigned image";
		if (sb->feat_incompat & STP_FEAT_INCOMPAT_CONTENT_HASHES)
			return "content-hashes feature bit set on an unsigned image";
		return NULL;
	}
	if (sb->sig_size != stp_sig_size(stp_sig_nhashes(sb)))
		return "signature size does not match block_count, the metadata pages and the "
		       "content-hashes bit";
	if (sb->sig_offset < STP_SB_SIZE || sb->sig_size > sb->image_size ||
	    sb->sig_offset != sb->image_size - sb->sig_size)
		return "signature block does not end the image";
	if (sb->meta_offset + sb->meta_stored_size > sb->sig_offset ||
	    (sb->dict_size && sb->dict_offset + sb->dict_size > sb->sig_offset))
		return "signature block overlaps the metadata or the dictionary";
	return NULL;
}

/* The fixed fields: magic, checksum, record size and reserved bytes. */
static const char *sb_check_frame(const uint8_t in[STP_SB_SIZE])
{
	if (memcmp(in + SB_MAGIC, STP_MAGIC, STP_MAGIC_LEN))
		return "not a stipple image (bad magic)";
	if (stp_le64(in + SB_CHECKSUM) != stp_checksum(in, SB_CHECKSUM))
		return "superblock checksum mismatch";
	if (stp_le32(in + SB_SIZE) != STP_SB_SIZE)
		return "superblock size is not 256";
	if (!zeroed(in + SB_RESERVED2, 4) ||
	    !zeroed(in + SB_TAIL, SB_CHECKSUM - SB_TAIL))
		return "superblock reserved bytes not zero";
	return NULL;
}

int stp_sb_decode_reason(const uint8_t in[STP_SB_SIZE], struct stp_superblock *sb,
			 uint64_t *bad_feature, const char **reason)
{
	uint64_t unknown;
	const char *why;

	*bad_feature = 0;
	*reason = NULL;
	if ((why = sb_check_frame(in))) {
		*reason = why;
		return -EUCLEAN;
	}
	sb->version = stp_le32(in + SB_VERSION);
	if (sb->version != STP_FORMAT_VERSION)
		return -EPROTONOSUPPORT;
	sb->feat_compat = stp_le64(in + SB_FEAT_COMPAT);
	sb->feat_ro_compat = stp_le64(in + SB_FEAT_RO);
	sb->feat_incompat = stp_le64(in + SB_FEAT_INCOMPAT);
	unknown = (sb->feat_incompat & ~STP_FEAT_INCOMPAT_KNOWN) |
		  (sb->feat_ro_compat & ~STP_FEAT_RO_COMPAT_KNOWN);
	if (unknown) {
		*bad_feature = unknown & -unknown;
		return -EPROTONOSUPPORT;
	}
	sb->block_log = stp_le32(in + SB_BLOCK_LOG);
	sb->hot_block_log = stp_le32(in + SB_HOT_BLOCK_LOG);
	sb->data_size = stp_le64(in + SB_DATA_SIZE);
	sb->block_count = stp_le64(in + SB_BLOCK_COUNT);
	sb->hot_size = stp_le64(in + SB_HOT_SIZE);
	sb->meta_offset = stp_le64(in + SB_META_OFF);
	sb->meta_stored_size = stp_le64(in + SB_META_STORED);
	sb->meta_size = stp_le64(in + SB_META_SIZE);
	sb->meta_checksum = stp_le64(in + SB_META_SUM);
	sb->meta_codec = stp_le32(in + SB_META_CODEC);
	sb->dict_offset = stp_le64(in + SB_DICT_OFF);
	sb->dict_size = stp_le64(in + SB_DICT_SIZE);
	sb->dict_checksum = stp_le64(in + SB_DICT_SUM);
	sb->image_size = stp_le64(in + SB_IMAGE_SIZE);
	sb->inode_count = stp_le32(in + SB_INODE_COUNT);
	sb->sig_offset = stp_le64(in + SB_SIG_OFF);
	sb->sig_size = stp_le64(in + SB_SIG_SIZE);
	*reason = sb_check_sizes(sb);
	if (!*reason)
		*reason = sb_check_signature(sb);
	return *reason ? -EUCLEAN : 0;
}

int stp_sb_decode(const uint8_t in[STP_SB_SIZE], struct stp_superblock *sb, uint64_t *bad_feature)
{
	const char *reason;

	return stp_sb_decode_reason(in, sb, bad_feature, &reason);
}

/* Signature block header field offsets. */
enum {
	SG_MAGIC = 0, SG_HASH_ALG = 8, SG_RESERVED = 12, SG_KEY_ID = 16, SG_SIG = 48,
	SG_NHASHES = 112,
};
_Static_assert(SG_SIG == STP_SIG_SIG_OFFSET, "the root hash skips the signature");

void stp_sighdr_encode(const struct stp_sighdr *h, uint8_t out[STP_SIG_HDR_SIZE])
{
	memset(out, 0, STP_SIG_HDR_SIZE);
	memcpy(out + SG_MAGIC, STP_SIG_MAGIC, 8);
	stp_put32(out + SG_HASH_ALG, h->hash_alg);
	memcpy(out + SG_KEY_ID, h->key_id, STP_SIG_KEY_ID_LEN);
	memcpy(out + SG_SIG, h->sig, STP_SIG_LEN);
	stp_put64(out + SG_NHASHES, h->nhashes);
}

int stp_sighdr_decode(const uint8_t in[STP_SIG_HDR_SIZE], const struct stp_superblock *sb,
		      struct stp_sighdr *h)
{
	if (memcmp(in + SG_MAGIC, STP_SIG_MAGIC, 8) || !zeroed(in + SG_RESERVED, 4))
		return -EUCLEAN;
	h->hash_alg = stp_le32(in + SG_HASH_ALG);
	memcpy(h->key_id, in + SG_KEY_ID, STP_SIG_KEY_ID_LEN);
	memcpy(h->sig, in + SG_SIG, STP_SIG_LEN);
	h->nhashes = stp_le64(in + SG_NHASHES);
	if (h->nhashes != stp_sig_nhashes(sb))
		return -EUCLEAN;
	return h->hash_alg == STP_SIG_HASH_SHA256 ? 0 : -EPROTONOSUPPORT;
}

/* Metadata header field offsets. */
enum {
	MH_MAGIC = 0, MH_INODES = 4, MH_DIRENTS = 8, MH_EXTENTS = 12, MH_XATTRS = 16,
	MH_BLOCKS = 20, MH_STRINGS_SIZE = 24, MH_INODE_OFF = 32, MH_DIRENT_OFF = 40,
	MH_EXTENT_OFF = 48, MH_XATTR_OFF = 56, MH_BLOCK_OFF = 64, MH_STRINGS_OFF = 72,
	MH_LOOKUPS = 80, MH_RESERVED = 84, MH_LOOKUP_OFF = 88,
};

void stp_meta_header_encode(const struct stp_meta_header *h, uint8_t out[STP_META_HDR_SIZE])
{
	memset(out, 0, STP_META_HDR_SIZE);
	stp_put32(out + MH_MAGIC, STP_META_MAGIC);
	stp_put32(out + MH_INODES, h->inode_count);
	stp_put32(out + MH_DIRENTS, h->dirent_count);
	stp_put32(out + MH_EXTENTS, h->extent_count);
	stp_put32(out + MH_XATTRS, h->xattr_count);
	stp_put32(out + MH_BLOCKS, h->block_count);
	stp_put64(out + MH_STRINGS_SIZE, h->strings_size);
	stp_put64(out + MH_INODE_OFF, h->inode_off);
	stp_put64(out + MH_DIRENT_OFF, h->dirent_off);
	stp_put64(out + MH_EXTENT_OFF, h->extent_off);
	stp_put64(out + MH_XATTR_OFF, h->xattr_off);
	stp_put64(out + MH_BLOCK_OFF, h->block_off);
	stp_put64(out + MH_STRINGS_OFF, h->strings_off);
	stp_put32(out + MH_LOOKUPS, h->lookup_count);
	stp_put64(out + MH_LOOKUP_OFF, h->lookup_off);
}

/* A table of COUNT records of SIZE bytes at OFF must sit after the header, 8-aligned,
 * inside LEN bytes. */
static int table_fits(uint64_t off, uint64_t count, uint64_t size, size_t len)
{
	return off >= STP_META_HDR_SIZE && off % 8 == 0 && off <= len &&
	       count <= (len - off) / size;
}

int stp_meta_header_decode(const uint8_t *in, size_t meta_len, struct stp_meta_header *h)
{
	if (meta_len < STP_META_HDR_SIZE || stp_le32(in + MH_MAGIC) != STP_META_MAGIC ||
	    !zeroed(in + MH_RESERVED, MH_LOOKUP_OFF - MH_RESERVED))
		return -EUCLEAN;
	h->inode_count = stp_le32(in + MH_INODES);
	h->dirent_count = stp_le32(in + MH_DIRENTS);
	h->extent_count = stp_le32(in + MH_EXTENTS);
	h->xattr_count = stp_le32(in + MH_XATTRS);
	h->block_count = stp_le32(in + MH_BLOCKS);
	h->strings_size = stp_le64(in + MH_STRINGS_SIZE);
	h->inode_off = stp_le64(in + MH_INODE_OFF);
	h->dirent_off = stp_le64(in + MH_DIRENT_OFF);
	h->extent_off = stp_le64(in + MH_EXTENT_OFF);
	h->xattr_off = stp_le64(in + MH_XATTR_OFF);
	h->block_off = stp_le64(in + MH_BLOCK_OFF);
	h->strings_off = stp_le64(in + MH_STRINGS_OFF);
	h->lookup_count = stp_le32(in + MH_LOOKUPS);
	h->lookup_off = stp_le64(in + MH_LOOKUP_OFF);
	if (!table_fits(h->inode_off, h->inode_count, STP_INODE_SIZE, meta_len) ||
	    !table_fits(h->dirent_off, h->dirent_count, STP_DIRENT_SIZE, meta_len) ||
	    !table_fits(h->extent_off, h->extent_count, STP_EXTENT_SIZE, meta_len) ||
	    !table_fits(h->xattr_off, h->xattr_count, STP_XATTR_SIZE, meta_len) ||
	    !table_fits(h->block_off, h->block_count, STP_BLOCKENT_SIZE, meta_len) ||
	    !table_fits(h->strings_off, h->strings_size, 1, meta_len))
		return -EUCLEAN;
	/* no lookup table: both fields 0, as in images from before it */
	if ((h->lookup_count || h->lookup_off) &&
	    (h->lookup_count > STP_LOOKUP_MAX ||
	     !table_fits(h->lookup_off, h->lookup_count, STP_LOOKUP_SIZE, meta_len)))
		return -EUCLEAN;
	return 0;
}

void stp_inode_encode(const struct stp_inode *ino, uint8_t out[STP_INODE_SIZE])
{
	memset(out, 0, STP_INODE_SIZE);
	stp_put32(out + 0, ino->mode);
	stp_put32(out + 4, ino->uid);
	stp_put32(out + 8, ino->gid);
	stp_put32(out + 12, ino->nlink);
	stp_put64(out + 16, (uint64_t)ino->mtime_sec);
	stp_put32(out + 24, ino->mtime_nsec);
	stp_put32(out + 28, ino->xattr_count);
	stp_put64(out + 32, ino->size);
	stp_put64(out + 40, ino->data);
	stp_put32(out + 48, ino->count);
	stp_put32(out + 52, ino->xattr_first);
	stp_put32(out + 56, ino->parent);
}

int stp_inode_decode(const uint8_t in[STP_INODE_SIZE], struct stp_inode *ino)
{
	ino->mode = stp_le32(in + 0);
	ino->uid = stp_le32(in + 4);
	ino->gid = stp_le32(in + 8);
	ino->nlink = stp_le32(in + 12);
	ino->mtime_sec = (int64_t)stp_le64(in + 16);
	ino->mtime_nsec = stp_le32(in + 24);
	ino->xattr_count = stp_le32(in + 28);
	ino->size = stp_le64(in + 32);
	ino->data = stp_le64(in + 40);
	ino->count = stp_le32(in + 48);
	ino->xattr_first = stp_le32(in + 52);
	ino->parent = stp_le32(in + 56);
	return zeroed(in + 60, 4) ? 0 : -EUCLEAN;
}

void stp_dirent_encode(const struct stp_dirent *d, uint8_t out[STP_DIRENT_SIZE])
{
	stp_put32(out + 0, d->ino);
	stp_put32(out + 4, d->name_off);
	stp_put16(out + 8, d->name_len);
	out[10] = d->dtype;
	out[11] = 0;
}

int stp_dirent_decode(const uint8_t in[STP_DIRENT_SIZE], struct stp_dirent *d)
{
	d->ino = stp_le32(in + 0);
	d->name_off = stp_le32(in + 4);
	d->name_len = stp_le16(in + 8);
	d->dtype = in[10];
	return in[11] ? -EUCLEAN : 0;
}

/* One pass over the bytes: names are short, and a listing checks each. */
bool stp_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > STP_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] == '/' || name[i] == '\0')
			return false;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

void stp_extent_encode(const struct stp_extent *e, uint8_t out[STP_EXTENT_SIZE])
{
	stp_put64(out + 0, e->file_off);
	stp_put64(out + 8, e->stream_off);
	stp_put64(out + 16, e->length);
}

void stp_extent_decode(const uint8_t in[STP_EXTENT_SIZE], struct stp_extent *e)
{
	e->file_off = stp_le64(in + 0);
	e->stream_off = stp_le64(in + 8);
	e->length = stp_le64(in + 16);
}

void stp_xattr_encode(const struct stp_xattr *x, uint8_t out[STP_XATTR_SIZE])
{
	stp_put32(out + 0, x->name_off);
	stp_put32(out + 4, x->value_off);
	stp_put32(out + 8, x->value_len);
	stp_put16(out + 12, x->name_len);
	stp_put16(out + 14, 0);
}

int stp_xattr_decode(const uint8_t in[STP_XATTR_SIZE], struct stp_xattr *x)
{
	x->name_off = stp_le32(in + 0);
	x->value_off = stp_le32(in + 4);
	x->value_len = stp_le32(in + 8);
	x->name_len = stp_le16(in + 12);
	return zeroed(in + 14, 2) ? 0 : -EUCLEAN;
}

void stp_lookup_encode(const struct stp_lookup *l, uint8_t out[STP_LOOKUP_SIZE])
{
	stp_put32(out + 0, l->dir);
	stp_put32(out + 4, l->name_off);
	stp_put16(out + 8, l->name_len);
	stp_put16(out + 10, 0);
}

int stp_lookup_decode(const uint8_t in[STP_LOOKUP_SIZE], struct stp_lookup *l)
{
	l->dir = stp_le32(in + 0);
	l->name_off = stp_le32(in + 4);
	l->name_len = stp_le16(in + 8);
	return stp_le16(in + 10) ? -EUCLEAN : 0;
}

void stp_blockent_encode(const struct stp_blockent *b, uint8_t out[STP_BLOCKENT_SIZE])
{
	stp_put64(out + 0, b->offset);
	stp_put32(out + 8, b->stored_size);
	out[12] = b->codec;
	out[13] = b->filter;
	stp_put16(out + 14, 0);
	stp_put64(out + 16, b->checksum);
}

int stp_blockent_decode(const uint8_t in[STP_BLOCKENT_SIZE], struct stp_blockent *b)
{
	b->offset = stp_le64(in + 0);
	b->stored_size = stp_le32(in + 8);
	b->codec = in[12];
	b->filter = in[13];
	b->checksum = stp_le64(in + 16);
	return zeroed(in + 14, 2) ? 0 : -EUCLEAN;
}
