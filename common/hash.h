/* SPDX-License-Identifier: MIT */
/*
 * The hashes of signed images (stipple(5), SIGNATURE BLOCK): the SHA-256 of each stored
 * part, and the root hash over the superblock and the signature block that a key signs.
 * OpenSSL's (libcrypto 3), fetched once. Below image.h: the image reader checks parts
 * against these hashes, and sign.h, above it, makes them.
 *
 * The names keep the stp_sign_ prefix of the signature scheme they serve. Thread-safe;
 * those that return nothing fail only on a broken library, and then their hash matches
 * nothing.
 */
#ifndef STP_HASH_H
#define STP_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define STP_SIG_HASH_SIZE 32

/* SHA-256 of LEN bytes at P. */
void stp_sign_hash(const void *p, size_t len, uint8_t out[STP_SIG_HASH_SIZE]);

/* SHA-256 by parts: begin, any number of updates, end (which frees what begin made).
 * begin returns NULL when out of memory; update and end take NULL and end then gives a
 * hash that matches nothing. One context is one thread's at a time. */
struct stp_sha256;
struct stp_sha256 *stp_sha256_begin(void);
void stp_sha256_update(struct stp_sha256 *s, const void *p, size_t len);
void stp_sha256_end(struct stp_sha256 *s, uint8_t out[STP_SIG_HASH_SIZE]);

/* SHA-256 of the LEN bytes of file FD from its start, read (pread, a chunk at a time:
 * a file cut short meanwhile is an error, never a signal; the memory held is one chunk
 * whatever LEN). 0, -ENOMEM, or the read's negative errno. */
int stp_sign_hash_fd(int fd, uint64_t len, uint8_t out[STP_SIG_HASH_SIZE]);

/* The root hash of a signature block (stipple(5)): over the superblock bytes SB as
 * written, and the block's SIG_SIZE bytes at SIG but its signature. */
void stp_sign_root_hash(const uint8_t sb[STP_SB_SIZE], const uint8_t *sig, size_t sig_size,
			uint8_t out[STP_SIG_HASH_SIZE]);

#endif
