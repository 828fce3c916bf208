/* SPDX-License-Identifier: MIT */
/* Where a file's bytes lie: its extents, the block table, and the stored bytes of a
 * block, read and checked. */
#include "image_internal.h"

#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "imgsrc.h"
#include "log.h"

int stp_image_extent(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		     struct stp_extent *out)
{
	uint8_t rec[STP_EXTENT_SIZE];
	int rc;

	if (index >= inode->count)
		return -ENOENT;
	rc = img_meta_read(img, img->mh.extent_off + (inode->data + index) * STP_EXTENT_SIZE,
		       sizeof(rec), rec);
	if (rc)
		return rc;
	stp_extent_decode(rec, out);
	if (out->length == 0 || !img_range_ok(out->stream_off, out->length, img->sb.data_size) ||
	    !img_range_ok(out->file_off, out->length, inode->size))
		return STP_CORRUPT(img->path, "extent %llu out of range",
				   (unsigned long long)(inode->data + index));
	return 0;
}

int stp_image_extent_find(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t off, uint32_t *index)
{
	uint32_t lo = 0, hi = inode->count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct stp_extent e;
		int rc = stp_image_extent(img, inode, mid, &e);

		if (rc)
			return rc;
		if (e.file_off + e.length <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	*index = lo;
	return 0;
}

size_t stp_image_block_decoded_size(const struct stp_image *img, uint64_t block)
{
	return (size_t)stp_sb_block_len(&img->sb, block);
}

/* Where stored blocks must end: before the signature block when there is one. */
uint64_t img_data_end(const struct stp_image *img)
{
	return img->sb.feat_compat & STP_FEAT_COMPAT_SIGNED ? img->sb.sig_offset : img->sb.image_size;
}

int stp_image_block(const struct stp_image *img, uint64_t block, struct stp_blockent *out)
{
	size_t size = stp_image_block_decoded_size(img, block);
	uint8_t rec[STP_BLOCKENT_SIZE];
	int rc;

	if (block >= img->sb.block_count)
		return -EINVAL;
	rc = img_meta_read(img, img->mh.block_off + block * STP_BLOCKENT_SIZE, sizeof(rec), rec);
	if (rc)
		return rc;
	if (stp_blockent_decode(rec, out) ||
	    out->offset < STP_SB_SIZE ||
	    !img_range_ok(out->offset, out->stored_size, img_data_end(img)) ||
	    out->codec > STP_CODEC_ZSTD_DICT || out->filter > STP_FILTER_ARM64 ||
	    (out->codec == STP_CODEC_RAW && out->stored_size != size) ||
	    (out->codec == STP_CODEC_ZSTD_DICT && !img->ddict) ||
	    (out->filter == STP_FILTER_X86 && !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_BCJ_X86)) ||
	    (out->filter == STP_FILTER_ARM64 &&
	     !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_BCJ_ARM64)) ||
	    (out->codec == STP_CODEC_ZSTD_DICT && !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_DICT)) ||
	    out->stored_size > ZSTD_compressBound(size) ||
	    (out->codec != STP_CODEC_RAW && out->stored_size < size / STP_ZSTD_RATIO_MAX))
		return STP_CORRUPT(img->path, "block %llu: table entry invalid",
				   (unsigned long long)block);
	return 0;
}

/* Every block's stored bytes must lie in the image and suit its codec, as the block
 * table promises: found at open rather than on the read that needs the block. Linear
 * in the table (24 bytes a block), which grows with the data, not with the files.
 * The blocks' stored ranges follow one another in block order, apart (stipple(5)):
 * no two blocks share a frame, so what a reader decodes is bounded by what the file
 * stores, and each frame is decoded once by a pass over the blocks. */
int img_check_block_table(struct stp_image *img)
{
	uint64_t end = STP_SB_SIZE; /* the end of the stored bytes of the block before */

	for (uint64_t b = 0; b < img->sb.block_count; b++) {
		struct stp_blockent be;
		int rc = stp_image_block(img, b, &be);

		if (rc)
			return rc;
		if (be.offset < end)
			return STP_CORRUPT(img->path, "block %llu: stored bytes overlap or precede "
					   "those of block %llu", (unsigned long long)b,
					   (unsigned long long)b - 1);
		end = be.offset + be.stored_size;
	}
	return 0;
}

/* A stored part of the image (stipple(5)): what vouches for it, and how messages name it. */
struct img_part img_block_part(uint64_t block, const struct stp_blockent *be)
{
	/* the signed hash, when opened verified, stands for the checksum: it is the stronger */
	return (struct img_part){ .what = "block", .n = block, .be = *be, .hash_only = true,
				  .hash = STP_SIG_HASH_BLOCK0 + block };
}

