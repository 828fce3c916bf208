/* SPDX-License-Identifier: MIT */
/* A new signature block for an image: its parts and its blocks' contents hashed, the root
 * hash signed (sign.h). */
#include "sign.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "image.h"
#include "log.h"

/* The hash of stored part PART of IMG (stp_image_read_stored) into OUT; BUF holds
 * stp_image_stored_max bytes. The part is checked as a read checks it: a signature must
 * not vouch for a part that is already damaged. A signer hashes an absent dictionary
 * as zeros. */
static int hash_part(const struct stp_image *img, uint64_t part, uint8_t *buf, size_t *len,
		     uint8_t out[STP_SIG_HASH_SIZE])
{
	int rc = stp_image_read_stored(img, part, buf, len);

	if (rc)
		return rc;
	if (part == STP_SIG_HASH_DICT && !*len)
		memset(out, 0, STP_SIG_HASH_SIZE);
	else
		stp_sign_hash(buf, *len, out);
	return 0;
}

/* The hash of block BLOCK's content (delta.h) from its stored bytes STORED (LEN), into
 * OUT; CONTENT holds a block. Only a zstd block of one frame has a content a delta
 * rebuilds: any other's hash is zeros, which no reader uses. */
static int hash_content(const struct stp_image *img, uint64_t block, const uint8_t *stored,
			size_t len, uint8_t *content, uint8_t out[STP_SIG_HASH_SIZE])
{
	size_t want = stp_image_block_decoded_size(img, block), clen;
	struct stp_blockent be;
	int rc = stp_image_block(img, block, &be);

	memset(out, 0, STP_SIG_HASH_SIZE);
	if (rc || be.codec != STP_CODEC_ZSTD || !stp_delta_one_frame(stored, len))
		return rc;
	rc = stp_delta_content(stored, len, content, want, &clen);
	if (!rc && clen != want)
		rc = -EUCLEAN;
	if (rc == -EUCLEAN)
		stp_log(STP_LOG_ERR, "%s: block %llu does not decode to its size",
			stp_image_path(img), (unsigned long long)block);
	if (!rc)
		stp_sign_hash(content, clen, out);
	return rc;
}

/* Every hash of the block: metadata, dictionary, each block, each metadata page, then
 * each block's content. One block's stored bytes and content in memory at a time. */
static int hash_parts(const struct stp_image *img, uint8_t *hashes)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	uint64_t n = stp_sig_nstored(sb);
	uint8_t *buf = malloc(stp_image_stored_max(img));
	uint8_t *content = malloc(stp_image_block_size(img));
	uint64_t b;
	size_t len;
	int rc = buf && content ? 0 : -ENOMEM;

	for (uint64_t i = 0; !rc && i < n; i++) {
		rc = hash_part(img, i, buf, &len, hashes + i * STP_SIG_HASH_LEN);
		b = i - STP_SIG_HASH_BLOCK0; /* wraps below the blocks */
		if (!rc && i >= STP_SIG_HASH_BLOCK0 && b < sb->block_count)
			rc = hash_content(img, b, buf, len, content,
					  hashes + stp_sig_hash_content(sb, b) * STP_SIG_HASH_LEN);
	}
	free(content);
	free(buf);
	return rc;
}

int stp_sign_image(const struct stp_image *img, const struct stp_seckey *key,
		   uint8_t sb_out[STP_SB_SIZE], uint8_t **block, size_t *block_len, uint64_t *keep)
{
	struct stp_superblock sb = *stp_image_sb(img);
	struct stp_sighdr h = { .hash_alg = STP_SIG_HASH_SHA256 };
	uint8_t root[STP_SIG_HASH_SIZE], *sig;
	struct stp_pubkey pub;
	int rc;

	*keep = sb.feat_compat & STP_FEAT_COMPAT_SIGNED ? sb.sig_offset : sb.image_size;
	sb.feat_compat |= STP_FEAT_COMPAT_SIGNED;
	sb.feat_incompat |= STP_FEAT_INCOMPAT_CONTENT_HASHES;
	h.nhashes = stp_sig_nhashes(&sb);
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
