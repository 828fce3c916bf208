/* SPDX-License-Identifier: MIT */
/* A new signature block for an image: its parts hashed, the root hash signed (sign.h). */
#include "sign.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

/* The hash of stored part PART of IMG (stp_image_read_stored) into OUT; BUF holds
 * stp_image_stored_max bytes. The part is checked as a read checks it: a signature must
 * not vouch for a part that is already damaged. A signer hashes an absent dictionary
 * as zeros. */
static int hash_part(const struct stp_image *img, uint64_t part, uint8_t *buf,
		     uint8_t out[STP_SIG_HASH_SIZE])
{
	size_t len;
	int rc = stp_image_read_stored(img, part, buf, &len);

	if (rc)
		return rc;
	if (part == STP_SIG_HASH_DICT && !len)
		memset(out, 0, STP_SIG_HASH_SIZE);
	else
		stp_sign_hash(buf, len, out);
	return 0;
}

/* Every hash of the block: metadata, dictionary, each block, each metadata page. */
static int hash_parts(const struct stp_image *img, uint8_t *hashes)
{
	uint64_t n = stp_sig_nhashes(stp_image_sb(img));
	uint8_t *buf = malloc(stp_image_stored_max(img));
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; !rc && i < n; i++)
		rc = hash_part(img, i, buf, hashes + i * STP_SIG_HASH_LEN);
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
