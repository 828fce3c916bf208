/* SPDX-License-Identifier: MIT */
/* Keys, hashes and signatures of signed images, through OpenSSL (sign.h). */
#include "sign.h"

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

#include "image.h"
#include "imgsrc.h"
#include "log.h"
#include "util.h"

struct stp_seckey {
	EVP_PKEY *pkey;
	struct stp_pubkey pub;
};

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

/* The SHA-256 of LEN stored bytes at OFF of IMG into OUT; BUF holds at least LEN. */
static int hash_range(const struct stp_image *img, uint64_t off, uint64_t len, uint8_t *buf,
		      uint8_t out[STP_SIG_HASH_SIZE])
{
	int rc = stp_imgsrc_read(stp_image_src(img), buf, len, off);

	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(stp_image_path(img), "stored bytes at %llu lie past the end",
				   (unsigned long long)off);
	if (!rc)
		stp_sign_hash(buf, len, out);
	return rc;
}

/* The hash of the stored bytes BE places (block or metadata page number N), which must
 * match their checksum: a signature must not vouch for a part that is already damaged. */
static int hash_stored(const struct stp_image *img, const struct stp_blockent *be,
		       const char *what, uint64_t n, uint8_t *buf, uint8_t out[STP_SIG_HASH_SIZE])
{
	int rc = hash_range(img, be->offset, be->stored_size, buf, out);

	if (!rc && stp_checksum(buf, be->stored_size) != be->checksum)
		rc = STP_CORRUPT(stp_image_path(img), "%s %llu: checksum mismatch", what,
				 (unsigned long long)n);
	return rc;
}

/* Every hash of the block: metadata, dictionary (zero without one), each block, each
 * metadata page. */
static int hash_parts(const struct stp_image *img, uint8_t *hashes)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	size_t cap = stp_image_block_buffer_size(img);
	uint8_t *buf;
	int rc;

	if (cap < sb->meta_stored_size)
		cap = sb->meta_stored_size;
	if (cap < STP_META_PAGE_STORED_MAX)
		cap = STP_META_PAGE_STORED_MAX;
	if (cap < sb->dict_size)
		cap = sb->dict_size;
	if (!(buf = malloc(cap)))
		return -ENOMEM;
	rc = hash_range(img, sb->meta_offset, sb->meta_stored_size, buf,
			hashes + STP_SIG_HASH_META * STP_SIG_HASH_LEN);
	memset(hashes + STP_SIG_HASH_DICT * STP_SIG_HASH_LEN, 0, STP_SIG_HASH_LEN);
	if (!rc && sb->dict_size)
		rc = hash_range(img, sb->dict_offset, sb->dict_size, buf,
				hashes + STP_SIG_HASH_DICT * STP_SIG_HASH_LEN);
	for (uint64_t b = 0; !rc && b < sb->block_count; b++) {
		struct stp_blockent be;

		rc = stp_image_block(img, b, &be);
		if (!rc)
			rc = hash_stored(img, &be, "block", b, buf,
					 hashes + (STP_SIG_HASH_BLOCK0 + b) * STP_SIG_HASH_LEN);
	}
	for (uint64_t p = 0; !rc && p < stp_meta_pages(sb); p++) {
		struct stp_blockent pe;

		rc = stp_image_meta_page(img, p, &pe);
		if (!rc)
			rc = hash_stored(img, &pe, "metadata page", p, buf,
					 hashes + stp_sig_hash_page(sb, p) * STP_SIG_HASH_LEN);
	}
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
	memcpy(h.key_id, key->pub.id, sizeof(h.key_id));
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
