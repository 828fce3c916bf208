/* SPDX-License-Identifier: MIT */
/* The image reader: superblock, metadata tables, path lookup and block decoding. */
#include "image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_decompressionMargin, for in-place decoding */
#include <zstd.h>

#include "bcj.h"
#include "hasher.h"
#include "imgsrc.h"
#include "log.h"
#include "metapages.h"
#include "keys.h"
#include "util.h"

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
};

/* Feature names for messages about images we cannot read. */
static const char *feature_name(uint64_t bit)
{
	switch (bit) {
	case STP_FEAT_INCOMPAT_DICT: return "dictionary";
	case STP_FEAT_INCOMPAT_BCJ_X86: return "bcj-x86";
	case STP_FEAT_INCOMPAT_BCJ_ARM64: return "bcj-arm64";
	case STP_FEAT_INCOMPAT_META_PAGES: return "meta-pages";
	case STP_FEAT_INCOMPAT_HOT_BLOCKS: return "hot-blocks";
	default: return "unknown";
	}
}

/* The source must hold all IMAGE_SIZE bytes before anything sized by the superblock is
 * allocated or read: a regular file (or a URL) by its size, a block device (whose
 * st_size is 0) by a read of the last byte. */
static int check_file_size(struct stp_imgsrc *src, const struct stp_superblock *sb)
{
	const char *path = src->name;
	uint8_t last;
	int rc;

	if (src->size != STP_IMGSRC_SIZE_UNKNOWN) {
		if (src->size >= sb->image_size)
			return 0;
		return STP_CORRUPT(path, "truncated: %llu bytes of %llu",
				   (unsigned long long)src->size,
				   (unsigned long long)sb->image_size);
	}
	rc = stp_imgsrc_read(src, &last, 1, sb->image_size - 1);
	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(path, "truncated: the device is shorter than %llu bytes",
				   (unsigned long long)sb->image_size);
	return rc;
}

/* The fewest bytes a stored block takes: a zstd frame its header (6 bytes) and a block
 * header with one byte (4); a raw block all its bytes, 64 KiB at least but for the last
 * hot block and the last block, which may be shorter (BLOCKS_SHORT_MAX). */
#define BLOCK_STORED_MIN 10u
#define BLOCKS_SHORT_MAX 2u

/* Blocks share no stored bytes (stipple(5)), so a file holds at most one block per
 * BLOCK_STORED_MIN of its bytes. The mount sizes its hot-block bookkeeping by the count
 * the superblock claims: a claim of millions in a small file is refused here, before
 * anything is sized by it, rather than when the table is read. */
static int check_block_claim(const char *path, const struct stp_superblock *sb)
{
	uint64_t room = (sb->image_size > STP_SB_SIZE ?
			 (sb->image_size - STP_SB_SIZE) / BLOCK_STORED_MIN : 0) + BLOCKS_SHORT_MAX;

	if (sb->block_count <= room)
		return 0;
	return STP_CORRUPT(path, "%llu blocks (%llu of them hot) claimed, more than %llu bytes "
			   "can store (blocks share no stored bytes, and each takes %u at least)",
			   (unsigned long long)sb->block_count,
			   (unsigned long long)stp_sb_hot_blocks(sb),
			   (unsigned long long)sb->image_size, BLOCK_STORED_MIN);
}

int stp_image_read_superblock(int fd, const char *path, struct stp_superblock *sb)
{
	struct stp_imgsrc src;
	int rc = stp_imgsrc_borrow_fd(&src, fd, path);

	return rc ? rc : stp_image_read_superblock_src(&src, sb);
}

/* Reads the superblock from SRC into RAW once, and decodes and checks those very bytes
 * into SB. */
static int read_sb_raw(struct stp_imgsrc *src, uint8_t raw[STP_SB_SIZE],
		       struct stp_superblock *sb)
{
	const char *path = src->name;
	uint64_t bad = 0;
	const char *why;
	int rc;

	rc = stp_imgsrc_read(src, raw, STP_SB_SIZE, 0);
	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(path, "shorter than a superblock");
	if (rc)
		return rc;
	rc = stp_sb_decode_reason(raw, sb, &bad, &why);
	if (rc == -EPROTONOSUPPORT) {
		if (bad)
			stp_log(STP_LOG_ERR, "%s: uses feature bit %d (%s) that this stipple does not support",
				path, __builtin_ctzll(bad), feature_name(bad));
		else
			stp_log(STP_LOG_ERR, "%s: format version %u is newer than this stipple reads (%u)",
				path, sb->version, STP_FORMAT_VERSION);
		return rc;
	}
	if (rc)
		return STP_CORRUPT(path, "%s", why);
	rc = check_block_claim(path, sb);
	return rc ? rc : check_file_size(src, sb);
}

int stp_image_read_superblock_src(struct stp_imgsrc *src, struct stp_superblock *sb)
{
	uint8_t raw[STP_SB_SIZE];

	return read_sb_raw(src, raw, sb);
}

/* The superblock is read once: a source that changes under the reader cannot have one
 * copy decoded and another checked against the signature. */
static int read_superblock(struct stp_image *img)
{
	return read_sb_raw(img->src, img->sb_raw, &img->sb);
}

/* Opened verified, the signed hash number INDEX must be that of LEN bytes at P. */
static int hash_ok(const struct stp_image *img, uint64_t index, const void *p, size_t len)
{
	uint8_t h[STP_SIG_HASH_LEN];

	stp_sign_hash(p, len, h);
	return !memcmp(h, img->hashes + index * STP_SIG_HASH_LEN, STP_SIG_HASH_LEN);
}

/* Reads LEN stored bytes at OFF into a new buffer and checks them against SUM, and,
 * opened verified, against hash number HASH. */
static int read_checked(struct stp_image *img, uint64_t off, uint64_t len, uint64_t sum,
			uint64_t hash, const char *what, uint8_t **out)
{
	uint8_t *buf = malloc(len ? len : 1);
	int rc;

	if (!buf)
		return -ENOMEM;
	rc = stp_imgsrc_read(img->src, buf, len, off);
	if (rc == STP_IMGSRC_END)
		rc = STP_CORRUPT(img->path, "%s lies past the end of the file", what);
	else if (!rc && stp_checksum(buf, len) != sum)
		rc = STP_CORRUPT(img->path, "%s checksum mismatch", what);
	else if (!rc && img->hashes && !hash_ok(img, hash, buf, len))
		rc = STP_CORRUPT(img->path, "%s does not match its signed hash", what);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/* Decompresses the metadata into a buffer that grows only as output arrives, so that a
 * forged meta_size cannot make a small image ask for gigabytes up front. */
static int inflate_metadata(struct stp_image *img, const uint8_t *stored)
{
	const struct stp_superblock *sb = &img->sb;
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer in = { stored, sb->meta_stored_size, 0 };
	ZSTD_outBuffer out = { NULL, 0, 0 };
	size_t cap = sb->meta_stored_size * 4 + (64u << 10), ret = 1;
	int rc = 0;

	if (!ds)
		return -ENOMEM;
	/* the window cannot usefully exceed the metadata: bound what the frame may ask for */
	ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax,
			       sb->meta_size > (1u << 10) ? 64 - __builtin_clzll(sb->meta_size - 1) : 10);
	/* one byte beyond meta_size tells a longer frame from one that just fits */
	while (ret != 0 && rc == 0 && out.pos <= sb->meta_size) {
		if (out.pos == out.size) {
			void *grown;

			if (out.size && __builtin_mul_overflow(out.size, 2, &cap)) {
				rc = -ENOMEM;
				break;
			}
			out.size = cap < sb->meta_size + 1 ? cap : sb->meta_size + 1;
			grown = reallocarray(out.dst, out.size, 1);
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			out.dst = grown;
		}
		ret = ZSTD_decompressStream(ds, &out, &in);
		if (ZSTD_isError(ret))
			rc = STP_CORRUPT(img->path, "metadata does not decompress: %s",
					 ZSTD_getErrorName(ret));
		else if (ret && in.pos == in.size && out.pos < out.size)
			rc = STP_CORRUPT(img->path, "metadata truncated");
	}
	ZSTD_freeDStream(ds);
	if (!rc && (out.pos != sb->meta_size || in.pos != in.size))
		rc = STP_CORRUPT(img->path, "metadata is %zu bytes, not the stated %llu", out.pos,
				 (unsigned long long)sb->meta_size);
	if (rc) {
		free(out.dst);
		return rc;
	}
	img->meta = out.dst;
	return 0;
}

