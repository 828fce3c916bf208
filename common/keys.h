/* SPDX-License-Identifier: MIT */
/*
 * Ed25519 keys in PEM, and signatures of a root hash (hash.h) made and checked with them.
 * All cryptography is OpenSSL's (libcrypto 3); nothing here is a primitive of our own.
 * Below image.h: opening an image verified checks its signature with a struct
 * stp_pubkey; sign.h, above image.h, signs images.
 *
 * Keys: the secret key is PKCS#8 PEM ("BEGIN PRIVATE KEY", as `openssl genpkey
 * -algorithm ed25519` writes it), the public key SubjectPublicKeyInfo PEM ("BEGIN
 * PUBLIC KEY", as `openssl pkey -pubout` writes it).
 *
 * The names keep the stp_sign_ prefix of the signature scheme they serve. Functions
 * return 0 or a negative errno. Everything is thread-safe once stp_sign_init() has
 * returned (OpenSSL 3 is); a struct stp_seckey may be shared read-only.
 */
#ifndef STP_KEYS_H
#define STP_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

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

/* Ed25519 signature of ROOT with KEY. -EIO on an OpenSSL failure. */
int stp_sign_root(const struct stp_seckey *key, const uint8_t root[STP_SIG_HASH_SIZE],
		  uint8_t sig[STP_SIG_LEN]);
/* 0 when SIG is KEY's signature of ROOT, else -EKEYREJECTED (or -ENOMEM). */
int stp_sign_check(const struct stp_pubkey *key, const uint8_t root[STP_SIG_HASH_SIZE],
		   const uint8_t sig[STP_SIG_LEN]);

#endif
