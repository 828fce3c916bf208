/* SPDX-License-Identifier: MIT */
/* A new signature block for an image: its parts hashed, the root hash signed (sign.h). */
#include "sign.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "imgsrc.h"
#include "log.h"

/* The SHA-256 of LEN stored bytes at OFF of IMG into OUT; BUF holds at least LEN. */
static int hash_range(const struct stp_image *img, uint64_t off, uint64_t len, uint8_t *buf,
		      uint8_t out[STP_SIG_HASH_SIZE])
{
	int rc = stp_imgsrc_read(stp_image_src(img), buf, len, off);

	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(stp_image_path(img), "stored bytes at %llu lie past the end",
				   (unsigned long long)off);
	if (!rc)
		stp_sign_hash(buf, len, out);
	return rc;
}

/* The hash of the stored bytes BE places (block or metadata page number N), which must
 * match their checksum: a signature must not vouch for a part that is already damaged. */
static int hash_stored(const struct stp_image *img, const struct stp_blockent *be,
		       const char *what, uint64_t n, uint8_t *buf, uint8_t out[STP_SIG_HASH_SIZE])
{
	int rc = hash_range(img, be->offset, be->stored_size, buf, out);

	if (!rc && stp_checksum(buf, be->stored_size) != be->checksum)
		rc = STP_CORRUPT(stp_image_path(img), "%s %llu: checksum mismatch", what,
				 (unsigned long long)n);
	return rc;
}

/* Every hash of the block: metadata, dictionary (zero without one), each block, each
 * metadata page. */
static int hash_parts(const struct stp_image *img, uint8_t *hashes)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	size_t cap = stp_image_block_buffer_size(img);
	uint8_t *buf;
	int rc;

	if (cap < sb->meta_stored_size)
		cap = sb->meta_stored_size;
	if (cap < STP_META_PAGE_STORED_MAX)
		cap = STP_META_PAGE_STORED_MAX;
	if (cap < sb->dict_size)
		cap = sb->dict_size;
	if (!(buf = malloc(cap)))
		return -ENOMEM;
	rc = hash_range(img, sb->meta_offset, sb->meta_stored_size, buf,
			hashes + STP_SIG_HASH_META * STP_SIG_HASH_LEN);
	memset(hashes + STP_SIG_HASH_DICT * STP_SIG_HASH_LEN, 0, STP_SIG_HASH_LEN);
	if (!rc && sb->dict_size)
		rc = hash_range(img, sb->dict_offset, sb->dict_size, buf,
				hashes + STP_SIG_HASH_DICT * STP_SIG_HASH_LEN);
	for (uint64_t b = 0; !rc && b < sb->block_count; b++) {
		struct stp_blockent be;

		rc = stp_image_block(img, b, &be);
		if (!rc)
			rc = hash_stored(img, &be, "block", b, buf,
					 hashes + (STP_SIG_HASH_BLOCK0 + b) * STP_SIG_HASH_LEN);
	}
	for (uint64_t p = 0; !rc && p < stp_meta_pages(sb); p++) {
		struct stp_blockent pe;

		rc = stp_image_meta_page(img, p, &pe);
		if (!rc)
			rc = hash_stored(img, &pe, "metadata page", p, buf,
					 hashes + stp_sig_hash_page(sb, p) * STP_SIG_HASH_LEN);
	}
	free(buf);
	return rc;
}

int stp_sign_image(const struct stp_image *img, const struct stp_seckey *key,
		   uint8_t sb_out[STP_SB_SIZE], uint8_t **block, size_t *block_len, uint64_t *keep)
{
	struct stp_superblock sb = *stp_image_sb(img);
	struct stp_sighdr h = { .hash_alg = STP_SIG_HASH_SHA256,
				.nhashes = stp_sig_nhashes(&sb) };
	uint8_t root[STP_SIG_HASH_SIZE], *sig;
	struct stp_pubkey pub;
	int rc;

	*keep = sb.feat_compat & STP_FEAT_COMPAT_SIGNED ? sb.sig_offset : sb.image_size;
	sb.feat_compat |= STP_FEAT_COMPAT_SIGNED;
	sb.sig_offset = *keep;
	sb.sig_size = stp_sig_size(h.nhashes);
	sb.image_size = sb.sig_offset + sb.sig_size;
	if (!(sig = malloc(sb.sig_size)))
		return -ENOMEM;
	rc = hash_parts(img, sig + STP_SIG_HDR_SIZE);
	if (rc) {
		free(sig);
		return rc;
	}
	stp_sign_seckey_pubkey(key, &pub);
	memcpy(h.key_id, pub.id, sizeof(h.key_id));
	stp_sb_encode(&sb, sb_out);
	stp_sighdr_encode(&h, sig);
	stp_sign_root_hash(sb_out, sig, sb.sig_size, root);
	rc = stp_sign_root(key, root, h.sig);
	if (rc) {
		free(sig);
		return rc;
	}
	memcpy(sig + STP_SIG_SIG_OFFSET, h.sig, STP_SIG_LEN);
	*block = sig;
	*block_len = sb.sig_size;
	return 0;
}