static int load_page(void *ctx, uint64_t page, uint8_t *out, size_t len);

/* True when [first, first + count) lies inside a table of TOTAL records. */
static int range_ok(uint64_t first, uint64_t count, uint64_t total)
{
	return first <= total && count <= total - first;
}

/* Calls FN for the stored range of each entry of the page TABLE of SB that decodes and
 * lies inside the image: ranges for hints and caches, whose bytes are checked when each
 * page is loaded. Stops at FN's first non-zero return. */
static int each_page_range(const struct stp_superblock *sb, const uint8_t *table,
			   stp_image_range_fn fn, void *ctx)
{
	int rc = 0;

	for (uint64_t p = 0; !rc && p < stp_meta_pages(sb); p++) {
		struct stp_blockent pe;

		if (!stp_blockent_decode(table + p * STP_BLOCKENT_SIZE, &pe) &&
		    range_ok(pe.offset, pe.stored_size, sb->image_size))
			rc = fn(ctx, pe.offset, pe.stored_size, pe.checksum);
	}
	return rc;
}

int stp_image_page_ranges(struct stp_imgsrc *src, const struct stp_superblock *sb,
			  stp_image_range_fn fn, void *ctx)
{
	uint8_t *table;
	int rc;

	if (!stp_meta_pages(sb))
		return 0;
	table = malloc(sb->meta_stored_size); /* 24 bytes a page: at most 384 KiB */
	if (!table)
		return -ENOMEM;
	rc = stp_imgsrc_read(src, table, sb->meta_stored_size, sb->meta_offset);
	if (rc == STP_IMGSRC_END)
		rc = STP_CORRUPT(src->name, "the metadata page table lies past the end of the file");
	if (!rc && stp_checksum(table, sb->meta_stored_size) != sb->meta_checksum)
		rc = -EUCLEAN;
	if (!rc)
		rc = each_page_range(sb, table, fn, ctx);
	free(table);
	return rc;
}

struct span { uint64_t lo, hi; };

static int widen_span(void *ctx, uint64_t off, uint64_t len, uint64_t sum)
{
	struct span *s = ctx;

	(void)sum;
	s->lo = off < s->lo ? off : s->lo;
	s->hi = off + len > s->hi ? off + len : s->hi;
	return 0;
}

/* Asks the kernel to read the stored pages ahead, without waiting: a walk of a large
 * tree then finds them in the page cache instead of seeking for each. */
static void read_pages_ahead(const struct stp_image *img)
{
	struct span s = { UINT64_MAX, 0 };

	each_page_range(&img->sb, img->pagetab, widen_span, &s);
	if (s.lo < s.hi && img->fd >= 0) /* a file: a URL's bytes come as they are asked for */
		posix_fadvise(img->fd, (off_t)s.lo, (off_t)(s.hi - s.lo), POSIX_FADV_WILLNEED);
}

/* Paged metadata: the page table is all that is read now; pages come as reads need them. */
static int open_pages(struct stp_image *img, uint8_t *table)
{
	img->pagetab = table;
	read_pages_ahead(img);
	return stp_metapages_create(img->sb.meta_size, STP_IMAGE_META_BUDGET, load_page, img,
				    &img->pages);
}

/* LEN bytes of decoded metadata at OFF into DST; the caller has bounded the range by the
 * header's tables, which lie inside meta_size. */
static int meta_read(const struct stp_image *img, uint64_t off, size_t len, void *dst)
{
	if (img->pages)
		return stp_metapages_read(img->pages, off, len, dst);
	memcpy(dst, img->meta + off, len);
	return 0;
}

static int load_metadata(struct stp_image *img)
{
	const struct stp_superblock *sb = &img->sb;
	uint8_t *stored, head[STP_META_HDR_SIZE];
	int rc;

	/* stp_sb_decode bounded meta_stored_size and meta_size, and the file holds them */
	rc = read_checked(img, sb->meta_offset, sb->meta_stored_size, sb->meta_checksum,
			  STP_SIG_HASH_META, sb->meta_codec == STP_META_CODEC_PAGES ?
			  "metadata page table" : "metadata", &stored);
	if (rc)
		return rc;
	if (sb->meta_codec == STP_META_CODEC_PAGES) {
		rc = open_pages(img, stored);
	} else if (sb->meta_codec == STP_CODEC_RAW) {
		img->meta = stored; /* meta_stored_size == meta_size, checked */
	} else {
		rc = inflate_metadata(img, stored);
		free(stored);
	}
	if (rc)
		return rc;
	img->meta_len = sb->meta_size;
	/* meta_size_min: the header fits */
	rc = meta_read(img, 0, sizeof(head), head);
	if (rc)
		return rc;
	if (stp_meta_header_decode(head, img->meta_len, &img->mh))
		return STP_CORRUPT(img->path, "metadata header invalid");
	if (img->mh.inode_count != sb->inode_count || img->mh.block_count != sb->block_count)
		return STP_CORRUPT(img->path, "metadata counts disagree with the superblock");
	return 0;
}

static int load_dictionary(struct stp_image *img)
{
	uint8_t *dict;
	int rc;

	static const uint8_t none[STP_SIG_HASH_LEN];

	if (!img->sb.dict_size) {
		/* a signer hashes an absent dictionary as zeros: anything else is forged */
		if (img->hashes && memcmp(img->hashes + STP_SIG_HASH_DICT * STP_SIG_HASH_LEN, none,
					  sizeof(none)))
			return STP_CORRUPT(img->path, "signed hash of an absent dictionary is not zero");
		return 0;
	}
	/* at most STP_DICT_SIZE_MAX, inside the file: checked with the superblock */
	rc = read_checked(img, img->sb.dict_offset, img->sb.dict_size, img->sb.dict_checksum,
			  STP_SIG_HASH_DICT, "dictionary", &dict);
	if (rc)
		return rc;
	img->ddict = ZSTD_createDDict(dict, img->sb.dict_size);
	free(dict);
	if (!img->ddict)
		return STP_CORRUPT(img->path, "dictionary does not load");
	return 0;
}

/* Every block's stored bytes must lie in the image and suit its codec, as the block
 * table promises: found at open rather than on the read that needs the block. Linear
 * in the table (24 bytes a block), which grows with the data, not with the files.
 * The blocks' stored ranges follow one another in block order, apart (stipple(5)):
 * no two blocks share a frame, so what a reader decodes is bounded by what the file
 * stores, and each frame is decoded once by a pass over the blocks. */
