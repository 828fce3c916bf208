/* SPDX-License-Identifier: MIT */
/* Keys, the root hash and signatures (common/keys.c, hash.c, sign.c), what a verified
 * open of a signed image hashes, and stp_image_read_stored. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "format.h"
#include "imgsrc.h"
#include "log.h"
#include "memimage.h"
#include "sign.h"

#define CHECK_EQ(a, b) CHECK((a) == (b), "%lld != %lld", (long long)(a), (long long)(b))

/* SHA-256 test vector of FIPS 180-2 ("abc"). */
static void test_hash(void)
{
	static const uint8_t abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
		0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
		0xf2, 0x00, 0x15, 0xad,
	};
	uint8_t h[32];

	stp_sign_hash("abc", 3, h);
	CHECK(!memcmp(h, abc, 32));
}

/* A file's hash read a chunk at a time: FIPS 180-2's million 'a's (under one chunk), a
 * file over three chunks against its bytes hashed at once, and a file shorter than
 * asked refused. */
static void test_hash_fd(void)
{
	static const uint8_t million_a[32] = {
		0xcd, 0xc7, 0x6e, 0x5c, 0x99, 0x14, 0xfb, 0x92, 0x81, 0xa1, 0xc7, 0xe2, 0x84, 0xd7,
		0x3e, 0x67, 0xf1, 0x80, 0x9a, 0x48, 0xa4, 0x97, 0x20, 0x0e, 0x04, 0x6d, 0x39, 0xcc,
		0xc7, 0x11, 0x2c, 0xd0,
	};
	const size_t big = (3u << 20) + 5;
	char path[] = "/dev/shm/stipple-hashfd-XXXXXX";
	uint8_t *buf = malloc(big), h[32], want[32];
	int fd = mkstemp(path);

	CHECK(buf && fd >= 0);
	if (!buf || fd < 0)
		return;
	unlink(path);
	memset(buf, 'a', 1000000);
	CHECK(pwrite(fd, buf, 1000000, 0) == 1000000);
	CHECK(!stp_sign_hash_fd(fd, 1000000, h) && !memcmp(h, million_a, 32));
	for (size_t i = 0; i < big; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	CHECK(pwrite(fd, buf, big, 0) == (ssize_t)big);
	stp_sign_hash(buf, big, want);
	CHECK(!stp_sign_hash_fd(fd, big, h) && !memcmp(h, want, 32));
	CHECK(stp_sign_hash_fd(fd, big + 1, h) < 0);
	close(fd);
	free(buf);
}

/* A signature block of 3 blocks (5 hashes) and a superblock, made as stp_sign_image
 * makes them. */
#define NHASH 5u
#define SIG_SIZE (STP_SIG_HDR_SIZE + NHASH * STP_SIG_HASH_LEN)

struct signed_bytes {
	uint8_t sb[STP_SB_SIZE];
	uint8_t sig[SIG_SIZE];
};

static void make_signed(const struct stp_seckey *key, struct signed_bytes *s)
{
	struct stp_superblock sb = { .version = 1, .feat_compat = STP_FEAT_COMPAT_SIGNED,
				     .block_log = 16, .data_size = 3 << 16, .block_count = 3,
				     .meta_offset = 4096, .meta_stored_size = 200, .meta_size = 200,
				     .inode_count = 1, .sig_offset = 8192, .sig_size = SIG_SIZE,
				     .image_size = 8192 + SIG_SIZE };
	struct stp_sighdr h = { .hash_alg = STP_SIG_HASH_SHA256, .nhashes = NHASH };
	struct stp_pubkey pub;
	uint8_t root[32];

	stp_sign_seckey_pubkey(key, &pub);
	memcpy(h.key_id, pub.id, 32);
	stp_sb_encode(&sb, s->sb);
	for (unsigned i = 0; i < NHASH; i++)
		stp_sign_hash(&i, sizeof(i), s->sig + STP_SIG_HDR_SIZE + i * STP_SIG_HASH_LEN);
	stp_sighdr_encode(&h, s->sig);
	stp_sign_root_hash(s->sb, s->sig, SIG_SIZE, root);
	CHECK_EQ(stp_sign_root(key, root, h.sig), 0);
	memcpy(s->sig + STP_SIG_SIG_OFFSET, h.sig, STP_SIG_LEN);
}

/* 0 when S carries a valid signature by PUB over its bytes. */
static int check_signed(const struct stp_pubkey *pub, const struct signed_bytes *s)
{
	uint8_t root[32];

	stp_sign_root_hash(s->sb, s->sig, SIG_SIZE, root);
	return stp_sign_check(pub, root, s->sig + STP_SIG_SIG_OFFSET);
}

static void test_round_trip(void)
{
	struct stp_seckey *key = NULL, *again = NULL;
	struct stp_pubkey pub, parsed;
	struct stp_superblock sb;
	struct stp_sighdr h;
	struct signed_bytes s;
	char *pem = NULL;
	size_t len;
	uint64_t bad;

	CHECK_EQ(stp_sign_init(), 0);
	CHECK_EQ(stp_sign_keygen(&key), 0);
	if (!key)
		return;
	stp_sign_seckey_pubkey(key, &pub);
	/* the PEM texts parse back to the same key */
	CHECK_EQ(stp_sign_pubkey_pem(key, &pem, &len), 0);
	CHECK(pem && strstr(pem, "-----BEGIN PUBLIC KEY-----"));
	CHECK_EQ(stp_sign_parse_pubkey(pem, len, &parsed), 0);
	CHECK(!memcmp(&parsed, &pub, sizeof(pub)));
	CHECK_EQ(stp_sign_parse_pubkey(pem, len / 2, &parsed), -EINVAL);
	free(pem);
	CHECK_EQ(stp_sign_seckey_pem(key, &pem, &len), 0);
	CHECK(pem && strstr(pem, "-----BEGIN PRIVATE KEY-----"));
	CHECK_EQ(stp_sign_parse_seckey(pem, len, &again), 0);
	CHECK_EQ(stp_sign_parse_pubkey(pem, len, &parsed), -EINVAL); /* not a public key */
	free(pem);
	if (again) {
		stp_sign_seckey_pubkey(again, &parsed);
		CHECK(!memcmp(&parsed, &pub, sizeof(pub)));
	}
	stp_sign_seckey_free(again);

	make_signed(key, &s);
	CHECK_EQ(stp_sb_decode(s.sb, &sb, &bad), 0);
	CHECK_EQ(stp_sighdr_decode(s.sig, &sb, &h), 0);
	CHECK(!memcmp(h.key_id, pub.id, 32));
	CHECK_EQ(check_signed(&pub, &s), 0);
	/* Ed25519 is deterministic: the same bytes sign the same way */
	{
		struct signed_bytes t;

		make_signed(key, &t);
		CHECK(!memcmp(&s, &t, sizeof(s)));
	}
	stp_sign_seckey_free(key);
}

/* A flipped bit anywhere the root hash covers, or in the signature, is refused; the
 * superblock checksum (248..255) is XXH3's business, outside the root hash. */
static void test_flips(void)
{
	struct stp_seckey *key = NULL, *other = NULL;
	struct stp_pubkey pub, opub;
	struct signed_bytes s, t;
	unsigned refused = 0, total = 0;

	CHECK_EQ(stp_sign_keygen(&key), 0);
	CHECK_EQ(stp_sign_keygen(&other), 0);
	if (!key || !other)
		return;
	stp_sign_seckey_pubkey(key, &pub);
	stp_sign_seckey_pubkey(other, &opub);
	make_signed(key, &s);
	CHECK_EQ(check_signed(&opub, &s), -EKEYREJECTED);   /* another key */
	for (size_t i = 0; i < STP_SB_SIZE - 8 + SIG_SIZE; i++) {
		uint8_t bit = (uint8_t)(1u << (i % 8));

		t = s;
		if (i < STP_SB_SIZE - 8)
			t.sb[i] ^= bit;
		else
			t.sig[i - (STP_SB_SIZE - 8)] ^= bit;
		total++;
		if (check_signed(&pub, &t) == -EKEYREJECTED)
			refused++;
		else
			CHECK(0, "a flip of byte %zu was accepted", i);
	}
	CHECK_EQ(refused, total);
	stp_sign_seckey_free(key);
	stp_sign_seckey_free(other);
}

/* A source over the LEN bytes at BYTES that hands out FIRST_SB on its first read at
 * offset 0 and the real superblock on every later one: a file changed by someone else
 * between two reads. */
struct swap_src {
	struct stp_imgsrc src; /* first: the image reads through it */
	const uint8_t *bytes, *first_sb;
	size_t len;
	unsigned sb_reads;
};

static int swap_pread(struct stp_imgsrc *src, void *buf, size_t len, uint64_t off)
{
	struct swap_src *w = (struct swap_src *)src;

	if (off > w->len || len > w->len - off)
		return STP_IMGSRC_END;
	memcpy(buf, w->bytes + off, len);
	if (off == 0 && w->sb_reads++ == 0)
		memcpy(buf, w->first_sb, len < STP_SB_SIZE ? len : STP_SB_SIZE);
	return 0;
}

/* Opens BYTES (LEN) verified by PUB through a swap_src whose first superblock is FIRST;
 * *READS: how often offset 0 was read. */
static int open_swapped(const uint8_t *bytes, size_t len, const uint8_t *first,
			const struct stp_pubkey *pub, unsigned *reads)
{
	struct swap_src w = { .src = { .pread = swap_pread, .size = len, .name = "swapped",
				       .fd = -1 },
			      .bytes = bytes, .first_sb = first, .len = len };
	struct stp_image *img = NULL;
	int rc = stp_image_open_src_verified(&w.src, pub, &img);

	stp_image_close(img);
	*reads = w.sb_reads;
	return rc;
}

/* The signed image of a one-file tree, made by stp_sign_image: *LEN bytes, the
 * caller's. */
static uint8_t *signed_image(const struct stp_seckey *key, size_t *len)
{
	static const struct stp_extent ext = { .file_off = 0, .stream_off = 0, .length = 100 };
	const struct mem_file f = { "a", 100, &ext, 1 };
	uint8_t sb[STP_SB_SIZE], *block = NULL, *out = NULL;
	struct stp_image *img = NULL;
	size_t block_len = 0;
	uint64_t keep = 0;

	CHECK_EQ(mem_image_open(&f, 1, 100, &img), 0);
	if (img && !stp_sign_image(img, key, sb, &block, &block_len, &keep) &&
	    (out = malloc(keep + block_len)) &&
	    !stp_pread_full(stp_image_fd(img), out, keep, 0)) {
		memcpy(out, sb, sizeof(sb));
		memcpy(out + keep, block, block_len);
		*len = keep + block_len;
	}
	stp_image_close(img);
	free(block);
	return out;
}

/* The superblock a verified open decodes is the copy it hashes: a superblock changed
 * between two reads of offset 0 (a field the signature covers, resealed) is refused,
 * and offset 0 is read once. */
static void test_open_hashes_what_it_decodes(void)
{
	struct stp_seckey *key = NULL;
	struct stp_superblock sb;
	struct stp_pubkey pub;
	uint8_t forged[STP_SB_SIZE], *img = NULL;
	size_t len = 0;
	unsigned reads;
	uint64_t bad;

	CHECK_EQ(stp_sign_keygen(&key), 0);
	if (key)
		img = signed_image(key, &len);
	CHECK(img);
	if (!img) {
		stp_sign_seckey_free(key);
		return;
	}
	stp_sign_seckey_pubkey(key, &pub);
	CHECK_EQ(open_swapped(img, len, img, &pub, &reads), 0);
	CHECK_EQ(reads, 1);
	/* dict_checksum means nothing without a dictionary: the forged copy still opens
	 * as an unsigned image would, and only the signature can tell */
	CHECK_EQ(stp_sb_decode(img, &sb, &bad), 0);
	sb.dict_checksum ^= 1;
	stp_sb_encode(&sb, forged);
	CHECK_EQ(open_swapped(img, len, forged, &pub, &reads), -EKEYREJECTED);
	CHECK_EQ(reads, 1);
	free(img);
	stp_sign_seckey_free(key);
}

/* stp_sign_image sets the content-hashes bit and hashes each block's content after the
 * stored parts: a raw block has none a delta rebuilds, so zeros. The image opens
 * verified. */
static void test_content_hashes(void)
{
	struct stp_seckey *key = NULL;
	struct stp_superblock sb;
	struct stp_pubkey pub;
	uint8_t *bytes = NULL, zero[STP_SIG_HASH_LEN] = { 0 };
	size_t len = 0;
	uint64_t bad;

	CHECK_EQ(stp_sign_keygen(&key), 0);
	if (key)
		bytes = signed_image(key, &len);
	CHECK(bytes);
	if (!bytes) {
		stp_sign_seckey_free(key);
		return;
	}
	CHECK_EQ(stp_sb_decode(bytes, &sb, &bad), 0);
	CHECK(sb.feat_incompat & STP_FEAT_INCOMPAT_CONTENT_HASHES);
	CHECK_EQ(sb.block_count, 1);
	CHECK_EQ(sb.sig_size, stp_sig_size(2 * sb.block_count + 2));
	CHECK(!memcmp(bytes + sb.sig_offset + STP_SIG_HDR_SIZE +
			      stp_sig_hash_content(&sb, 0) * STP_SIG_HASH_LEN, zero, sizeof(zero)));
	stp_sign_seckey_pubkey(key, &pub);
	CHECK_EQ(open_swapped(bytes, len, bytes, &pub, &(unsigned){ 0 }), 0);
	free(bytes);
	stp_sign_seckey_free(key);
}

/* The stored part PART of IMG read into BUF, compared with LEN bytes of the image file at
 * OFF: 1 when they are the same. */
static int read_stored_is(const struct stp_image *img, uint64_t part, uint8_t *buf,
			  uint64_t off, size_t len)
{
	uint8_t *file = malloc(len ? len : 1);
	size_t got = SIZE_MAX;
	int same = file && !stp_image_read_stored(img, part, buf, &got) && got == len &&
		   !stp_pread_full(stp_image_fd(img), file, len, off) && !memcmp(buf, file, len);

	free(file);
	return same;
}

/* stp_image_read_stored gives each part as it lies in the file (the memimage's one raw
 * block after the superblock, its metadata after the block) and refuses a part changed
 * under the open image; stp_sign_image reads through it, so a signature never vouches
 * for such a part, metadata included. */
static void test_read_stored(void)
{
	static const struct stp_extent ext = { .file_off = 0, .stream_off = 0, .length = 100 };
	const struct mem_file f = { "a", 100, &ext, 1 };
	const uint64_t meta_off = STP_SB_SIZE + 100;
	struct stp_image *img = NULL;
	struct stp_seckey *key = NULL;
	uint8_t *buf = NULL, *block = NULL, sb[STP_SB_SIZE], byte;
	size_t len = 1, block_len;
	uint64_t keep;
	int fd;

	CHECK_EQ(mem_image_open(&f, 1, 100, &img), 0);
	CHECK_EQ(stp_sign_keygen(&key), 0);
	if (!img || !key || !(buf = malloc(stp_image_stored_max(img))))
		goto out;
	fd = stp_image_fd(img);
	CHECK(read_stored_is(img, STP_SIG_HASH_BLOCK0, buf, STP_SB_SIZE, 100));
	CHECK(buf[99] == mem_byte(99));
	CHECK(read_stored_is(img, STP_SIG_HASH_META, buf, meta_off,
			     (size_t)(lseek(fd, 0, SEEK_END) - (off_t)meta_off)));
	CHECK_EQ(stp_image_read_stored(img, STP_SIG_HASH_DICT, buf, &len), 0);
	CHECK_EQ(len, 0);
	CHECK_EQ(stp_image_read_stored(img, STP_SIG_HASH_BLOCK0 + 1, buf, &len), -EINVAL);

	byte = mem_byte(7) ^ 0x40; /* a byte of the block */
	CHECK_EQ(pwrite(fd, &byte, 1, STP_SB_SIZE + 7), 1);
	CHECK_EQ(stp_image_read_stored(img, STP_SIG_HASH_BLOCK0, buf, &len), -EUCLEAN);
	CHECK_EQ(len, 0);
	CHECK_EQ(stp_sign_image(img, key, sb, &block, &block_len, &keep), -EUCLEAN);
	byte = mem_byte(7);
	CHECK_EQ(pwrite(fd, &byte, 1, STP_SB_SIZE + 7), 1);
	CHECK_EQ(stp_pread_full(fd, &byte, 1, meta_off + 5), 0); /* a byte of the metadata */
	byte ^= 0x40;
	CHECK_EQ(pwrite(fd, &byte, 1, meta_off + 5), 1);
	CHECK_EQ(stp_image_read_stored(img, STP_SIG_HASH_META, buf, &len), -EUCLEAN);
	CHECK_EQ(stp_sign_image(img, key, sb, &block, &block_len, &keep), -EUCLEAN);
	CHECK(block == NULL);
out:
	free(block);
	free(buf);
	stp_sign_seckey_free(key);
	stp_image_close(img);
}

int main(void)
{
	stp_log_set_handler(NULL);
	RUN(test_hash);
	RUN(test_hash_fd);
	RUN(test_round_trip);
	RUN(test_flips);
	RUN(test_open_hashes_what_it_decodes);
	RUN(test_read_stored);
	RUN(test_content_hashes);
	return tap_done();
}
