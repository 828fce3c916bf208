/* SPDX-License-Identifier: MIT */
/* The metadata of an image: decoded whole at open, or paged: its page table read at open,
 * its pages read, checked and decoded as records are asked for. */
#include "image_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "imgsrc.h"
#include "log.h"
#include "metapages.h"

/* Reads stored part PART (the metadata or the dictionary) into a new buffer and checks
 * it against its checksum, and, opened verified, against its signed hash. */
static int read_checked(struct stp_image *img, uint64_t part, uint8_t **out)
{
	struct img_part p;
	uint8_t *buf;
	int rc = img_part_find(img, part, &p);

	if (rc)
		return rc;
	buf = malloc(p.be.stored_size ? p.be.stored_size : 1);
	if (!buf)
		return -ENOMEM;
	rc = img_part_load(img, &p, buf);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/* The full OUT of inflate_metadata grows: to *CAP bytes the first time, then twice its
 * size, never past MAX. */
static int grow_output(ZSTD_outBuffer *out, size_t *cap, uint64_t max)
{
	void *grown;

	if (out->size && __builtin_mul_overflow(out->size, 2, cap))
		return -ENOMEM;
	out->size = *cap < max ? *cap : max;
	grown = reallocarray(out->dst, out->size, 1);
	if (!grown)
		return -ENOMEM;
	out->dst = grown;
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
		if (out.pos == out.size && (rc = grow_output(&out, &cap, sb->meta_size + 1)))
			break;
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
		    img_range_ok(pe.offset, pe.stored_size, sb->image_size))
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

void stp_image_read_meta_ahead(const struct stp_image *img)
{
	struct span s = { UINT64_MAX, 0 };

	if (!img->pagetab)
		return;
	each_page_range(&img->sb, img->pagetab, widen_span, &s);
	if (s.lo < s.hi && img->fd >= 0) /* a file: a URL's bytes come as they are asked for */
		posix_fadvise(img->fd, (off_t)s.lo, (off_t)(s.hi - s.lo), POSIX_FADV_WILLNEED);
}

/* Paged metadata: the page table is all that is read now; pages come as reads need them. */
static int open_pages(struct stp_image *img, uint8_t *table)
{
	img->pagetab = table;
	return stp_metapages_create(img->sb.meta_size, STP_IMAGE_META_BUDGET, load_page, img,
				    &img->pages);
}

/* LEN bytes of decoded metadata at OFF into DST; the caller has bounded the range by the
 * header's tables, which lie inside meta_size. */
int img_meta_read(const struct stp_image *img, uint64_t off, size_t len, void *dst)
{
	if (img->pages)
		return stp_metapages_read(img->pages, off, len, dst);
	memcpy(dst, img->meta + off, len);
	return 0;
}

int img_load_metadata(struct stp_image *img)
{
	const struct stp_superblock *sb = &img->sb;
	uint8_t *stored, head[STP_META_HDR_SIZE];
	int rc;

	/* stp_sb_decode bounded meta_stored_size and meta_size, and the file holds them */
	rc = read_checked(img, STP_SIG_HASH_META, &stored);
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
	rc = img_meta_read(img, 0, sizeof(head), head);
	if (rc)
		return rc;
	if (stp_meta_header_decode(head, img->meta_len, &img->mh))
		return STP_CORRUPT(img->path, "metadata header invalid");
	if (img->mh.inode_count != sb->inode_count || img->mh.block_count != sb->block_count)
		return STP_CORRUPT(img->path, "metadata counts disagree with the superblock");
	if ((img->mh.lookup_count || img->mh.lookup_off) &&
	    !(sb->feat_incompat & STP_FEAT_INCOMPAT_LOOKUPS))
		return STP_CORRUPT(img->path, "lookup table without its feature bit");
	return 0;
}

int img_load_dictionary(struct stp_image *img)
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
	rc = read_checked(img, STP_SIG_HASH_DICT, &dict);
	if (rc)
		return rc;
	img->ddict = ZSTD_createDDict(dict, img->sb.dict_size);
	free(dict);
	if (!img->ddict)
		return STP_CORRUPT(img->path, "dictionary does not load");
	return 0;
}

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

/* The entry of metadata page PAGE, checked against what stipple(5) allows of it. */
int stp_image_meta_page(const struct stp_image *img, uint64_t page, struct stp_blockent *out)
{
	size_t size;

	if (!img->pagetab || page >= stp_meta_pages(&img->sb))
		return -EINVAL;
	size = stp_meta_page_len(&img->sb, page);
	if (stp_blockent_decode(img->pagetab + page * STP_BLOCKENT_SIZE, out) ||
	    out->offset < STP_SB_SIZE ||
	    !img_range_ok(out->offset, out->stored_size, img_data_end(img)) ||
	    out->codec > STP_CODEC_ZSTD || out->filter != STP_FILTER_NONE ||
	    (out->codec == STP_CODEC_RAW && out->stored_size != size) ||
	    out->stored_size > STP_META_PAGE_STORED_MAX ||
	    (out->codec == STP_CODEC_ZSTD && out->stored_size < size / STP_ZSTD_RATIO_MAX))
		return STP_CORRUPT(img->path, "metadata page %llu: table entry invalid",
				   (unsigned long long)page);
	return 0;
}

/* stp_metapages_load_fn: reads metadata page PAGE, checks it against its checksum (and,
 * opened verified, its signed hash) and decodes it into OUT. */
static int load_page(void *ctx, uint64_t page, uint8_t *out, size_t len)
{
	const struct stp_image *img = ctx;
	uint8_t stored[STP_META_PAGE_STORED_MAX];
	struct img_part p;
	const char *why;
	int rc = img_part_find(img, stp_sig_hash_page(&img->sb, page), &p);

	if (!rc)
		rc = img_part_load(img, &p, stored);
	if (rc)
		return rc;
	if (p.be.codec == STP_CODEC_RAW) {
		memcpy(out, stored, len);
		return 0;
	}
	rc = img_zstd_decode(img, &p.be, stored, out, len, &why);
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