static int check_block_table(struct stp_image *img)
{
	uint64_t end = STP_SB_SIZE; /* the end of the stored bytes of the block before */

	for (uint64_t b = 0; b < img->sb.block_count; b++) {
		struct stp_blockent be;
		int rc = stp_image_block(img, b, &be);

		if (rc)
			return rc;
		if (be.offset < end)
			return STP_CORRUPT(img->path, "block %llu: stored bytes overlap or precede "
					   "those of block %llu", (unsigned long long)b,
					   (unsigned long long)b - 1);
		end = be.offset + be.stored_size;
	}
	return 0;
}

/* The header of the signature block, read for every signed image: stp_image_signer. */
static int read_sighdr(struct stp_image *img, struct stp_sighdr *h)
{
	uint8_t raw[STP_SIG_HDR_SIZE];
	int rc = stp_imgsrc_read(img->src, raw, sizeof(raw), img->sb.sig_offset);

	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(img->path, "signature block lies past the end of the file");
	if (rc)
		return rc;
	rc = stp_sighdr_decode(raw, &img->sb, h);
	if (rc == -EUCLEAN)
		return STP_CORRUPT(img->path, "signature block header invalid");
	img->is_signed = 1;
	memcpy(img->signer, h->key_id, sizeof(img->signer));
	return rc; /* -EPROTONOSUPPORT: a hash this stipple does not know */
}

/* Reads the whole signature block and checks the signature (KEY NULL: only its form),
 * keeping the hashes. Nothing the metadata says is read before this. */
static int read_signature(struct stp_image *img, const struct stp_pubkey *key)
{
	uint8_t root[STP_SIG_HASH_SIZE], *sig;
	char want[65], got[65];
	struct stp_sighdr h, again;
	int rc = read_sighdr(img, &h);

	if (rc == -EPROTONOSUPPORT)
		stp_log(STP_LOG_ERR, "%s: signed with hash algorithm %u, which this stipple does "
			"not know", img->path, h.hash_alg);
	if (rc)
		return rc;
	if (key && memcmp(h.key_id, key->id, sizeof(h.key_id))) {
		stp_log(STP_LOG_ERR, "%s: signed by key %s, not by key %s", img->path,
			stp_sign_key_hex(h.key_id, got), stp_sign_key_hex(key->id, want));
		return -EKEYREJECTED;
	}
	/* sig_size: bounded by block_count, which the metadata's 1 GiB bound limits */
	sig = malloc(img->sb.sig_size);
	if (!sig)
		return -ENOMEM;
	rc = stp_imgsrc_read(img->src, sig, img->sb.sig_size, img->sb.sig_offset);
	if (rc == STP_IMGSRC_END)
		rc = STP_CORRUPT(img->path, "signature block lies past the end of the file");
	/* the header decoded above must be the one hashed now, as the superblock is */
	if (!rc && (stp_sighdr_decode(sig, &img->sb, &again) ||
		    memcmp(again.key_id, h.key_id, sizeof(h.key_id))))
		rc = STP_CORRUPT(img->path, "signature block changed while it was read");
	if (!rc && key) {
		stp_sign_root_hash(img->sb_raw, sig, img->sb.sig_size, root);
		rc = stp_sign_check(key, root, sig + STP_SIG_SIG_OFFSET);
		if (rc == -EKEYREJECTED)
			stp_log(STP_LOG_ERR, "%s: the signature by key %s does not match the image",
				img->path, stp_sign_key_hex(key->id, want));
	}
	if (rc) {
		free(sig);
		return rc;
	}
	/* the hashes follow the header: keep them where they are */
	memmove(sig, sig + STP_SIG_HDR_SIZE, img->sb.sig_size - STP_SIG_HDR_SIZE);
	img->hashes = sig;
	return 0;
}

/* The open both entry points share; VERIFY says whether the hashes are checked, with
 * KEY (or NULL: integrity alone). */
static int open_image(struct stp_imgsrc *src, int verify, const struct stp_pubkey *key,
		      struct stp_image **out)
{
	struct stp_image *img = calloc(1, sizeof(*img));
	const char *path = src->name;
	int rc = -ENOMEM;

	if (!img) {
		stp_imgsrc_close(src);
		return -ENOMEM;
	}
	img->src = src;
	img->fd = src->fd;
	img->path = strdup(path);
	if (!img->path)
		goto fail;
	rc = read_superblock(img);
	if (!rc && verify && !(img->sb.feat_compat & STP_FEAT_COMPAT_SIGNED)) {
		stp_log(STP_LOG_ERR, "%s: the image is not signed", path);
		rc = -ENOKEY;
	}
	if (!rc && verify)
		rc = read_signature(img, key);
	else if (!rc && img->sb.feat_compat & STP_FEAT_COMPAT_SIGNED &&
		 (rc = read_sighdr(img, &(struct stp_sighdr){ 0 })) == -EPROTONOSUPPORT)
		rc = 0; /* an unknown hash: readable, as an unsigned image is */
	if (!rc)
		rc = load_metadata(img);
	if (!rc)
		rc = load_dictionary(img);
	if (!rc)
		rc = check_block_table(img);
	if (!rc)
		rc = stp_image_inode(img, STP_ROOT_INO, &(struct stp_inode){ 0 });
	if (rc)
		goto fail;
	*out = img;
	return 0;
fail:
	stp_image_close(img);
	return rc;
}

int stp_image_open_src(struct stp_imgsrc *src, struct stp_image **out)
{
	return open_image(src, 0, NULL, out);
}

int stp_image_open_src_verified(struct stp_imgsrc *src, const struct stp_pubkey *key,
				struct stp_image **out)
{
	return open_image(src, 1, key, out);
}

int stp_image_open_fd(int fd, const char *path, struct stp_image **out)
{
	struct stp_imgsrc *src;
	int rc = stp_imgsrc_open_fd(fd, path, &src);

	return rc ? rc : open_image(src, 0, NULL, out);
}

int stp_image_open_verified(int fd, const char *path, const struct stp_pubkey *key,
			    struct stp_image **out)
{
	struct stp_imgsrc *src;
	int rc = stp_imgsrc_open_fd(fd, path, &src);

	return rc ? rc : open_image(src, 1, key, out);
}

int stp_image_signer(const struct stp_image *img, uint8_t id[32])
{
	if (!img->is_signed)
		return 0;
	memcpy(id, img->signer, sizeof(img->signer));
	return 1;
}

int stp_image_verified(const struct stp_image *img)
{
	return img->hashes != NULL;
}

int stp_image_open(const char *path, struct stp_image **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return stp_image_open_fd(fd, path, out);
}

void stp_image_close(struct stp_image *img)
{
	if (!img)
		return;
	stp_imgsrc_close(img->src);
	ZSTD_freeDDict(img->ddict);
	stp_metapages_destroy(img->pages);
	free(img->pagetab);
	free(img->meta);
	free(img->hashes);
	free(img->path);
	free(img);
}

const struct stp_superblock *stp_image_sb(const struct stp_image *img) { return &img->sb; }
const char *stp_image_path(const struct stp_image *img) { return img->path; }
int stp_image_fd(const struct stp_image *img) { return img->fd; }
struct stp_imgsrc *stp_image_src(const struct stp_image *img) { return img->src; }
uint32_t stp_image_block_size(const struct stp_image *img) { return 1u << img->sb.block_log; }
const struct stp_meta_header *stp_image_meta_header(const struct stp_image *img) { return &img->mh; }

/* Pages loading at once beyond the budget: one per thread that reads, with room. */
#define META_LOADS_MAX 64u

