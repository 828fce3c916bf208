/* SPDX-License-Identifier: MIT */
/* Decoding a block: zstd with the image's dictionary, in place in one buffer, beside the
 * hasher when opened verified, or in pieces told as they arrive; then the BCJ filter
 * undone. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_decompressionMargin, for in-place decoding */
#include "image_internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bcj.h"
#include "hash.h"
#include "imgsrc.h"
#include "log.h"

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
int img_zstd_decode(const struct stp_image *img, const struct stp_blockent *be,
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
	int rc = img_zstd_decode(img, be, src, out, size, &why);

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

int stp_image_stored_apart(const struct stp_image *img, const struct stp_blockent *be)
{
	return be->codec != STP_CODEC_RAW && be->stored_size <= (1ull << img->sb.block_log) / 32;
}

/* Where the stored bytes of BE go: at the end of OUT (LEN bytes) when zstd can decode them
 * in place there, else (a cut, stp_image_stored_apart, or a frame no builder writes) in a
 * buffer of their own: *OWN then. */
static uint8_t *stored_place(const struct stp_image *img, const struct stp_blockent *be,
			     uint8_t *out, size_t len, bool *own)
{
	*own = false;
	if (be->codec == STP_CODEC_RAW)
		return out;
	if (be->stored_size <= len && !stp_image_stored_apart(img, be))
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

/* Undoes BE's filter, if any, over block BLOCK decoded whole in OUT (SIZE bytes). */
static int unfilter_whole(const struct stp_image *img, uint64_t block,
			  const struct stp_blockent *be, void *out, size_t size)
{
	if (be->filter == STP_FILTER_NONE)
		return 0;
	return stp_bcj_apply(be->filter, out, size, stp_sb_filter_start(&img->sb, block), 0);
}

/* Decodes block BLOCK's checked stored bytes STORED into OUT (SIZE bytes), its filter
 * undone. A RAW block's STORED may be OUT itself (stored_place). */
static int decode_from(const struct stp_image *img, uint64_t block,
		       const struct stp_blockent *be, const void *stored, void *out, size_t size)
{
	int rc = 0;

	if (be->codec != STP_CODEC_RAW)
		rc = decompress(img, block, be, stored, out, size);
	else if (stored != out)
		memcpy(out, stored, size); /* stp_image_block: RAW stores SIZE bytes */
	return rc ? rc : unfilter_whole(img, block, be, out, size);
}

/* Opened verified, a compressed block is read into a buffer of its own and hashed on
 * the hasher's thread while this one decodes it (in place, zstd would overwrite the
 * input being hashed); OUT counts only once the hash matches. */
static int decode_verified(const struct stp_image *img, uint64_t block,
			   const struct stp_blockent *be, void *out, size_t size)
{
	struct img_part p = img_block_part(block, be);
	uint8_t *stored = malloc(be->stored_size ? be->stored_size : 1);
	uint8_t h[STP_SIG_HASH_SIZE];
	int rc;

	if (!stored)
		return -ENOMEM;
	rc = img_part_read(img, &p, stored);
	if (!rc) {
		const char *why = NULL;

		img->hash->start(stored, be->stored_size);
		rc = img_zstd_decode(img, be, stored, out, size, &why);
		img->hash->wait(h);
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
	struct img_part p = img_block_part(block, be);

	*stored = stored_place(img, be, out, len, own);
	if (!*stored)
		return -ENOMEM;
	return img_part_load(img, &p, *stored);
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
	if (!rc)
		rc = decode_from(img, block, be, stored, out, size);
	if (own)
		free(stored);
	return rc;
}

/* Where zstd may write while it decodes one zstd block into OUT at OP, the bytes below
 * END being the decode's: a block never decodes to more than ZSTD_BLOCKSIZE_MAX, and
 * zstd writes nothing past the capacity it is given, scratch space for literals included
 * (it puts a large block's literals at the end of that capacity). */
static size_t piece_capacity(size_t op, size_t end)
{
	return end - op < ZSTD_BLOCKSIZE_MAX ? end - op : ZSTD_BLOCKSIZE_MAX;
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
	uint64_t pos;          /* the position the filter counts from (stp_sb_filter_start) */
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
	size_t body;           /* the bytes decoded; zeros follow up to SIZE (zero_tail) */
	size_t stop_ip;        /* the decode ends when it reaches this stored byte */
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
	if (p->op + piece_capacity(p->op, p->body) <= at)
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
	while ((p->ip < p->in_len || p->in_frame) && p->ip != p->stop_ip) {
		if (p->op >= until && p->op < p->body)
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
		/* up to the body only: past it lie the zero tail's bytes, which no later block
		 * would overwrite */
		n = ZSTD_decompressContinue(p->d, p->out + p->op, piece_capacity(p->op, p->body),
					    p->src + p->ip, need);
		if (ZSTD_isError(n))
			goto bad;
		p->op += n;
		p->ip += need;
		if (p->op - p->told >= STP_DECODE_STEP && p->op < p->body)
			tell(p);
	}
	if (p->op == p->body)
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

/* Where the run of zero blocks (zstd RLE blocks of byte 0) that ends P's frame begins:
 * sets P's body and stop_ip there when the stored bytes are one frame of the block's
 * size, with no checksum, whose tail is half the block or more (a cut; not the padding
 * of a stable block, whose reads stay as they were) and leaves room for the stored
 * bytes and a zstd block past the body (the caller then keeps the body and the stored
 * bytes apart). Anything else is decoded whole, and any fault is zstd's to report. */
static void find_zero_tail(struct stp_decode *p)
{
	const uint8_t *s = p->stored;
	size_t at, tail_at = 0, tail = 0, len = p->be.stored_size;
	bool last = false;
	ZSTD_frameHeader fh;

	if (ZSTD_getFrameHeader(&fh, s, len) || fh.frameType != ZSTD_frame ||
	    fh.frameContentSize != p->size || fh.checksumFlag)
		return;
	for (at = fh.headerSize; at + 3 <= len;) {
		uint32_t bh = (uint32_t)s[at] | (uint32_t)s[at + 1] << 8 | (uint32_t)s[at + 2] << 16;
		unsigned type = bh >> 1 & 3;
		size_t bsize = bh >> 3, in = type == 1 ? 1 : bsize;

		if (type == 3 || bsize > fh.blockSizeMax || in > len - at - 3)
			return;
		if (type == 1 && s[at + 3] == 0) {
			if (!tail)
				tail_at = at;
			tail += bsize;
		} else {
			tail = 0;
		}
		at += 3 + in;
		if ((last = bh & 1))
			break;
	}
	if (!last || at != len || tail < p->size / 2 || tail > p->size ||
	    p->size - tail + ZSTD_BLOCKSIZE_MAX + len > p->size)
		return;
	p->body = p->size - tail;
	p->stop_ip = tail_at;
}

/* Reads P's stored bytes at the end of its buffer and checks them, before any piece. */
static int stream_start(struct stp_decode *p)
{
	int rc = load_stored(p->img, p->block, &p->be, p->out, p->len, &p->stored, &p->own);

	p->src = p->stored;
	p->in_out = !p->own;
	p->in_len = p->be.stored_size;
	if (!rc && p->ops->zero_tail)
		find_zero_tail(p);
	if (!rc && !(p->d = dctx_take()))
		rc = -ENOMEM;
	return rc;
}

/* Where the unfilter ends: the block's end, or a little past its body (a call's address
 * in the body's last bytes reaches past it; the zeros further on have no call). */
static size_t unfilter_end(const struct stp_decode *p)
{
	return p->size - p->body > STP_DECODE_TAIL_SLACK ? p->body + STP_DECODE_TAIL_SLACK : p->size;
}

static size_t unfilter_next(const struct stp_decode *p, size_t avail)
{
	size_t end = unfilter_end(p);

	return end - avail > STP_DECODE_STEP ? avail + STP_DECODE_STEP : end;
}

/* The whole block is decompressed, still filtered: undoes the filter in place, step by
 * step, each step's bytes claimed first (the step reads and changes bytes below AVAIL
 * only), telling as it goes. */
static void unfilter_in_place(struct stp_decode *p)
{
	struct stp_bcj_state st;
	size_t avail = unfilter_next(p, 0), end = unfilter_end(p), final;

	stp_bcj_begin(&st, p->be.filter);
	p->ops->unfiltered(p->ctx, 0, avail);
	for (;;) {
		final = stp_bcj_step(&st, p->out, avail, p->pos, 0, avail == end);
		if (avail == end)
			return;
		avail = unfilter_next(p, avail);
		p->ops->unfiltered(p->ctx, final, avail);
	}
}

/* The whole block at once, as stp_image_decode_block always did. */
static int decode_whole(struct stp_decode *p)
{
	int rc;

	if (!p->img->hashes || p->be.codec == STP_CODEC_RAW)
		return decode_in_place(p->img, p->block, &p->be, p->out, p->len, p->size);
	rc = decode_verified(p->img, p->block, &p->be, p->out, p->size);
	return rc ? rc : unfilter_whole(p->img, p->block, &p->be, p->out, p->size);
}

/* Opened verified, whether P's rebuilt content is the one the signature vouches for. A
 * content that differs came from a source that lied (a hostile index or fetcher). */
static bool content_signed(const struct stp_decode *p)
{
	if (p->img->hash->ok(p->img, stp_sig_hash_content(&p->img->sb, p->block), p->out,
			     p->size))
		return true;
	stp_log(STP_LOG_WARN, "%s: block %llu rebuilt from a delta does not match its "
		"signed content hash; reading the block instead", p->img->path,
		(unsigned long long)p->block);
	return false;
}

/* The block's content from its source (imgsrc.h: a published image's delta), its
 * filter then undone: -ENOENT when the source has none, and, opened verified, when the
 * image was signed without content hashes or the content is not the signed one; the
 * block is then read (stipple(5), Delta entry). 1 when the content is whole but still
 * filtered and P's caller is told in pieces: the unfilter is continue's, step by step,
 * as after a stream's decode, so that a read waits only for its own bytes. */
static int decode_content(struct stp_decode *p)
{
	const struct stp_image *img = p->img;
	int rc;

	if (p->be.codec != STP_CODEC_ZSTD || !img->src->content ||
	    (img->hashes && !(img->sb.feat_incompat & STP_FEAT_INCOMPAT_CONTENT_HASHES)))
		return -ENOENT;
	rc = img->src->content(img->src, p->block, p->out, p->size);
	if (!rc && img->hashes && !content_signed(p))
		rc = -ENOENT;
	if (rc)
		return rc;
	if (p->be.filter != STP_FILTER_NONE && streams(p->ops, &p->be)) {
		p->op = p->size; /* decode_pieces has nothing left but the unfilter */
		return 1;
	}
	return unfilter_whole(img, p->block, &p->be, p->out, p->size);
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
				  .pos = stp_sb_filter_start(&img->sb, block), .rc = 1,
				  .stop_ip = SIZE_MAX };
	p->body = p->size;
	rc = stp_image_block(img, block, &p->be);
	if (!rc && (rc = decode_content(p)) != -ENOENT) {
		p->rc = rc; /* rebuilt whole (1: its unfilter left), or failed */
		rc = rc < 0 ? rc : 0;
	} else if (rc == -ENOENT && !streams(ops, &p->be))
		p->rc = rc = decode_whole(p);
	else if (rc == -ENOENT)
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
	if (p->rc == 0 && p->be.filter != STP_FILTER_NONE && p->told < p->body) {
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

size_t stp_image_decode_body(const struct stp_decode *p)
{
	return p->body;
}

unsigned stp_image_decode_filter(const struct stp_decode *p)
{
	/* a decode ended in begin is final; one in pieces (a stream, or a content whose
	 * unfilter is left) is not */
	return p->rc == 1 ? p->be.filter : STP_FILTER_NONE;
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

int stp_image_decode_stored(const struct stp_image *img, uint64_t block,
			    const struct stp_blockent *be, const void *stored, void *out)
{
	return decode_from(img, block, be, stored, out, stp_image_block_decoded_size(img, block));
}
