/* SPDX-License-Identifier: MIT */
/* An image opened verified: its signature block read whole, the signature checked against
 * a key, and the signed hashes the reader checks the parts against (stipple(5)). The
 * plain open (super.c) reads only the block's header, and needs no libcrypto. */
#include "image_internal.h"

#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "hash.h"
#include "hasher.h"
#include "imgsrc.h"
#include "keys.h"
#include "log.h"

/* Opened verified, the signed hash number INDEX must be that of LEN bytes at P. */
static int img_hash_ok(const struct stp_image *img, uint64_t index, const void *p, size_t len)
{
	uint8_t h[STP_SIG_HASH_LEN];

	stp_sign_hash(p, len, h);
	return !memcmp(h, img->hashes + index * STP_SIG_HASH_LEN, STP_SIG_HASH_LEN);
}

static const struct img_hash_ops hash_ops = {
	.ok = img_hash_ok,
	.start = stp_hasher_start,
	.wait = stp_hasher_wait,
};

/* The signature block SIG (read whole) holds KEY's signature of the root hash over the
 * superblock as read and the block itself. */
static int check_signature(const struct stp_image *img, const struct stp_pubkey *key,
			   const uint8_t *sig)
{
	uint8_t root[STP_SIG_HASH_SIZE];
	char hex[65];
	int rc;

	stp_sign_root_hash(img->sb_raw, sig, img->sb.sig_size, root);
	rc = stp_sign_check(key, root, sig + STP_SIG_SIG_OFFSET);
	if (rc == -EKEYREJECTED)
		stp_log(STP_LOG_ERR, "%s: the signature by key %s does not match the image",
			img->path, stp_sign_key_hex(key->id, hex));
	return rc;
}

/* Reads the whole signature block and checks the signature (KEY NULL: only its form),
 * keeping the hashes. Nothing the metadata says is read before this. */
int img_read_signature(struct stp_image *img, const struct stp_pubkey *key)
{
	char want[65], got[65];
	struct stp_sighdr h, again;
	uint8_t *sig;
	int rc = img_read_sighdr(img, &h);

	if (rc == -EPROTONOSUPPORT)
		stp_log(STP_LOG_ERR, "%s: signed with hash algorithm %u, which this stipple does "
			"not know", img->path, h.hash_alg);
	if (rc)
		return rc;
	if (key && memcmp(h.key_id, key->id, sizeof(h.key_id))) {
		stp_log(STP_LOG_ERR, "%s: signed by key %s, not by key %s", img->path,
			stp_sign_key_hex(h.key_id, got), stp_sign_key_hex(key->id, want));
		return -EKEYREJECTED;
	}
	/* sig_size: bounded by block_count, which the metadata's 1 GiB bound limits */
	sig = malloc(img->sb.sig_size);
	if (!sig)
		return -ENOMEM;
	rc = stp_imgsrc_read(img->src, sig, img->sb.sig_size, img->sb.sig_offset);
	if (rc == STP_IMGSRC_END)
		rc = STP_CORRUPT(img->path, "signature block lies past the end of the file");
	/* the header decoded above must be the one hashed now, as the superblock is */
	if (!rc && (stp_sighdr_decode(sig, &img->sb, &again) ||
		    memcmp(again.key_id, h.key_id, sizeof(h.key_id))))
		rc = STP_CORRUPT(img->path, "signature block changed while it was read");
	if (!rc && key)
		rc = check_signature(img, key, sig);
	if (rc) {
		free(sig);
		return rc;
	}
	/* the hashes follow the header: keep them where they are */
	memmove(sig, sig + STP_SIG_HDR_SIZE, img->sb.sig_size - STP_SIG_HDR_SIZE);
	img->hashes = sig;
	img->hash = &hash_ops;
	return 0;
}

/* Whether IMG's signed content hash of block BLOCK is that of its stored bytes STORED
 * (LEN) decoded into CONTENT (a block's size), or zeros when it is not a zstd block of
 * one frame. */
static bool content_hash_ok(const struct stp_image *img, uint64_t block,
			    const struct stp_blockent *be, const uint8_t *stored, size_t len,
			    uint8_t *content)
{
	static const uint8_t zero[STP_SIG_HASH_LEN];
	uint64_t at = stp_sig_hash_content(&img->sb, block);
	size_t want = stp_image_block_decoded_size(img, block), clen;

	if (be->codec != STP_CODEC_ZSTD || !stp_delta_one_frame(stored, len))
		return !memcmp(img->hashes + at * STP_SIG_HASH_LEN, zero, sizeof(zero));
	return !stp_delta_content(stored, len, content, want, &clen) && clen == want &&
	       img_hash_ok(img, at, content, clen);
}

int stp_image_check_content(const struct stp_image *img, uint64_t block)
{
	uint8_t *stored, *content;
	struct stp_blockent be;
	size_t len;
	int rc;

	if (!img->hashes || !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_CONTENT_HASHES))
		return 0;
	stored = malloc(stp_image_stored_max(img));
	content = malloc(stp_image_block_size(img));
	rc = stored && content ? stp_image_block(img, block, &be) : -ENOMEM;
	if (!rc)
		rc = stp_image_read_stored(img, STP_SIG_HASH_BLOCK0 + block, stored, &len);
	if (!rc && !content_hash_ok(img, block, &be, stored, len, content))
		rc = STP_CORRUPT(img->path, "block %llu does not match its signed content hash",
				 (unsigned long long)block);
	free(stored);
	free(content);
	return rc;
}

int stp_image_open_src_verified(struct stp_imgsrc *src, const struct stp_pubkey *key,
				struct stp_image **out)
{
	return img_open(src, img_read_signature, key, out);
}

int stp_image_open_verified(int fd, const char *path, const struct stp_pubkey *key,
			    struct stp_image **out)
{
	struct stp_imgsrc *src;
	int rc = stp_imgsrc_open_fd(fd, path, &src);

	return rc ? rc : img_open(src, img_read_signature, key, out);
}