uint64_t stp_image_meta_memory(const struct stp_superblock *sb, uint64_t budget)
{
	uint64_t pages = stp_meta_pages(sb);

	if (!pages)
		return 3 * sb->meta_size + sb->meta_stored_size;
	return sb->meta_stored_size + pages * sizeof(void *) + budget +
	       (uint64_t)META_LOADS_MAX * STP_META_PAGE_SIZE;
}

void stp_image_meta_stats(const struct stp_image *img, struct stp_metapages_stats *st)
{
	if (img->pages)
		stp_metapages_stats(img->pages, st);
	else
		*st = (struct stp_metapages_stats){ 0 };
}

void stp_image_set_meta_budget(const struct stp_image *img, size_t bytes)
{
	if (img->pages)
		stp_metapages_set_budget(img->pages, bytes);
}

void stp_image_bound_walk_loads(const struct stp_image *img, bool on)
{
	struct stp_metapages_stats st;

	if (!img->pages)
		return;
	stp_metapages_stats(img->pages, &st);
	stp_metapages_limit_loads(img->pages, on ? st.loads + STP_IMAGE_WALK_LOADS_MIN +
					  STP_IMAGE_WALK_LOADS_PER_PAGE * stp_meta_pages(&img->sb)
					: 0);
}

size_t stp_image_meta_bytes(const struct stp_image *img)
{
	struct stp_metapages_stats st;

	if (!img->pages)
		return img->meta_len;
	stp_metapages_stats(img->pages, &st);
	return st.resident;
}

unsigned stp_mode_dtype(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return DT_REG;
	case S_IFDIR: return DT_DIR;
	case S_IFLNK: return DT_LNK;
	case S_IFCHR: return DT_CHR;
	case S_IFBLK: return DT_BLK;
	case S_IFIFO: return DT_FIFO;
	case S_IFSOCK: return DT_SOCK;
	default: return DT_UNKNOWN;
	}
}

static int inode_check(const struct stp_image *img, uint32_t ino, const struct stp_inode *in)
{
	const struct stp_meta_header *mh = &img->mh;

	/* bits above type and permissions would reach the kernel, which has no room for them */
	if (in->mtime_nsec >= 1000000000u || in->nlink == 0 || (in->mode & ~(S_IFMT | 07777)) ||
	    !range_ok(in->xattr_first, in->xattr_count, mh->xattr_count))
		return STP_CORRUPT(img->path, "inode %u: attributes out of range", ino);
	switch (in->mode & S_IFMT) {
	case S_IFREG:
		if (!range_ok(in->data, in->count, mh->extent_count))
			return STP_CORRUPT(img->path, "inode %u: extents out of range", ino);
		return 0;
	case S_IFDIR:
		if (!range_ok(in->data, in->count, mh->dirent_count) || in->size != in->count ||
		    in->parent >= mh->inode_count)
			return STP_CORRUPT(img->path, "inode %u: directory entries out of range", ino);
		return 0;
	case S_IFLNK:
		if (in->size == 0 || in->size > STP_LINK_MAX ||
		    !range_ok(in->data, in->size, mh->strings_size))
			return STP_CORRUPT(img->path, "inode %u: link target out of range", ino);
		return 0;
	case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return 0;
	default:
		return STP_CORRUPT(img->path, "inode %u: unknown type %#o", ino, in->mode & S_IFMT);
	}
}

int stp_image_inode(const struct stp_image *img, uint32_t ino, struct stp_inode *out)
{
	uint8_t rec[STP_INODE_SIZE];
	int rc;

	if (ino >= img->mh.inode_count)
		return STP_CORRUPT(img->path, "inode %u out of range", ino);
	rc = meta_read(img, img->mh.inode_off + (uint64_t)ino * STP_INODE_SIZE, sizeof(rec), rec);
	if (rc)
		return rc;
	if (stp_inode_decode(rec, out))
		return STP_CORRUPT(img->path, "inode %u: reserved bytes set", ino);
	if (ino == STP_ROOT_INO && !S_ISDIR(out->mode))
		return STP_CORRUPT(img->path, "the root is not a directory");
	return inode_check(img, ino, out);
}

/* LEN bytes at OFF of the string pool (bounded by the caller) into DST. */
static int read_string(const struct stp_image *img, uint64_t off, size_t len, void *dst)
{
	return meta_read(img, img->mh.strings_off + off, len, dst);
}

