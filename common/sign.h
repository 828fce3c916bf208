/* SPDX-License-Identifier: MIT */
/*
 * Signing an image (stipple(5), SIGNATURE BLOCK): the hashes of its stored parts, the
 * root hash over them and its Ed25519 signature, made into a new signature block. Above
 * image.h, which it reads the image through; the keys and hashes it uses are below it
 * (keys.h, hash.h, included here for the callers that sign). Checking a signature is
 * the image reader's (stp_image_open_verified).
 *
 * Functions return 0 or a negative errno; thread-safe once stp_sign_init() has returned.
 */
#ifndef STP_SIGN_H
#define STP_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "hash.h"
#include "keys.h"

struct stp_image;

/*
 * What signing the opened image IMG with KEY writes: the bytes of the image before
 * *KEEP (an unsigned image's image_size, a signed one's sig_offset: its old signature
 * block is dropped) stay as they are, but for the superblock, which becomes SB (the
 * feature bit, sig_offset, sig_size and image_size set); the signature block *BLOCK
 * (malloc'd, *BLOCK_LEN bytes, freed by the caller) follows at *KEEP and ends the image.
 * Reads and hashes every stored part of IMG, and decodes each zstd block, one at a time,
 * for its content hash (the content-hashes feature bit is set). The same image and key always give the
 * same bytes (Ed25519 signatures are deterministic). -EIO/-EUCLEAN/-ENOMEM.
 */
int stp_sign_image(const struct stp_image *img, const struct stp_seckey *key,
		   uint8_t sb[STP_SB_SIZE], uint8_t **block, size_t *block_len, uint64_t *keep);

#endif
