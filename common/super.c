/* SPDX-License-Identifier: MIT */
/* Opening an image: the superblock checked against the file, then the signature, the
 * metadata and the dictionary; closing it; what an open image tells of itself. */
#include "image_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imgsrc.h"
#include "log.h"
#include "metapages.h"
#include "util.h"

/* Feature names for messages about images we cannot read. */
static const char *feature_name(uint64_t bit)
{
	switch (bit) {
	case STP_FEAT_INCOMPAT_DICT: return "dictionary";
	case STP_FEAT_INCOMPAT_BCJ_X86: return "bcj-x86";
	case STP_FEAT_INCOMPAT_BCJ_ARM64: return "bcj-arm64";
	case STP_FEAT_INCOMPAT_META_PAGES: return "meta-pages";
	case STP_FEAT_INCOMPAT_HOT_BLOCKS: return "hot-blocks";
	case STP_FEAT_INCOMPAT_BCJ_RELATIVE: return "bcj-relative";
	case STP_FEAT_INCOMPAT_LOOKUPS: return "lookups";
	case STP_FEAT_INCOMPAT_CONTENT_HASHES: return "content-hashes";
	default: return "unknown";
	}
}

/* The source must hold all IMAGE_SIZE bytes before anything sized by the superblock is
 * allocated or read: a regular file (or a URL) by its size, a block device (whose
 * st_size is 0) by a read of the last byte. */
static int check_file_size(struct stp_imgsrc *src, const struct stp_superblock *sb)
{
	const char *path = src->name;
	uint8_t last;
	int rc;

	if (src->size != STP_IMGSRC_SIZE_UNKNOWN) {
		if (src->size >= sb->image_size)
			return 0;
		return STP_CORRUPT(path, "truncated: %llu bytes of %llu",
				   (unsigned long long)src->size,
				   (unsigned long long)sb->image_size);
	}
	rc = stp_imgsrc_read(src, &last, 1, sb->image_size - 1);
	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(path, "truncated: the device is shorter than %llu bytes",
				   (unsigned long long)sb->image_size);
	return rc;
}

/* The fewest bytes a stored block takes: a zstd frame its header (6 bytes) and a block
 * header with one byte (4); a raw block all its bytes, 64 KiB at least but for the last
 * hot block and the last block, which may be shorter (BLOCKS_SHORT_MAX). */
#define BLOCK_STORED_MIN 10u
#define BLOCKS_SHORT_MAX 2u

/* Blocks share no stored bytes (stipple(5)), so a file holds at most one block per
 * BLOCK_STORED_MIN of its bytes. The mount sizes its hot-block bookkeeping by the count
 * the superblock claims: a claim of millions in a small file is refused here, before
 * anything is sized by it, rather than when the table is read. */
static int check_block_claim(const char *path, const struct stp_superblock *sb)
{
	uint64_t room = (sb->image_size > STP_SB_SIZE ?
			 (sb->image_size - STP_SB_SIZE) / BLOCK_STORED_MIN : 0) + BLOCKS_SHORT_MAX;

	if (sb->block_count <= room)
		return 0;
	return STP_CORRUPT(path, "%llu blocks (%llu of them hot) claimed, more than %llu bytes "
			   "can store (blocks share no stored bytes, and each takes %u at least)",
			   (unsigned long long)sb->block_count,
			   (unsigned long long)stp_sb_hot_blocks(sb),
			   (unsigned long long)sb->image_size, BLOCK_STORED_MIN);
}

int stp_image_read_superblock(int fd, const char *path, struct stp_superblock *sb)
{
	struct stp_imgsrc src;
	int rc = stp_imgsrc_borrow_fd(&src, fd, path);

	return rc ? rc : stp_image_read_superblock_src(&src, sb);
}

/* Reads the superblock from SRC into RAW once, and decodes and checks those very bytes
 * into SB. */
static int read_sb_raw(struct stp_imgsrc *src, uint8_t raw[STP_SB_SIZE],
		       struct stp_superblock *sb)
{
	const char *path = src->name;
	uint64_t bad = 0;
	const char *why;
	int rc;

	rc = stp_imgsrc_read(src, raw, STP_SB_SIZE, 0);
	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(path, "shorter than a superblock");
	if (rc)
		return rc;
	rc = stp_sb_decode_reason(raw, sb, &bad, &why);
	if (rc == -EPROTONOSUPPORT) {
		if (bad)
			stp_log(STP_LOG_ERR, "%s: uses feature bit %d (%s) that this stipple does not support",
				path, __builtin_ctzll(bad), feature_name(bad));
		else
			stp_log(STP_LOG_ERR, "%s: format version %u is newer than this stipple reads (%u)",
				path, sb->version, STP_FORMAT_VERSION);
		return rc;
	}
	if (rc)
		return STP_CORRUPT(path, "%s", why);
	rc = check_block_claim(path, sb);
	return rc ? rc : check_file_size(src, sb);
}