/* One pass over the bytes: names are short, and a listing checks each. */
static int name_ok(const char *name, size_t len)
{
	if (len == 0 || len > STP_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (name[i] == '/' || name[i] == '\0')
			return 0;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

/* Decodes record REC, entry INDEX of DIR, into OUT and checks it, without its name. */
static int dirent_check(const struct stp_image *img, const struct stp_inode *dir,
			uint32_t index, const uint8_t rec[STP_DIRENT_SIZE], struct stp_dirent *out)
{
	if (stp_dirent_decode(rec, out) ||
	    out->ino >= img->mh.inode_count || out->ino == STP_ROOT_INO ||
	    out->dtype == DT_UNKNOWN || stp_mode_dtype(DTTOIF(out->dtype)) != out->dtype ||
	    out->name_len > STP_NAME_MAX ||
	    !range_ok(out->name_off, out->name_len, img->mh.strings_size))
		return STP_CORRUPT(img->path, "directory entry %llu out of range",
				   (unsigned long long)(dir->data + index));
	return 0;
}

/* Entry INDEX of DIR, checked, without its name. */
static int dirent_get(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		      struct stp_dirent *out)
{
	uint8_t rec[STP_DIRENT_SIZE];
	int rc;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (index >= dir->count)
		return -ENOENT;
	rc = meta_read(img, img->mh.dirent_off + (dir->data + index) * STP_DIRENT_SIZE,
		       sizeof(rec), rec);
	return rc ? rc : dirent_check(img, dir, index, rec, out);
}

/* NAME (LEN bytes, NUL-terminated here) of entry INDEX of DIR, checked. */
static int name_check(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		      char *name, size_t len)
{
	name[len] = '\0';
	if (!name_ok(name, len))
		return STP_CORRUPT(img->path, "directory entry %llu has an invalid name",
				   (unsigned long long)(dir->data + index));
	return 0;
}

int stp_image_dirent(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		     struct stp_dirent *out, char name[STP_NAME_MAX + 1])
{
	int rc = dirent_get(img, dir, index, out);

	if (!rc)
		rc = read_string(img, out->name_off, out->name_len, name);
	return rc ? rc : name_check(img, dir, index, name, out->name_len);
}

/* The names of RUN's entries into run->names: one copy of the pool when they lie close
 * together (mkstipple writes a directory's names in entry order), else one each. */
static int dir_run_names(const struct stp_image *img, const struct stp_inode *dir,
			 struct stp_dir_run *run)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t at = 0;
	bool one = false;
	int rc;

	for (uint32_t i = 0; i < run->count; i++) {
		lo = run->ent[i].name_off < lo ? run->ent[i].name_off : lo;
		if (run->ent[i].name_off + run->ent[i].name_len > hi)
			hi = run->ent[i].name_off + run->ent[i].name_len;
	}
	if (hi - lo <= sizeof(run->span)) {
		rc = read_string(img, lo, (size_t)(hi - lo), run->span);
		if (rc)
			return rc;
		one = true;
	}
	for (uint32_t i = 0; i < run->count; i++) {
		const struct stp_dirent *d = &run->ent[i];
		char *name = run->names + at;

		if (one)
			memcpy(name, run->span + (d->name_off - lo), d->name_len);
		else if ((rc = read_string(img, d->name_off, d->name_len, name)))
			return rc;
		rc = name_check(img, dir, run->first + i, name, d->name_len);
		if (rc)
			return rc;
		run->name_at[i] = (uint16_t)at;
		at += d->name_len + 1u;
	}
	return 0;
}

int stp_image_dir_run(const struct stp_image *img, const struct stp_inode *dir, uint32_t first,
		      uint32_t max, struct stp_dir_run *run)
{
	uint8_t recs[STP_DIR_RUN * STP_DIRENT_SIZE];
	int rc;

	run->first = first;
	run->count = 0;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (first >= dir->count)
		return 0;
	max = max < 1 ? 1 : max > STP_DIR_RUN ? STP_DIR_RUN : max;
	run->count = dir->count - first < max ? dir->count - first : max;
	rc = meta_read(img, img->mh.dirent_off + ((uint64_t)dir->data + first) * STP_DIRENT_SIZE,
		       run->count * STP_DIRENT_SIZE, recs);
	for (uint32_t i = 0; !rc && i < run->count; i++)
		rc = dirent_check(img, dir, first + i, recs + i * STP_DIRENT_SIZE, &run->ent[i]);
	if (!rc)
		rc = dir_run_names(img, dir, run);
	if (rc)
		run->count = 0;
	return rc;
}

int stp_image_lookup(const struct stp_image *img, uint32_t dir, const char *name, size_t len,
		     uint32_t *ino)
{
	struct stp_inode d;
	uint32_t lo = 0, hi;
	int rc = stp_image_inode(img, dir, &d);

	if (rc)
		return rc;
	if (!S_ISDIR(d.mode))
		return -ENOTDIR;
	hi = d.count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct stp_dirent de;
		char n[STP_NAME_MAX + 1];
		int c;

		rc = stp_image_dirent(img, &d, mid, &de, n);
		if (rc)
			return rc;
		c = stp_name_cmp(name, len, n, de.name_len);
		if (c == 0) {
			*ino = de.ino;
			return 0;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -ENOENT;
}

int stp_image_resolve(const struct stp_image *img, const char *path, uint32_t *ino)
{
	uint32_t cur = STP_ROOT_INO;
	enum stp_path_part part;
	const char *name;
	size_t len;

	while ((part = stp_path_next(&path, &name, &len)) != STP_PATH_END) {
		struct stp_inode d;
		int rc;

		if (part == STP_PATH_PARENT) {
			rc = stp_image_inode(img, cur, &d);
			if (!rc && !S_ISDIR(d.mode))
				rc = -ENOTDIR;
			if (!rc)
				cur = d.parent;
		} else {
			rc = stp_image_lookup(img, cur, name, len, &cur);
		}
		if (rc)
			return rc;
	}
	*ino = cur;
	return 0;
}

int stp_image_readlink(const struct stp_image *img, const struct stp_inode *inode,
		       char target[STP_LINK_MAX + 1], size_t *len)
{
	int rc;

	if (!S_ISLNK(inode->mode))
		return -EINVAL;
	/* stp_image_inode bounded size by STP_LINK_MAX and the pool */
	rc = read_string(img, inode->data, inode->size, target);
	if (rc)
		return rc;
	/* a NUL would cut the target short wherever it is used as a C string */
	if (memchr(target, 0, inode->size))
		return STP_CORRUPT(img->path, "link target at %llu holds a NUL",
				   (unsigned long long)inode->data);
	target[inode->size] = '\0';
	*len = inode->size;
	return 0;
}


int stp_image_xattr(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		    struct stp_xattr *x, char name[STP_XATTR_NAME_MAX + 1])
{
	unsigned long long n = (unsigned long long)inode->xattr_first + index;
	uint8_t rec[STP_XATTR_SIZE];
	int rc;

	if (index >= inode->xattr_count)
		return -ENOENT;
	rc = meta_read(img, img->mh.xattr_off + n * STP_XATTR_SIZE, sizeof(rec), rec);
	if (rc)
		return rc;
	if (stp_xattr_decode(rec, x) ||
	    x->name_len == 0 || !range_ok(x->name_off, x->name_len, img->mh.strings_size) ||
	    !range_ok(x->value_off, x->value_len, img->mh.strings_size))
		return STP_CORRUPT(img->path, "extended attribute %llu out of range", n);
	/* What Linux accepts: getxattr and listxattr cannot return more than these, and a
	 * NUL would cut the name short in listxattr's list. */
	if (x->name_len <= STP_XATTR_NAME_MAX && x->value_len <= STP_XATTR_VALUE_MAX) {
		rc = read_string(img, x->name_off, x->name_len, name);
		if (rc)
			return rc;
		name[x->name_len] = '\0';
		if (!memchr(name, 0, x->name_len))
			return 0;
	}
	return STP_CORRUPT(img->path, "extended attribute %llu: name or value too long, "
			   "or a NUL in the name", n);
}

int stp_image_xattr_value(const struct stp_image *img, const struct stp_xattr *x, void *value)
{
	/* stp_image_xattr checked the range */
	return read_string(img, x->value_off, x->value_len, value);
}

int stp_image_extent(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		     struct stp_extent *out)
{
	uint8_t rec[STP_EXTENT_SIZE];
	int rc;

	if (index >= inode->count)
		return -ENOENT;
	rc = meta_read(img, img->mh.extent_off + (inode->data + index) * STP_EXTENT_SIZE,
		       sizeof(rec), rec);
	if (rc)
		return rc;
	stp_extent_decode(rec, out);
	if (out->length == 0 || !range_ok(out->stream_off, out->length, img->sb.data_size) ||
	    !range_ok(out->file_off, out->length, inode->size))
		return STP_CORRUPT(img->path, "extent %llu out of range",
				   (unsigned long long)(inode->data + index));
	return 0;
}

int stp_image_extent_find(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t off, uint32_t *index)
{
	uint32_t lo = 0, hi = inode->count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct stp_extent e;
		int rc = stp_image_extent(img, inode, mid, &e);

		if (rc)
			return rc;
		if (e.file_off + e.length <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	*index = lo;
	return 0;
}

size_t stp_image_block_decoded_size(const struct stp_image *img, uint64_t block)
{
	return (size_t)stp_sb_block_len(&img->sb, block);
}

/* Where stored blocks must end: before the signature block when there is one. */
static uint64_t data_end(const struct stp_image *img)
{
	return img->sb.feat_compat & STP_FEAT_COMPAT_SIGNED ? img->sb.sig_offset : img->sb.image_size;
}

int stp_image_block(const struct stp_image *img, uint64_t block, struct stp_blockent *out)
{
	size_t size = stp_image_block_decoded_size(img, block);
	uint8_t rec[STP_BLOCKENT_SIZE];
	int rc;

	if (block >= img->sb.block_count)
		return -EINVAL;
	rc = meta_read(img, img->mh.block_off + block * STP_BLOCKENT_SIZE, sizeof(rec), rec);
	if (rc)
		return rc;
	if (stp_blockent_decode(rec, out) ||
	    out->offset < STP_SB_SIZE || !range_ok(out->offset, out->stored_size, data_end(img)) ||
	    out->codec > STP_CODEC_ZSTD_DICT || out->filter > STP_FILTER_ARM64 ||
	    (out->codec == STP_CODEC_RAW && out->stored_size != size) ||
	    (out->codec == STP_CODEC_ZSTD_DICT && !img->ddict) ||
	    (out->filter == STP_FILTER_X86 && !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_BCJ_X86)) ||
	    (out->filter == STP_FILTER_ARM64 &&
	     !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_BCJ_ARM64)) ||
	    (out->codec == STP_CODEC_ZSTD_DICT && !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_DICT)) ||
	    out->stored_size > ZSTD_compressBound(size) ||
	    (out->codec != STP_CODEC_RAW && out->stored_size < size / STP_ZSTD_RATIO_MAX))
		return STP_CORRUPT(img->path, "block %llu: table entry invalid",
				   (unsigned long long)block);
	return 0;
}

