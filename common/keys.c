/* SPDX-License-Identifier: MIT */
/* Ed25519 keys and signatures of root hashes, through OpenSSL (keys.h). */
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

struct stp_seckey {
	EVP_PKEY *pkey;
	struct stp_pubkey pub;
};

static int pubkey_from_pkey(EVP_PKEY *pkey, struct stp_pubkey *key)
{
	size_t len = sizeof(key->raw);

	if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519 ||
	    !EVP_PKEY_get_raw_public_key(pkey, key->raw, &len) || len != sizeof(key->raw))
		return -EINVAL;
	stp_sign_hash(key->raw, sizeof(key->raw), key->id);
	return 0;
}

/* No pass phrase is ever asked for: an encrypted key fails to load. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf; (void)size; (void)rwflag; (void)u;
	return -1;
}

int stp_sign_parse_pubkey(const char *text, size_t len, struct stp_pubkey *key)
{
	BIO *bio = len <= INT32_MAX ? BIO_new_mem_buf(text, (int)len) : NULL;
	EVP_PKEY *pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL) : NULL;
	int rc = pkey ? pubkey_from_pkey(pkey, key) : -EINVAL;

	EVP_PKEY_free(pkey);
	BIO_free(bio);
	return rc;
}

static int seckey_wrap(EVP_PKEY *pkey, struct stp_seckey **out)
{
	struct stp_seckey *k;

	if (!pkey)
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k) {
		EVP_PKEY_free(pkey);
		return -ENOMEM;
	}
	k->pkey = pkey;
	if (pubkey_from_pkey(pkey, &k->pub)) {
		stp_sign_seckey_free(k);
		return -EINVAL;
	}
	*out = k;
	return 0;
}

int stp_sign_keygen(struct stp_seckey **out)
{
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");

	return pkey ? seckey_wrap(pkey, out) : -EIO;
}

int stp_sign_parse_seckey(const char *text, size_t len, struct stp_seckey **out)
{
	BIO *bio = len <= INT32_MAX ? BIO_new_mem_buf(text, (int)len) : NULL;
	EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;

	BIO_free(bio);
	return seckey_wrap(pkey, out);
}

void stp_sign_seckey_free(struct stp_seckey *key)
{
	if (!key)
		return;
	EVP_PKEY_free(key->pkey);
	free(key);
}

void stp_sign_seckey_pubkey(const struct stp_seckey *key, struct stp_pubkey *pub)
{
	*pub = key->pub;
}

/* Copies what BIO holds into a NUL-terminated buffer of its own. */
static int bio_text(BIO *bio, char **pem, size_t *len)
{
	char *data;
	long n = BIO_get_mem_data(bio, &data);

	if (n <= 0 || !(*pem = malloc((size_t)n + 1)))
		return -ENOMEM;
	memcpy(*pem, data, (size_t)n);
	(*pem)[n] = '\0';
	*len = (size_t)n;
	return 0;
}

int stp_sign_seckey_pem(const struct stp_seckey *key, char **pem, size_t *len)
{
	BIO *bio = BIO_new(BIO_s_secmem());
	int rc = -ENOMEM;

	if (!bio)
		bio = BIO_new(BIO_s_mem());
	/* PKCS#8, unencrypted: what `openssl genpkey` writes */
	if (bio && PEM_write_bio_PKCS8PrivateKey(bio, key->pkey, NULL, NULL, 0, NULL, NULL))
		rc = bio_text(bio, pem, len);
	BIO_free(bio);
	return rc;
}

int stp_sign_pubkey_pem(const struct stp_seckey *key, char **pem, size_t *len)
{
	BIO *bio = BIO_new(BIO_s_mem());
	int rc = -ENOMEM;

	if (bio && PEM_write_bio_PUBKEY(bio, key->pkey))
		rc = bio_text(bio, pem, len);
	BIO_free(bio);
	return rc;
}

#define KEY_FILE_MAX (64u << 10)

/* Reads the key file at PATH into BUF (KEY_FILE_MAX bytes): its length, or -errno. */
static ssize_t read_key_file(const char *path, char *buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	size_t len = 0;
	ssize_t n = 1;

	if (fd < 0)
		return -errno;
	while (len < KEY_FILE_MAX && (n = read(fd, buf + len, KEY_FILE_MAX - len)) > 0)
		len += (size_t)n;
	if (n < 0)
		n = -errno;
	else if (len == KEY_FILE_MAX)
		n = -EFBIG;
	close(fd);
	return n < 0 ? n : (ssize_t)len;
}

int stp_sign_load_seckey(const char *path, struct stp_seckey **out)
{
	char *buf = malloc(KEY_FILE_MAX);
	ssize_t n = buf ? read_key_file(path, buf) : -ENOMEM;
	int rc = n < 0 ? (int)n : stp_sign_parse_seckey(buf, (size_t)n, out);

	if (buf)
		OPENSSL_cleanse(buf, KEY_FILE_MAX);
	free(buf);
	return rc;
}

int stp_sign_load_pubkey(const char *path, struct stp_pubkey *key)
{
	char *buf = malloc(KEY_FILE_MAX);
	ssize_t n = buf ? read_key_file(path, buf) : -ENOMEM;
	int rc = n < 0 ? (int)n : stp_sign_parse_pubkey(buf, (size_t)n, key);

	free(buf);
	return rc;
}

char *stp_sign_key_hex(const uint8_t id[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[64] = '\0';
	return out;
}

int stp_sign_root(const struct stp_seckey *key, const uint8_t root[STP_SIG_HASH_SIZE],
		  uint8_t sig[STP_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t len = STP_SIG_LEN;
	int ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, key->pkey) == 1 &&
		 EVP_DigestSign(ctx, sig, &len, root, STP_SIG_HASH_SIZE) == 1 &&
		 len == STP_SIG_LEN;

	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

int stp_sign_check(const struct stp_pubkey *key, const uint8_t root[STP_SIG_HASH_SIZE],
		   const uint8_t sig[STP_SIG_LEN])
{
	EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, key->raw,
						     sizeof(key->raw));
	EVP_MD_CTX *ctx = pkey ? EVP_MD_CTX_new() : NULL;
	int rc = -ENOMEM;

	if (ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1)
		rc = EVP_DigestVerify(ctx, sig, STP_SIG_LEN, root, STP_SIG_HASH_SIZE) == 1 ?
			     0 : -EKEYREJECTED;
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pkey);
	return rc;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;

/* One hash, one signature made and one checked: whatever OpenSSL loads on first use
 * (its configuration, providers, the random generator) is loaded now. */
static void init_run(void)
{
	struct stp_seckey *k = NULL;
	uint8_t h[STP_SIG_HASH_SIZE], sig[STP_SIG_LEN];

	stp_sign_hash("", 0, h);
	init_rc = stp_sign_keygen(&k);
	if (!init_rc)
		init_rc = stp_sign_root(k, h, sig);
	if (!init_rc)
		init_rc = stp_sign_check(&k->pub, h, sig) ? -EIO : 0;
	stp_sign_seckey_free(k);
}

int stp_sign_init(void)
{
	pthread_once(&init_once, init_run);
	return init_rc;
}