int stp_image_read_superblock_src(struct stp_imgsrc *src, struct stp_superblock *sb)
{
	uint8_t raw[STP_SB_SIZE];

	return read_sb_raw(src, raw, sb);
}

/* The superblock is read once: a source that changes under the reader cannot have one
 * copy decoded and another checked against the signature. */
static int read_superblock(struct stp_image *img)
{
	return read_sb_raw(img->src, img->sb_raw, &img->sb);
}

/* The header of the signature block, read for every signed image: stp_image_signer. */
int img_read_sighdr(struct stp_image *img, struct stp_sighdr *h)
{
	uint8_t raw[STP_SIG_HDR_SIZE];
	int rc = stp_imgsrc_read(img->src, raw, sizeof(raw), img->sb.sig_offset);

	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(img->path, "signature block lies past the end of the file");
	if (rc)
		return rc;
	rc = stp_sighdr_decode(raw, &img->sb, h);
	if (rc == -EUCLEAN)
		return STP_CORRUPT(img->path, "signature block header invalid");
	img->is_signed = 1;
	memcpy(img->signer, h->key_id, sizeof(img->signer));
	return rc; /* -EPROTONOSUPPORT: a hash this stipple does not know */
}

/* The open every entry point shares; CHECK (sigblock.c) reads the signature block and
 * keeps the hashes, with KEY (or NULL: integrity alone). */
int img_open(struct stp_imgsrc *src, img_sigcheck_fn check, const struct stp_pubkey *key,
	     struct stp_image **out)
{
	struct stp_image *img = calloc(1, sizeof(*img));
	const char *path = src->name;
	int rc = -ENOMEM;

	if (!img) {
		stp_imgsrc_close(src);
		return -ENOMEM;
	}
	img->src = src;
	img->fd = src->fd;
	img->path = strdup(path);
	if (!img->path)
		goto fail;
	rc = read_superblock(img);
	if (!rc && check && !(img->sb.feat_compat & STP_FEAT_COMPAT_SIGNED)) {
		stp_log(STP_LOG_ERR, "%s: the image is not signed", path);
		rc = -ENOKEY;
	}
	if (!rc && check)
		rc = check(img, key);
	else if (!rc && img->sb.feat_compat & STP_FEAT_COMPAT_SIGNED &&
		 (rc = img_read_sighdr(img, &(struct stp_sighdr){ 0 })) == -EPROTONOSUPPORT)
		rc = 0; /* an unknown hash: readable, as an unsigned image is */
	if (!rc)
		rc = img_load_metadata(img);
	if (!rc)
		rc = img_load_dictionary(img);
	if (!rc)
		rc = img_check_block_table(img);
	if (!rc)
		rc = stp_image_inode(img, STP_ROOT_INO, &(struct stp_inode){ 0 });
	if (rc)
		goto fail;
	*out = img;
	return 0;
fail:
	stp_image_close(img);
	return rc;
}

int stp_image_open_src(struct stp_imgsrc *src, struct stp_image **out)
{
	return img_open(src, NULL, NULL, out);
}

int stp_image_open_fd(int fd, const char *path, struct stp_image **out)
{
	struct stp_imgsrc *src;
	int rc = stp_imgsrc_open_fd(fd, path, &src);

	return rc ? rc : img_open(src, NULL, NULL, out);
}

int stp_image_signer(const struct stp_image *img, uint8_t id[32])
{
	if (!img->is_signed)
		return 0;
	memcpy(id, img->signer, sizeof(img->signer));
	return 1;
}

int stp_image_verified(const struct stp_image *img)
{
	return img->hashes != NULL;
}

int stp_image_open(const char *path, struct stp_image **out)
{
	/* a device another user's link leads to is never opened (util.h) */
	int fd = stp_open_if(path, O_RDONLY, stp_node_is_image);

	if (fd == -EINVAL)
		stp_log(STP_LOG_ERR, "%s: not a regular file", path);
	if (fd < 0)
		return fd;
	return stp_image_open_fd(fd, path, out);
}

void stp_image_close(struct stp_image *img)
{
	if (!img)
		return;
	stp_imgsrc_close(img->src);
	ZSTD_freeDDict(img->ddict);
	stp_metapages_destroy(img->pages);
	free(img->pagetab);
	free(img->meta);
	free(img->hashes);
	free(img->path);
	free(img);
}

const struct stp_superblock *stp_image_sb(const struct stp_image *img) { return &img->sb; }
const char *stp_image_path(const struct stp_image *img) { return img->path; }
int stp_image_fd(const struct stp_image *img) { return img->fd; }
struct stp_imgsrc *stp_image_src(const struct stp_image *img) { return img->src; }
uint32_t stp_image_block_size(const struct stp_image *img) { return 1u << img->sb.block_log; }
const struct stp_meta_header *stp_image_meta_header(const struct stp_image *img) { return &img->mh; }