/* The entry of metadata page PAGE, checked against what stipple(5) allows of it. */
int stp_image_meta_page(const struct stp_image *img, uint64_t page, struct stp_blockent *out)
{
	size_t size;

	if (!img->pagetab || page >= stp_meta_pages(&img->sb))
		return -EINVAL;
	size = stp_meta_page_len(&img->sb, page);
	if (stp_blockent_decode(img->pagetab + page * STP_BLOCKENT_SIZE, out) ||
	    out->offset < STP_SB_SIZE || !range_ok(out->offset, out->stored_size, data_end(img)) ||
	    out->codec > STP_CODEC_ZSTD || out->filter != STP_FILTER_NONE ||
	    (out->codec == STP_CODEC_RAW && out->stored_size != size) ||
	    out->stored_size > STP_META_PAGE_STORED_MAX ||
	    (out->codec == STP_CODEC_ZSTD && out->stored_size < size / STP_ZSTD_RATIO_MAX))
		return STP_CORRUPT(img->path, "metadata page %llu: table entry invalid",
				   (unsigned long long)page);
	return 0;
}

static int zstd_decode(const struct stp_image *img, const struct stp_blockent *be,
		       const void *src, void *out, size_t size, const char **why);

/* stp_metapages_load_fn: reads metadata page PAGE, checks it against its checksum (and,
 * opened verified, its signed hash) and decodes it into OUT. */
static int load_page(void *ctx, uint64_t page, uint8_t *out, size_t len)
{
	const struct stp_image *img = ctx;
	uint8_t stored[STP_META_PAGE_STORED_MAX];
	struct stp_blockent pe;
	const char *why;
	int rc = stp_image_meta_page(img, page, &pe);

	if (rc)
		return rc;
	rc = stp_imgsrc_read(img->src, stored, pe.stored_size, pe.offset);
	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(img->path, "metadata page %llu lies past the end of the file",
				   (unsigned long long)page);
	if (rc)
		return rc;
	if (stp_checksum(stored, pe.stored_size) != pe.checksum)
		return STP_CORRUPT(img->path, "metadata page %llu: checksum mismatch",
				   (unsigned long long)page);
	if (img->hashes && !hash_ok(img, stp_sig_hash_page(&img->sb, page), stored, pe.stored_size))
		return STP_CORRUPT(img->path, "metadata page %llu does not match its signed hash",
				   (unsigned long long)page);
	if (pe.codec == STP_CODEC_RAW) {
		memcpy(out, stored, len);
		return 0;
	}
	rc = zstd_decode(img, &pe, stored, out, len, &why);
	if (rc == -EUCLEAN)
		return STP_CORRUPT(img->path, "metadata page %llu does not decompress: %s",
				   (unsigned long long)page, why);
	return rc;
}

int stp_image_check_meta_page(const struct stp_image *img, uint64_t page)
{
	uint8_t *buf;
	int rc;

	if (!img->pagetab || page >= stp_meta_pages(&img->sb))
		return -EINVAL;
	buf = malloc(STP_META_PAGE_SIZE);
	if (!buf)
		return -ENOMEM;
	rc = load_page((void *)img, page, buf, stp_meta_page_len(&img->sb, page));
	free(buf);
	return rc;
}

/* One decompression context per thread, freed when the thread exits. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;

static void dctx_free(void *p) { ZSTD_freeDCtx(p); }
static void dctx_key_create(void) { pthread_key_create(&dctx_key, dctx_free); }

static ZSTD_DCtx *thread_dctx(void)
{
	ZSTD_DCtx *d;

	pthread_once(&dctx_once, dctx_key_create);
	d = pthread_getspecific(dctx_key);
	if (!d) {
		d = ZSTD_createDCtx();
		if (d && pthread_setspecific(dctx_key, d)) {
			ZSTD_freeDCtx(d);
			d = NULL;
		}
	}
	return d;
}

/* Decompresses SRC into OUT (SIZE bytes) with the thread's context; SRC may lie at the end
 * of OUT's buffer (in place, stp_image_block_buffer_size). On a bad frame, *WHY says why
 * and -EUCLEAN is returned, for the caller to report. */
static int zstd_decode(const struct stp_image *img, const struct stp_blockent *be,
		       const void *src, void *out, size_t size, const char **why)
{
	ZSTD_DCtx *d = thread_dctx();
	size_t n;

	if (!d)
		return -ENOMEM;
	/* through ZSTD_decompressDCtx either way: the one call in-place decoding supports */
	n = ZSTD_DCtx_refDDict(d, be->codec == STP_CODEC_ZSTD_DICT ? img->ddict : NULL);
	if (!ZSTD_isError(n))
		n = ZSTD_decompressDCtx(d, out, size, src, be->stored_size);
	if (!ZSTD_isError(n) && n == size)
		return 0;
	*why = ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size";
	return -EUCLEAN;
}

static int decompress(const struct stp_image *img, uint64_t block, const struct stp_blockent *be,
		      const void *src, void *out, size_t size)
{
	const char *why;
	int rc = zstd_decode(img, be, src, out, size, &why);

	if (rc == -EUCLEAN)
		return STP_CORRUPT(img->path, "block %llu does not decompress: %s",
				   (unsigned long long)block, why);
	return rc;
}

size_t stp_image_sb_buffer_size(const struct stp_superblock *sb)
{
	size_t bs = (size_t)1 << sb->block_log;

	return bs + ZSTD_DECOMPRESSION_MARGIN(bs, ZSTD_BLOCKSIZE_MAX);
}

size_t stp_image_block_buffer_size(const struct stp_image *img)
{
	return stp_image_sb_buffer_size(&img->sb);
}

/* Where the stored bytes of BE go: at the end of OUT (LEN bytes) when zstd can decode them
 * in place there, else (a frame no builder writes) in a buffer of their own: *OWN then. */
static uint8_t *stored_place(const struct stp_blockent *be, uint8_t *out, size_t len, bool *own)
{
	*own = false;
	if (be->codec == STP_CODEC_RAW)
		return out;
	if (be->stored_size <= len)
		return out + len - be->stored_size;
	*own = true;
	return malloc(be->stored_size ? be->stored_size : 1);
}

/* In place needs SIZE plus the frame's margin before the input: else move the input to a
 * buffer of its own (*OWN). */
static int check_in_place(const struct stp_image *img, uint64_t block, const struct stp_blockent *be,
			  uint8_t **stored, bool *own, size_t len, size_t size)
{
	size_t margin = ZSTD_decompressionMargin(*stored, be->stored_size);
	uint8_t *copy;

	if (ZSTD_isError(margin))
		return STP_CORRUPT(img->path, "block %llu does not decompress: %s",
				   (unsigned long long)block, ZSTD_getErrorName(margin));
	if (*own || (size <= len && margin <= len - size))
		return 0;
	copy = malloc(be->stored_size ? be->stored_size : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, *stored, be->stored_size);
	*stored = copy;
	*own = true;
	return 0;
}

