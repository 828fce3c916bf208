/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: opening a signed image as a mount with verify= does (common/super.c,
 * stp_image_open_verified), from arbitrary bytes: the superblock and the signature block
 * are parsed before the signature is checked, and that parsing must hold whatever the
 * bytes. Each input is opened against the key of the seed corpus (mutations rarely keep
 * a valid signature: what matters is everything before it) and with no key (integrity
 * only, as stipple check does: the hashes, then the metadata and every block and its
 * content hash; content-hashes.stipple, signed by another key, seeds the latter). An
 * open that succeeds must say the image is verified, and every block must decode or be
 * refused.
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz.h"
#include "image.h"
#include "log.h"
#include "sign.h"

#define MAX_BLOCKS 16u
#define MAX_BLOCK_SIZE (4u << 20)

/* The public key that signed corpus/verified_open/signed.stipple. */
static const char seed_key[] =
	"-----BEGIN PUBLIC KEY-----\n"
	"MCowBQYDK2VwAyEAsYRhpWfJBEHUb4+CmD5wPUPSxDFXlioMAfYkez8QJAY=\n"
	"-----END PUBLIC KEY-----\n";

static void decode_some(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	void *buf;

	if (stp_image_block_size(img) > MAX_BLOCK_SIZE)
		return;
	buf = malloc(stp_image_block_buffer_size(img));
	FUZZ_ASSERT(buf);
	for (uint64_t b = 0; b < sb->block_count && b < MAX_BLOCKS; b++) {
		stp_image_decode_block(img, b, buf);
		stp_image_check_content(img, b); /* content-hashes.stipple: its hashes */
	}
	free(buf);
}

static void open_with(const uint8_t *data, size_t size, const struct stp_pubkey *key)
{
	struct stp_image *img;

	if (stp_image_open_verified(fuzz_image_fd(data, size), "fuzz", key, &img))
		return;
	FUZZ_ASSERT(stp_image_verified(img));
	decode_some(img);
	stp_image_close(img);
}

static void open_both(const uint8_t *data, size_t size)
{
	static struct stp_pubkey key;
	static int have_key = -1;

	if (have_key < 0)
		have_key = !stp_sign_parse_pubkey(seed_key, sizeof(seed_key) - 1, &key);
	FUZZ_ASSERT(have_key == 1);
	open_with(data, size, &key);
	open_with(data, size, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_as_given_and_resealed(data, size, open_both);
	return 0;
}
