/* SPDX-License-Identifier: MIT */
/* SHA-256 of image parts and the root hash, through OpenSSL (hash.h). */
#include "hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "util.h"

#define FD_CHUNK (1u << 20)

/* What the root hash begins with: a signature over these bytes means nothing else. */
static const uint8_t root_domain[24] = "stipple signature v1\n\0\0";

/* The digest, fetched once: an implicit fetch on every block would take a lock. */
static EVP_MD *sha256;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *md(void)
{
	pthread_once(&sha256_once, sha256_fetch);
	return sha256 ? sha256 : EVP_sha256();
}

void stp_sign_hash(const void *p, size_t len, uint8_t out[STP_SIG_HASH_SIZE])
{
	/* cannot fail for SHA-256 but on a broken library: then no hash matches */
	if (!EVP_Digest(p, len, out, NULL, md(), NULL))
		memset(out, 0xff, STP_SIG_HASH_SIZE);
}

struct stp_sha256 *stp_sha256_begin(void)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (ctx && !EVP_DigestInit_ex(ctx, md(), NULL)) {
		EVP_MD_CTX_free(ctx);
		ctx = NULL;
	}
	return (struct stp_sha256 *)ctx;
}

void stp_sha256_update(struct stp_sha256 *s, const void *p, size_t len)
{
	EVP_MD_CTX *ctx = (EVP_MD_CTX *)s;

	if (ctx && len && !EVP_DigestUpdate(ctx, p, len))
		EVP_MD_CTX_reset(ctx); /* its end then fails: no hash matches */
}

void stp_sha256_end(struct stp_sha256 *s, uint8_t out[STP_SIG_HASH_SIZE])
{
	EVP_MD_CTX *ctx = (EVP_MD_CTX *)s;

	if (!ctx || !EVP_DigestFinal_ex(ctx, out, NULL))
		memset(out, 0xff, STP_SIG_HASH_SIZE);
	EVP_MD_CTX_free(ctx);
}

int stp_sign_hash_fd(int fd, uint64_t len, uint8_t out[STP_SIG_HASH_SIZE])
{
	uint8_t *buf = malloc(FD_CHUNK);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int err = buf && ctx && EVP_DigestInit_ex(ctx, md(), NULL) ? 0 : -ENOMEM;

	for (uint64_t off = 0; !err && off < len; off += FD_CHUNK) {
		size_t n = len - off < FD_CHUNK ? (size_t)(len - off) : FD_CHUNK;

		err = stp_pread_full(fd, buf, n, off);
		if (!err && !EVP_DigestUpdate(ctx, buf, n))
			err = -ENOMEM;
	}
	if (!err && !EVP_DigestFinal_ex(ctx, out, NULL))
		err = -ENOMEM;
	free(buf);
	EVP_MD_CTX_free(ctx);
	return err;
}

void stp_sign_root_hash(const uint8_t sb[STP_SB_SIZE], const uint8_t *sig, size_t sig_size,
			uint8_t out[STP_SIG_HASH_SIZE])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (!ctx || !EVP_DigestInit_ex(ctx, md(), NULL) ||
	    !EVP_DigestUpdate(ctx, root_domain, sizeof(root_domain)) ||
	    !EVP_DigestUpdate(ctx, sb, STP_SB_SIZE - 8) ||   /* not the XXH3 checksum */
	    !EVP_DigestUpdate(ctx, sig, STP_SIG_SIG_OFFSET) ||
	    !EVP_DigestUpdate(ctx, sig + STP_SIG_SIG_OFFSET + STP_SIG_LEN,
			      sig_size - STP_SIG_SIG_OFFSET - STP_SIG_LEN) ||
	    !EVP_DigestFinal_ex(ctx, out, NULL))
		memset(out, 0xff, STP_SIG_HASH_SIZE); /* then no signature matches */
	EVP_MD_CTX_free(ctx);
}