/* The signed hash, when opened verified, stands for the checksum: it is the stronger. */
static int check_stored(const struct stp_image *img, uint64_t block, const struct stp_blockent *be,
			const uint8_t *stored)
{
	if (img->hashes) {
		if (!hash_ok(img, STP_SIG_HASH_BLOCK0 + block, stored, be->stored_size))
			return STP_CORRUPT(img->path, "block %llu does not match its signed hash",
					   (unsigned long long)block);
		return 0;
	}
	if (stp_checksum(stored, be->stored_size) != be->checksum)
		return STP_CORRUPT(img->path, "block %llu: checksum mismatch",
				   (unsigned long long)block);
	return 0;
}

/* Reads block BLOCK's stored bytes into BUF. */
static int read_stored(const struct stp_image *img, uint64_t block, const struct stp_blockent *be,
		       uint8_t *buf)
{
	int rc = stp_imgsrc_read(img->src, buf, be->stored_size, be->offset);

	if (rc == STP_IMGSRC_END)
		return STP_CORRUPT(img->path, "block %llu lies past the end of the file",
				   (unsigned long long)block);
	return rc;
}

/* Opened verified, a compressed block is read into a buffer of its own and hashed on
 * the hasher's thread while this one decodes it (in place, zstd would overwrite the
 * input being hashed); OUT counts only once the hash matches. */
static int decode_verified(const struct stp_image *img, uint64_t block,
			   const struct stp_blockent *be, void *out, size_t size)
{
	uint8_t *stored = malloc(be->stored_size ? be->stored_size : 1);
	uint8_t h[STP_SIG_HASH_SIZE];
	int rc;

	if (!stored)
		return -ENOMEM;
	rc = read_stored(img, block, be, stored);
	if (!rc) {
		const char *why = NULL;

		stp_hasher_start(stored, be->stored_size);
		rc = zstd_decode(img, be, stored, out, size, &why);
		stp_hasher_wait(h);
		/* damage shows as a wrong hash first, whatever the decoder made of it */
		if (memcmp(h, img->hashes + (STP_SIG_HASH_BLOCK0 + block) * STP_SIG_HASH_LEN,
			   STP_SIG_HASH_LEN))
			rc = STP_CORRUPT(img->path, "block %llu does not match its signed hash",
					 (unsigned long long)block);
		else if (rc == -EUCLEAN)
			rc = STP_CORRUPT(img->path, "block %llu does not decompress: %s",
					 (unsigned long long)block, why);
	}
	free(stored);
	return rc;
}

/* Reads block BLOCK's stored bytes into *STORED, at the end of OUT (LEN bytes) where
 * they fit (else a buffer of their own: *OWN), and checks them. */
static int load_stored(const struct stp_image *img, uint64_t block, const struct stp_blockent *be,
		       uint8_t *out, size_t len, uint8_t **stored, bool *own)
{
	int rc;

	*stored = stored_place(be, out, len, own);
	if (!*stored)
		return -ENOMEM;
	rc = read_stored(img, block, be, *stored);
	return rc ? rc : check_stored(img, block, be, *stored);
}

/* Reads block BLOCK's stored bytes at the end of OUT (LEN bytes), checks them and decodes
 * them there. */
static int decode_in_place(const struct stp_image *img, uint64_t block,
			   const struct stp_blockent *be, void *out, size_t len, size_t size)
{
	bool own = false;
	uint8_t *stored = NULL;
	int rc = load_stored(img, block, be, out, len, &stored, &own);

	if (!rc && be->codec != STP_CODEC_RAW)
		rc = check_in_place(img, block, be, &stored, &own, len, size);
	if (!rc && be->codec != STP_CODEC_RAW)
		rc = decompress(img, block, be, stored, out, size);
	if (own)
		free(stored);
	return rc;
}

/* Where zstd may write while it decodes one zstd block into OUT at OP: a block never
 * decodes to more than ZSTD_BLOCKSIZE_MAX, and zstd writes nothing past the capacity it
 * is given, scratch space for literals included. */
static size_t piece_capacity(size_t op, size_t size)
{
	return size - op < ZSTD_BLOCKSIZE_MAX ? size - op : ZSTD_BLOCKSIZE_MAX;
}

/* Contexts of ended stream decodes, kept for the next ones: a new context is a new
 * mapping of some 100 KiB, faulted in page by page, which costs a 1 MiB block's decode
 * a tenth more. */
#define DCTX_POOL 4
static pthread_mutex_t dctx_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static ZSTD_DCtx *dctx_pool[DCTX_POOL];
static unsigned dctx_pooled;

static ZSTD_DCtx *dctx_take(void)
{
	ZSTD_DCtx *d = NULL;

	pthread_mutex_lock(&dctx_pool_lock);
	if (dctx_pooled)
		d = dctx_pool[--dctx_pooled];
	pthread_mutex_unlock(&dctx_pool_lock);
	return d ? d : ZSTD_createDCtx();
}