/* The whole metadata (paged: its page table) or the dictionary, as the superblock places
 * them (stp_sb_decode bounded them, and check_file_size put them inside the file). */
static struct img_part sb_part(const struct stp_image *img, uint64_t part)
{
	const struct stp_superblock *sb = &img->sb;

	if (part == STP_SIG_HASH_DICT)
		return (struct img_part){ .what = "dictionary", .n = IMG_PART_ONLY,
					  .hash = part, .be = { .offset = sb->dict_offset,
					  .stored_size = sb->dict_size, .checksum = sb->dict_checksum } };
	return (struct img_part){ .what = sb->meta_codec == STP_META_CODEC_PAGES ?
				  "metadata page table" : "metadata", .n = IMG_PART_ONLY, .hash = part,
				  .be = { .offset = sb->meta_offset, .stored_size = sb->meta_stored_size,
					  .checksum = sb->meta_checksum } };
}

int img_part_find(const struct stp_image *img, uint64_t part, struct img_part *p)
{
	const struct stp_superblock *sb = &img->sb;
	uint64_t n = part - STP_SIG_HASH_BLOCK0;
	struct stp_blockent be;
	int rc;

	if (part < STP_SIG_HASH_BLOCK0) {
		*p = sb_part(img, part);
		return 0;
	}
	if (n < sb->block_count) {
		rc = stp_image_block(img, n, &be);
		*p = img_block_part(n, &be);
		return rc;
	}
	n -= sb->block_count;
	rc = stp_image_meta_page(img, n, &be);
	*p = (struct img_part){ .what = "metadata page", .n = n, .be = be, .hash = part };
	return rc;
}

/* How messages name P: "block 7", "dictionary". */
static const char *part_name(const struct img_part *p, char name[64])
{
	if (p->n == IMG_PART_ONLY)
		return p->what;
	snprintf(name, 64, "%s %llu", p->what, (unsigned long long)p->n);
	return name;
}

int img_part_read(const struct stp_image *img, const struct img_part *p, void *buf)
{
	char name[64];
	int rc = stp_imgsrc_read(img->src, buf, p->be.stored_size, p->be.offset);

	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(img->path, "%s lies past the end of the file", part_name(p, name));
	return rc;
}

int img_part_check(const struct stp_image *img, const struct img_part *p, const void *buf)
{
	char name[64];

	if (!(img->hashes && p->hash_only) && stp_checksum(buf, p->be.stored_size) != p->be.checksum)
		return STP_CORRUPT(img->path, "%s%s checksum mismatch", part_name(p, name),
				   p->n == IMG_PART_ONLY ? "" : ":");
	if (img->hashes && !img->hash->ok(img, p->hash, buf, p->be.stored_size))
		return STP_CORRUPT(img->path, "%s does not match its signed hash", part_name(p, name));
	return 0;
}

int img_part_load(const struct stp_image *img, const struct img_part *p, void *buf)
{
	int rc = img_part_read(img, p, buf);

	return rc ? rc : img_part_check(img, p, buf);
}

size_t stp_image_stored_max(const struct stp_image *img)
{
	size_t max = ZSTD_compressBound(stp_image_block_size(img));

	max = max < STP_META_PAGE_STORED_MAX ? STP_META_PAGE_STORED_MAX : max;
	max = max < img->sb.meta_stored_size ? img->sb.meta_stored_size : max;
	return max < img->sb.dict_size ? img->sb.dict_size : max;
}

int stp_image_read_stored(const struct stp_image *img, uint64_t part, void *buf, size_t *len)
{
	struct img_part p;
	int rc;

	*len = 0;
	if (part >= stp_sig_nstored(&img->sb))
		return -EINVAL;
	if (part == STP_SIG_HASH_DICT && !img->sb.dict_size)
		return 0; /* no dictionary: nothing stored, nothing to check */
	rc = img_part_find(img, part, &p);
	if (!rc)
		rc = img_part_load(img, &p, buf);
	if (!rc)
		*len = p.be.stored_size;
	return rc;
}

int stp_image_read_block(const struct stp_image *img, uint64_t block, void *buf,
			 struct stp_blockent *be)
{
	struct img_part p;
	int rc = stp_image_block(img, block, be);

	if (rc)
		return rc;
	p = img_block_part(block, be);
	return img_part_load(img, &p, buf);
}
