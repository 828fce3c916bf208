/* SPDX-License-Identifier: MIT */
/*
 * Inside the image reader (image.h), split as the work is:
 *   super.c       open and close, the superblock, the signature block's header, the
 *                 accessors
 *   sigblock.c    opening verified: the signature checked, the signed hashes (the only
 *                 part that needs libcrypto: a program that never opens verified does
 *                 not link it)
 *   meta.c        the metadata: loaded whole, or paged (its page table and pages)
 *   inode.c       inodes, link targets, the string pool
 *   namei.c       directory entries, name lookup, path resolution
 *   xattr.c       extended attributes
 *   data.c        extents, the block table, stored bytes read and checked
 *   decompress.c  block decoding: whole, in place, verified, or in pieces
 * What they share is here, for those files only: the rest of stipple goes through
 * image.h. The functions follow image.h's rules: 0 or a negative errno, a damaged image
 * reported (STP_CORRUPT) as -EUCLEAN; those taking a const image are thread-safe.
 */
#ifndef STP_IMAGE_INTERNAL_H
#define STP_IMAGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "format.h"
#include "image.h"
#include "keys.h"

struct stp_image {
	struct stp_imgsrc *src; /* every byte of the image comes through it */
	int fd;              /* src->fd: a file source's descriptor, else -1 */
	char *path;
	struct stp_superblock sb;
	uint8_t sb_raw[STP_SB_SIZE]; /* the bytes sb was decoded from: what a signature covers */
	struct stp_meta_header mh;
	uint8_t *meta;       /* whole metadata: decoded, meta_len bytes; paged: NULL */
	size_t meta_len;
	uint8_t *pagetab;    /* paged metadata: the checked page table, else NULL */
	struct stp_metapages *pages; /* paged metadata: its decoded pages, else NULL */
	ZSTD_DDict *ddict;   /* NULL without a dictionary */
	int is_signed;       /* the signature block's header decoded */
	uint8_t signer[STP_SIG_KEY_ID_LEN];
	uint8_t *hashes;     /* opened verified: the signed hashes (stipple(5)), else NULL */
	const struct img_hash_ops *hash; /* set with HASHES (sigblock.c) */
};

/* Checking the signed hashes (SHA-256, libcrypto), reached only through an image opened
 * verified, so that a program that never opens one does not link it. */
struct img_hash_ops {
	/* whether the signed hash number INDEX is that of LEN bytes at P */
	int (*ok)(const struct stp_image *img, uint64_t index, const void *p, size_t len);
	/* stp_hasher_start and stp_hasher_wait (hasher.h) */
	void (*start)(const void *p, size_t len);
	void (*wait)(uint8_t out[STP_SIG_HASH_SIZE]);
};

/* True when [first, first + count) lies inside a table of TOTAL records. */
static inline int img_range_ok(uint64_t first, uint64_t count, uint64_t total)
{
	return first <= total && count <= total - first;
}

/* super.c. The header of the signature block, read for every signed image
 * (stp_image_signer); -EPROTONOSUPPORT: a hash this stipple does not know. */
int img_read_sighdr(struct stp_image *img, struct stp_sighdr *h);
/* Opens an image from SRC (taken over, as stp_image_open_src); with CHECK (sigblock.c's
 * img_read_signature, given KEY) verified: CHECK reads the signature block before
 * anything the metadata says. */
typedef int (*img_sigcheck_fn)(struct stp_image *img, const struct stp_pubkey *key);
int img_open(struct stp_imgsrc *src, img_sigcheck_fn check, const struct stp_pubkey *key,
	     struct stp_image **out);

/* sigblock.c. Reads the whole signature block and checks the signature (KEY NULL: only
 * its form), keeping the hashes in img->hashes and the means to check them in img->hash. */
int img_read_signature(struct stp_image *img, const struct stp_pubkey *key);

/* meta.c. Loads the metadata (whole, or paged: its page table) and checks its header;
 * then the dictionary, checked against its checksum and, verified, its signed hash. */
int img_load_metadata(struct stp_image *img);
int img_load_dictionary(struct stp_image *img);
/* LEN bytes of decoded metadata at OFF into DST; the caller has bounded the range by the
 * header's tables, which lie inside meta_size. */
int img_meta_read(const struct stp_image *img, uint64_t off, size_t len, void *dst);

/* inode.c. LEN bytes at OFF of the string pool (bounded by the caller) into DST. */
int img_read_string(const struct stp_image *img, uint64_t off, size_t len, void *dst);

/* data.c. Where stored blocks must end: before the signature block when there is one. */
uint64_t img_data_end(const struct stp_image *img);
/* Every block's entry checked, and the blocks' stored ranges in order and apart. */
int img_check_block_table(struct stp_image *img);
/* A stored part (stipple(5)): its place, size and checksum in BE (the metadata's and the
 * dictionary's from the superblock), the number of its signed hash, and for messages its
 * kind and number (IMG_PART_ONLY: one of its kind). */
#define IMG_PART_ONLY UINT64_MAX
struct img_part {
	const char *what;
	uint64_t n, hash;
	struct stp_blockent be;
	bool hash_only;  /* opened verified, the signed hash stands for the checksum */
};
/* Block BLOCK whose checked entry is BE. */
struct img_part img_block_part(uint64_t block, const struct stp_blockent *be);
/* The part whose signed hash is number PART (below stp_sig_nstored), its entry checked. */
int img_part_find(const struct stp_image *img, uint64_t part, struct img_part *p);
/* P's stored bytes into BUF (p->be.stored_size bytes): read; read and checked. */
int img_part_read(const struct stp_image *img, const struct img_part *p, void *buf);
int img_part_load(const struct stp_image *img, const struct img_part *p, void *buf);
/* Checks them against the checksum and, opened verified, the signed hash. */
int img_part_check(const struct stp_image *img, const struct img_part *p, const void *buf);

/* decompress.c. Decompresses SRC into OUT (SIZE bytes) with the thread's context; SRC
 * may lie at the end of OUT's buffer (in place, stp_image_block_buffer_size). On a bad
 * frame, *WHY says why and -EUCLEAN is returned, for the caller to report. */
int img_zstd_decode(const struct stp_image *img, const struct stp_blockent *be,
		    const void *src, void *out, size_t size, const char **why);

#endif
