/* SPDX-License-Identifier: MIT */
/*
 * Signed images (stipple(5), SIGNATURE BLOCK): Ed25519 keys in PEM, the SHA-256 hashes
 * of an image's parts, the root hash over them and its signature. All cryptography is
 * OpenSSL's (libcrypto 3); nothing here is a primitive of our own.
 *
 * Keys: the secret key is PKCS#8 PEM ("BEGIN PRIVATE KEY", as `openssl genpkey
 * -algorithm ed25519` writes it), the public key SubjectPublicKeyInfo PEM ("BEGIN
 * PUBLIC KEY", as `openssl pkey -pubout` writes it).
 *
 * Functions return 0 or a negative errno. Everything is thread-safe once stp_sign_init()
 * has returned (OpenSSL 3 is); a struct stp_seckey may be shared read-only.
 */
#ifndef STP_SIGN_H
#define STP_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define STP_SIG_HASH_SIZE 32

struct stp_image;

struct stp_pubkey {
	uint8_t raw[32]; /* the raw Ed25519 public key */
	uint8_t id[32];  /* SHA-256 of raw: the key id a signature block names */
};

/* An Ed25519 secret key, owned by whoever made it (stp_sign_seckey_free). */
struct stp_seckey;

/* PEM text of a public key (TEXT, LEN bytes, need not be NUL-terminated) -> KEY.
 * -EINVAL: not PEM, or not an Ed25519 key. */
int stp_sign_parse_pubkey(const char *text, size_t len, struct stp_pubkey *key);

/* Makes OpenSSL ready before a sandbox forbids what its first use may need (config
 * files, randomness): a hash and a verification are run once. Idempotent. 0 or
 * -ENOMEM/-EIO. */
int stp_sign_init(void);

/* A new random key pair into *OUT. -ENOMEM or -EIO. */
int stp_sign_keygen(struct stp_seckey **out);
/* PEM text of an unencrypted PKCS#8 Ed25519 secret key -> *OUT. -EINVAL otherwise (an
 * encrypted key is refused: nothing here asks for a pass phrase). */
int stp_sign_parse_seckey(const char *text, size_t len, struct stp_seckey **out);
void stp_sign_seckey_free(struct stp_seckey *key);
/* The public half of KEY. */
void stp_sign_seckey_pubkey(const struct stp_seckey *key, struct stp_pubkey *pub);
/* The PEM text of KEY's secret key, or of its public key, into *PEM (malloc'd, *LEN
 * bytes, NUL-terminated; the caller frees it, and clears the secret one). */
int stp_sign_seckey_pem(const struct stp_seckey *key, char **pem, size_t *len);
int stp_sign_pubkey_pem(const struct stp_seckey *key, char **pem, size_t *len);

/* A key file at PATH (at most 64 KiB of PEM) through the parsers above: -errno of the
 * read, -EFBIG, or -EINVAL (not such a key). */
int stp_sign_load_seckey(const char *path, struct stp_seckey **out);
int stp_sign_load_pubkey(const char *path, struct stp_pubkey *key);

/* The key id as 64 lowercase hex digits and a NUL. Returns OUT. */
char *stp_sign_key_hex(const uint8_t id[32], char out[65]);

/* SHA-256 of LEN bytes at P. */
void stp_sign_hash(const void *p, size_t len, uint8_t out[STP_SIG_HASH_SIZE]);

/* The root hash of a signature block (stipple(5)): over the superblock bytes SB as
 * written, and the block's SIG_SIZE bytes at SIG but its signature. */
void stp_sign_root_hash(const uint8_t sb[STP_SB_SIZE], const uint8_t *sig, size_t sig_size,
			uint8_t out[STP_SIG_HASH_SIZE]);
/* Ed25519 signature of ROOT with KEY. -EIO on an OpenSSL failure. */
int stp_sign_root(const struct stp_seckey *key, const uint8_t root[STP_SIG_HASH_SIZE],
		  uint8_t sig[STP_SIG_LEN]);
/* 0 when SIG is KEY's signature of ROOT, else -EKEYREJECTED (or -ENOMEM). */
int stp_sign_check(const struct stp_pubkey *key, const uint8_t root[STP_SIG_HASH_SIZE],
		   const uint8_t sig[STP_SIG_LEN]);

/*
 * What signing the opened image IMG with KEY writes: the bytes of the image before
 * *KEEP (an unsigned image's image_size, a signed one's sig_offset: its old signature
 * block is dropped) stay as they are, but for the superblock, which becomes SB (the
 * feature bit, sig_offset, sig_size and image_size set); the signature block *BLOCK
 * (malloc'd, *BLOCK_LEN bytes, freed by the caller) follows at *KEEP and ends the image.
 * Reads and hashes every stored part of IMG. The same image and key always give the
 * same bytes (Ed25519 signatures are deterministic). -EIO/-EUCLEAN/-ENOMEM.
 */
int stp_sign_image(const struct stp_image *img, const struct stp_seckey *key,
		   uint8_t sb[STP_SB_SIZE], uint8_t **block, size_t *block_len, uint64_t *keep);

#endif