static void dctx_give(ZSTD_DCtx *d)
{
	pthread_mutex_lock(&dctx_pool_lock);
	if (d && dctx_pooled < DCTX_POOL) {
		dctx_pool[dctx_pooled++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&dctx_pool_lock);
	ZSTD_freeDCtx(d);
}

/* A block decode under way (stp_image_decode_begin). */
struct stp_decode {
	const struct stp_image *img;
	uint64_t block;
	struct stp_blockent be;
	const struct stp_decode_ops *ops;
	void *ctx;
	ZSTD_DCtx *d;          /* its own: the decode may go on on another thread */
	uint64_t pos;          /* the block's stream position, for the filter */
	uint8_t *out;          /* the buffer, LEN bytes; the decoded bytes go at its start */
	size_t len, size;
	uint8_t *stored;       /* the stored bytes, at the end of OUT unless OWN */
	bool own;
	const uint8_t *src;    /* the stored bytes not read yet start at src + ip */
	size_t ip, in_len;
	uint8_t *moved;        /* the unread stored bytes, once moved out of OUT */
	bool in_out;           /* src lies in OUT (in place) */
	bool in_frame;         /* a frame was begun and has not ended */
	size_t op, told;       /* bytes decoded; the last count FN was given */
	int rc;                /* 1: pieces left; 0: done; or the decode's error */
};

/* In place, the writes of the next zstd block, [OP, OP + capacity), must stay below the
 * stored bytes not read yet. The builder's frames keep that with the margin of
 * stp_image_block_buffer_size; any other frame gets its unread bytes moved out first. */
static int keep_apart(struct stp_decode *p)
{
	size_t at;

	if (!p->in_out)
		return 0;
	at = (size_t)(p->src - p->out) + p->ip;
	if (p->op + piece_capacity(p->op, p->size) <= at)
		return 0;
	p->moved = malloc(p->in_len - p->ip ? p->in_len - p->ip : 1);
	if (!p->moved)
		return -ENOMEM;
	memcpy(p->moved, p->src + p->ip, p->in_len - p->ip);
	p->src = p->moved;
	p->in_len -= p->ip;
	p->ip = 0;
	p->in_out = false;
	return 0;
}

static void tell(struct stp_decode *p)
{
	p->ops->decoded(p->ctx, p->op);
	p->told = p->op;
}

/* Decodes the frames of P zstd block by zstd block (zstd's buffer-less API: the window is
 * the output itself, and every call is told exactly where it may write), telling OPS how
 * many bytes are decoded every STP_DECODE_STEP bytes, until UNTIL bytes are. 1: stopped
 * there, 0: the block is done; -EUCLEAN with *WHY on a bad frame. */
static int decode_pieces(struct stp_decode *p, size_t until, const char **why)
{
	const ZSTD_DDict *ddict = p->be.codec == STP_CODEC_ZSTD_DICT ? p->img->ddict : NULL;
	size_t need, n;
	int rc;

	*why = "truncated";
	while (p->ip < p->in_len || p->in_frame) {
		if (p->op >= until && p->op < p->size)
			return 1;
		if (!p->in_frame) {
			n = ZSTD_decompressBegin_usingDDict(p->d, ddict);
			if (ZSTD_isError(n))
				goto bad;
			p->in_frame = true;
		}
		need = ZSTD_nextSrcSizeToDecompress(p->d);
		if (!need) {
			p->in_frame = false; /* a frame ended: another may follow */
			continue;
		}
		if (need > p->in_len - p->ip)
			return -EUCLEAN;
		if ((rc = keep_apart(p)))
			return rc;
		n = ZSTD_decompressContinue(p->d, p->out + p->op, piece_capacity(p->op, p->size),
					    p->src + p->ip, need);
		if (ZSTD_isError(n))
			goto bad;
		p->op += n;
		p->ip += need;
		if (p->op - p->told >= STP_DECODE_STEP && p->op < p->size)
			tell(p);
	}
	if (p->op == p->size)
		return 0;
	*why = "wrong size";
	return -EUCLEAN;
bad:
	*why = ZSTD_getErrorName(n);
	return -EUCLEAN;
}

/* Whether BE's block is decoded in pieces: only where pieces can be told of. Opened
 * verified, the signed hash is checked first, on this thread (it vouches only for the
 * whole stored block); a filtered block is told of still filtered and unfiltered last. */
static bool streams(const struct stp_decode_ops *ops, const struct stp_blockent *be)
{
	return ops && be->codec != STP_CODEC_RAW &&
	       (be->filter == STP_FILTER_NONE || ops->unfiltered);
}

/* Reads P's stored bytes at the end of its buffer and checks them, before any piece. */
static int stream_start(struct stp_decode *p)
{
	int rc = load_stored(p->img, p->block, &p->be, p->out, p->len, &p->stored, &p->own);

	p->src = p->stored;
	p->in_out = !p->own;
	p->in_len = p->be.stored_size;
	if (!rc && !(p->d = dctx_take()))
		rc = -ENOMEM;
	return rc;
}

static size_t unfilter_next(const struct stp_decode *p, size_t avail)
{
	return p->size - avail > STP_DECODE_STEP ? avail + STP_DECODE_STEP : p->size;
}

/* The whole block is decompressed, still filtered: undoes the filter in place, step by
 * step, each step's bytes claimed first (the step reads and changes bytes below AVAIL
 * only), telling as it goes. */
static void unfilter_in_place(struct stp_decode *p)
{
	struct stp_bcj_state st;
	size_t avail = unfilter_next(p, 0), final;

	stp_bcj_begin(&st, p->be.filter);
	p->ops->unfiltered(p->ctx, 0, avail);
	for (;;) {
		final = stp_bcj_step(&st, p->out, avail, p->pos, 0, avail == p->size);
		if (avail == p->size)
			return;
		avail = unfilter_next(p, avail);
		p->ops->unfiltered(p->ctx, final, avail);
	}
}

/* The whole block at once, as stp_image_decode_block always did. */
static int decode_whole(struct stp_decode *p)
{
	int rc;

	if (p->img->hashes && p->be.codec != STP_CODEC_RAW)
		rc = decode_verified(p->img, p->block, &p->be, p->out, p->size);
	else
		rc = decode_in_place(p->img, p->block, &p->be, p->out, p->len, p->size);
	if (!rc && p->be.filter != STP_FILTER_NONE)
		rc = stp_bcj_apply(p->be.filter, p->out, p->size,
				   stp_sb_block_start(&p->img->sb, p->block), 0);
	return rc;
}

int stp_image_decode_begin(const struct stp_image *img, uint64_t block, void *out,
			   const struct stp_decode_ops *ops, void *ctx, struct stp_decode **out_d)
{
	struct stp_decode *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	*p = (struct stp_decode){ .img = img, .block = block, .ops = ops, .ctx = ctx, .out = out,
				  .len = stp_image_block_buffer_size(img),
				  .size = stp_image_block_decoded_size(img, block),
				  .pos = stp_sb_block_start(&img->sb, block), .rc = 1 };
	rc = stp_image_block(img, block, &p->be);
	if (!rc && !streams(ops, &p->be))
		p->rc = rc = decode_whole(p);
	else if (!rc)
		rc = stream_start(p);
	if (rc) {
		stp_image_decode_free(p);
		return rc;
	}
	*out_d = p;
	return 0;
}

int stp_image_decode_continue(struct stp_decode *p, size_t until)
{
	const char *why;

	if (p->rc != 1)
		return p->rc;
	p->rc = decode_pieces(p, until, &why);
	if (p->rc == -EUCLEAN)
		p->rc = STP_CORRUPT(p->img->path, "block %llu does not decompress: %s",
				    (unsigned long long)p->block, why);
	if (p->rc == 1 && p->op > p->told)
		tell(p); /* the caller's bytes are there: it may go */
	if (p->rc == 0 && p->be.filter != STP_FILTER_NONE && p->told < p->size) {
		tell(p); /* all of it, still filtered */
		if (until != SIZE_MAX)
			return p->rc = 1; /* the caller copies its bytes; the unfilter is left */
	}
	if (p->rc == 0 && p->be.filter != STP_FILTER_NONE)
		unfilter_in_place(p);
	return p->rc;
}

void stp_image_decode_free(struct stp_decode *p)
{
	if (!p)
		return;
	dctx_give(p->d);
	free(p->moved);
	if (p->own)
		free(p->stored);
	free(p);
}

unsigned stp_image_decode_filter(const struct stp_decode *p)
{
	return p->d ? p->be.filter : STP_FILTER_NONE; /* a whole decode is final */
}

int stp_image_decode_copy(const struct stp_decode *p, size_t from, size_t len, void *dst)
{
	size_t end = from + len, stop, base;
	struct stp_bcj_state st;
	uint8_t *tmp;

	if (p->be.filter == STP_FILTER_NONE || !len) {
		memcpy(dst, p->out + from, len);
		return 0;
	}
	stop = p->size - end > STP_DECODE_LOOKAHEAD ? end + STP_DECODE_LOOKAHEAD : p->size;
	base = stp_bcj_restart(p->be.filter, p->out, from, p->pos, STP_DECODE_BACK);
	if (base == SIZE_MAX)
		return -EAGAIN;
	tmp = malloc(stop - base);
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, p->out + base, stop - base);
	stp_bcj_begin(&st, p->be.filter);
	stp_bcj_step(&st, tmp, stop - base, p->pos + base, 0, stop == p->size);
	memcpy(dst, tmp + (from - base), len);
	free(tmp);
	return 0;
}

int stp_image_decode_block(const struct stp_image *img, uint64_t block, void *out)
{
	return stp_image_decode_block_stream(img, block, out, NULL, NULL);
}

int stp_image_decode_block_stream(const struct stp_image *img, uint64_t block, void *out,
				  const struct stp_decode_ops *ops, void *ctx)
{
	struct stp_decode *d;
	int rc = stp_image_decode_begin(img, block, out, ops, ctx, &d);

	if (rc)
		return rc;
	rc = stp_image_decode_continue(d, SIZE_MAX);
	stp_image_decode_free(d);
	return rc;
}
