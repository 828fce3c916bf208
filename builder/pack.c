/* SPDX-License-Identifier: MIT */
/*
 * Packing file data into compressed blocks. The main thread reads files into block
 * slots; workers compress full slots; the main thread writes them back in block order.
 */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_estimateCCtxSize_usingCCtxParams, CDict from params */
#include "pack.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "bcj.h"
#include "cuts.h"
#include "dict.h"
#include "progress.h"
#include "format.h"
#include "report.h"
#include "source.h"
#include "tree.h"
#include "util.h"

#define STAGE_SIZE (1u << 20)
#define ZERO_STEP 4096u /* holes are looked for a file page at a time */
#define HOLE_MIN PACK_HOLE_MIN

struct slot {
	uint8_t *in, *out;
	size_t len;          /* bytes filled */
	size_t body;         /* bytes up to the last that are not padding */
	size_t stored_len;
	size_t plain_len;    /* what it would store without the dictionary */
	uint8_t codec, filter;
	uint64_t checksum;
	uint64_t block;      /* its number in the stream */
	uint64_t start;      /* the stream offset of its first byte */
	uint64_t code[3];    /* bytes of machine code by enum stp_filter */
	uint64_t in_done;    /* input bytes read when it was submitted: done once written */
	int hot;             /* a block of the hot region: compressed whole, whatever
			      * end_body says, so that it comes out the same with or without
			      * --cut-inside (a release and the next built on it) */
	int state;           /* protected by packer.lock */
	int err;
};

enum { SLOT_FREE, SLOT_QUEUED, SLOT_DONE };

struct packer {
	const struct pack_opts *o;
	size_t block_size;
	size_t fill_size;        /* of the block being filled: a hot block's or block_size */
	int fd;
	uint64_t pos;            /* image offset of the next block */
	uint64_t stream;         /* stream bytes so far */
	struct slot *slots;
	unsigned nslots, nworkers;
	pthread_t *workers;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t submitted, taken, written; /* block counters; protected by lock */
	int shutdown;                       /* protected by lock */
	struct stp_blockent *blocks;
	uint64_t blocks_cap;
	uint8_t *stage;
	uint64_t total_in, done_in;
	unsigned changed, failed; /* files stored as last read, files that could not be */
	int broken;          /* a block could not be compressed or written: ends the build */
	unsigned filters;    /* bit per enum stp_filter written */
	const ZSTD_CDict *cdict; /* shared read-only by the workers; NULL: none */
	size_t cdict_size;       /* its tables and the dictionary */
	uint64_t dict_gain;  /* sum of plain_len - stored_len over the blocks written */
	uint64_t dict_blocks;/* blocks written with the dictionary */
	const struct originals *orig; /* files that others copy */
	struct cut_rule cuts;    /* stable layout only */
	struct cut_rule hot_cuts;/* the same rule for the hot region's blocks */
	uint64_t block_base;     /* stream offset where blocks of block_size begin */
	int cut_pending;         /* end the block before the next piece */
	int hot_done;            /* the blocks submitted from now on are cold */
};

/* The files others are copies of, by node address, each with the hash of the bytes its
 * copies were compared with: only these are hashed again when packed, and only they
 * keep a hash (a node has no room for one). */
struct original {
	const struct node *n;
	uint64_t hash[2];
};

struct originals {
	struct original *v;
	size_t n;
};

static int cmp_original(const void *a, const void *b)
{
	const struct node *x = ((const struct original *)a)->n, *y = ((const struct original *)b)->n;

	return (x > y) - (x < y);
}

/* F's hash when it is an original, else NULL. */
static const uint64_t *original_hash(const struct originals *o, const struct node *f)
{
	struct original key = { .n = f };
	const struct original *hit;

	if (!f->copied)
		return NULL;
	hit = bsearch(&key, o->v, o->n, sizeof(*o->v), cmp_original);
	return hit ? hit->hash : NULL;
}

/* What a worker owns: its context and room for the attempts after the first one: the
 * filtered input (BCJ) and the compressed output (BCJ or dictionary). */
struct worker {
	ZSTD_CCtx *cctx;
	ZSTD_CCtx *trial; /* the BCJ trial's, made when first needed */
	uint8_t *fin, *fout;
};

static unsigned window_log(unsigned block_log)
{
	return block_log > ZSTD_WINDOWLOG_MAX_64 ? ZSTD_WINDOWLOG_MAX_64 : block_log;
}

static ZSTD_CCtx_params *make_params(const struct pack_opts *o)
{
	ZSTD_CCtx_params *p = ZSTD_createCCtxParams();

	if (!p)
		return NULL;
	ZSTD_CCtxParams_init(p, o->level);
	ZSTD_CCtxParams_setParameter(p, ZSTD_c_windowLog, (int)window_log(o->block_log));
	ZSTD_CCtxParams_setParameter(p, ZSTD_c_checksumFlag, 0);
	ZSTD_CCtxParams_setParameter(p, ZSTD_c_contentSizeFlag, 1);
	ZSTD_CCtxParams_setParameter(p, ZSTD_c_dictIDFlag, 0);
	return p;
}

/*
 * Blocks of at least 2^TRIAL_FROM_LOG bytes that hold machine code are compressed once:
 * a fast trial of both forms (plain and BCJ-filtered) at TRIAL_LEVEL, with a window over
 * the whole block as the real one has, picks the form, and only that one is compressed
 * at the block's level. Compressing both at level 19 doubled the time of every block of
 * code; the trial costs a few percent of one (measured: figures in tests/bench/RESULTS.md).
 * Smaller blocks, cheap to compress and the only ones with a dictionary, still try both
 * forms at their level and keep the smaller.
 */
#define TRIAL_FROM_LOG 20u
#define TRIAL_LEVEL 3

static ZSTD_CCtx_params *trial_params(const struct pack_opts *o)
{
	ZSTD_CCtx_params *p = ZSTD_createCCtxParams();

	if (!p)
		return NULL;
	/* tables sized for one block, not for the level's unknown-size default */
	ZSTD_CCtxParams_init_advanced(p, ZSTD_getParams(TRIAL_LEVEL, 1ull << o->block_log, 0));
	ZSTD_CCtxParams_setParameter(p, ZSTD_c_windowLog, (int)window_log(o->block_log));
	return p;
}

/* Whether blocks at these options choose BCJ by the fast trial. */
static int uses_trial(const struct pack_opts *o)
{
	return o->bcj && o->block_log >= TRIAL_FROM_LOG;
}

/* A context with PARAMS (NULL: out of memory), which it frees. */
static ZSTD_CCtx *make_cctx(ZSTD_CCtx_params *params)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	int ok = cctx && params && !ZSTD_isError(ZSTD_CCtx_setParametersUsingCCtxParams(cctx, params));

	ZSTD_freeCCtxParams(params);
	if (!ok) {
		ZSTD_freeCCtx(cctx);
		return NULL;
	}
	return cctx;
}

/* The most a context with PARAMS (which it frees) holds; 0 when out of memory. */
static uint64_t cctx_cost(ZSTD_CCtx_params *params)
{
	size_t n = params ? ZSTD_estimateCCtxSize_usingCCtxParams(params) : 0;

	ZSTD_freeCCtxParams(params);
	return ZSTD_isError(n) ? 0 : n;
}

void pack_memory_cost(const struct pack_opts *o, int dict, uint64_t *per_block,
		      uint64_t *per_worker)
{
	*per_block = 2ull << o->block_log;
	/* A context that references the dictionary attaches or copies its tables into a
	 * workspace this estimate already covers (measured: levels 3 to 19, 64K to 512K
	 * blocks); the tables themselves are shared, counted once by the caller. */
	*per_worker = cctx_cost(make_params(o));
	if (o->bcj)
		*per_worker += 2ull << o->block_log;
	else if (dict)
		*per_worker += 1ull << o->block_log;
	if (uses_trial(o))
		*per_worker += cctx_cost(trial_params(o));
}

/* ZSTD_compress2 of SRC's LEN bytes into DST (CAP bytes), its last zstd block before
 * BODY ending at BODY: the zeros after it then stand alone, in blocks of one repeated
 * byte, which a reader skips instead of decoding (a cut of --cut-inside would otherwise
 * decode up to 128 KiB of them). Stable buffers, as ZSTD_compress2 uses. */
static size_t compress_ending(ZSTD_CCtx *cctx, uint8_t *dst, size_t cap, const uint8_t *src,
			      size_t len, size_t body)
{
	ZSTD_outBuffer out = { dst, cap, 0 };
	ZSTD_inBuffer in = { src, body, 0 };
	size_t n = ZSTD_CCtx_setPledgedSrcSize(cctx, len);

	if (!ZSTD_isError(n))
		n = ZSTD_CCtx_setParameter(cctx, ZSTD_c_stableInBuffer, 1);
	if (!ZSTD_isError(n))
		n = ZSTD_CCtx_setParameter(cctx, ZSTD_c_stableOutBuffer, 1);
	if (!ZSTD_isError(n))
		n = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_flush);
	if (!ZSTD_isError(n) && !n) {
		in.size = len;
		n = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
	}
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_stableInBuffer, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_stableOutBuffer, 0);
	if (!ZSTD_isError(n) && n)
		return cap; /* did not fit: does not shrink */
	return ZSTD_isError(n) ? n : out.pos;
}

/* Compresses SRC (the slot's bytes, FILTER applied to them) into DST with CDICT (NULL:
 * none), and keeps the result in the slot when it is smaller than what it holds. BODY:
 * where its last zstd block ends (compress_ending), or 0. */
static int try_compress(ZSTD_CCtx *cctx, const ZSTD_CDict *cdict, struct slot *s, uint8_t *dst,
			const uint8_t *src, unsigned filter, size_t body)
{
	size_t n;

	/* A compression that failed (the block does not shrink) leaves the context mid-frame,
	 * where it refuses a dictionary change: without the reset the next attempt would be
	 * skipped, or made with the wrong dictionary, depending on the blocks this worker
	 * happened to compress before. */
	if (ZSTD_isError(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_CCtx_refCDict(cctx, cdict)))
		return -EINVAL;
	n = body ? compress_ending(cctx, dst, s->len, src, s->len, body)
		 : ZSTD_compress2(cctx, dst, s->len, src, s->len);
	if (ZSTD_isError(n) || n >= s->stored_len)
		return 0;
	if (dst != s->out)
		memcpy(s->out, dst, n);
	s->codec = cdict ? STP_CODEC_ZSTD_DICT : STP_CODEC_ZSTD;
	s->filter = (uint8_t)filter;
	s->stored_len = n;
	return 0;
}

static int worker_buffers(struct worker *w, int bcj, size_t block_size)
{
	if (!w->fout)
		w->fout = malloc(block_size);
	if (bcj && !w->fin)
		w->fin = malloc(block_size);
	return w->fout && (!bcj || w->fin) ? 0 : -ENOMEM;
}

/* Bytes the trial context makes of the slot's LEN bytes at SRC; LEN when they do not
 * shrink. The output goes to w->fout, unused. */
static size_t trial_size(struct worker *w, const struct slot *s, const uint8_t *src)
{
	size_t n;

	if (ZSTD_isError(ZSTD_CCtx_reset(w->trial, ZSTD_reset_session_only)))
		return s->len;
	n = ZSTD_compress2(w->trial, w->fout, s->len, src, s->len);
	return ZSTD_isError(n) ? s->len : n;
}

/* Whether the filtered form (in w->fin) wins the fast trial against the plain one. */
static int bcj_wins_trial(const struct pack_opts *o, struct worker *w, const struct slot *s,
			  int *wins)
{
	if (!w->trial)
		w->trial = make_cctx(trial_params(o));
	if (!w->trial)
		return -ENOMEM;
	*wins = trial_size(w, s, w->fin) < trial_size(w, s, s->in);
	return 0;
}

/* Every way a block may be stored is weighed and the smallest kept: raw, zstd, zstd after
 * BCJ when it holds machine code, and each again with the dictionary, whose saving over
 * the best without it is counted (plain_len). Large blocks weigh BCJ by the trial and
 * compress one form; small ones compress both. */
static int compress_slot(struct packer *p, struct worker *w, struct slot *s)
{
	unsigned filter = s->code[STP_FILTER_ARM64] > s->code[STP_FILTER_X86] ?
			  STP_FILTER_ARM64 : STP_FILTER_X86;
	int bcj = p->o->bcj && (s->code[STP_FILTER_X86] || s->code[STP_FILTER_ARM64]);
	int plain = 1, rc = 0;
	/* padded over half: the reader's rule for a cut (find_zero_tail) */
	size_t body = p->o->end_body && !s->hot && s->body && s->len - s->body >= s->len / 2
		      ? s->body : 0;

	s->codec = STP_CODEC_RAW;
	s->filter = STP_FILTER_NONE;
	s->stored_len = s->len;
	if (bcj || p->cdict)
		rc = worker_buffers(w, bcj, p->block_size);
	if (!rc && bcj) {
		memcpy(w->fin, s->in, s->len);
		stp_bcj_apply(filter, w->fin, s->len, p->o->stable ? 0 : s->start, 1);
		if (uses_trial(p->o)) {
			rc = bcj_wins_trial(p->o, w, s, &bcj);
			plain = !bcj;
		}
	}
	if (!rc && plain)
		rc = try_compress(w->cctx, NULL, s, s->out, s->in, STP_FILTER_NONE, body);
	if (!rc && bcj)
		rc = try_compress(w->cctx, NULL, s, w->fout, w->fin, filter, body);
	s->plain_len = s->stored_len;
	if (!rc && p->cdict && plain)
		rc = try_compress(w->cctx, p->cdict, s, w->fout, s->in, STP_FILTER_NONE, body);
	if (!rc && p->cdict && bcj)
		rc = try_compress(w->cctx, p->cdict, s, w->fout, w->fin, filter, body);
	s->checksum = stp_checksum(s->codec == STP_CODEC_RAW ? s->in : s->out, s->stored_len);
	return rc;
}

static void *worker_main(void *arg)
{
	struct packer *p = arg;
	struct worker w = { .cctx = make_cctx(make_params(p->o)) };
	int err = w.cctx ? 0 : -ENOMEM;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct slot *s;

		while (p->taken == p->submitted && !p->shutdown)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->taken == p->submitted)
			break;
		s = &p->slots[p->taken++ % p->nslots];
		pthread_mutex_unlock(&p->lock);
		s->err = err ? err : compress_slot(p, &w, s);
		pthread_mutex_lock(&p->lock);
		s->state = SLOT_DONE;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	ZSTD_freeCCtx(w.cctx);
	ZSTD_freeCCtx(w.trial);
	free(w.fin);
	free(w.fout);
	return NULL;
}

/* Room in the block table for one more entry. */
static int grow_blocks(struct packer *p)
{
	uint64_t cap = p->blocks_cap ? p->blocks_cap * 2 : 64;
	struct stp_blockent *grown;

	if (p->written < p->blocks_cap)
		return 0;
	grown = realloc(p->blocks, cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	p->blocks = grown;
	p->blocks_cap = cap;
	return 0;
}

/* Writes the oldest submitted block once a worker has compressed it. */
static int write_oldest(struct packer *p)
{
	struct slot *s = &p->slots[p->written % p->nslots];
	struct stp_blockent *be;
	int rc;

	pthread_mutex_lock(&p->lock);
	while (s->state != SLOT_DONE)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	rc = s->err ? s->err : stp_pwrite_full(p->fd, s->codec == STP_CODEC_RAW ? s->in : s->out,
					       s->stored_len, p->pos);
	if (rc) {
		p->broken = rc;
		return rc;
	}
	rc = grow_blocks(p);
	if (rc)
		return rc;
	be = &p->blocks[p->written];
	*be = (struct stp_blockent){ .offset = p->pos, .stored_size = (uint32_t)s->stored_len,
				     .codec = s->codec, .filter = s->filter,
				     .checksum = s->checksum };
	p->pos += s->stored_len;
	p->filters |= 1u << s->filter;
	p->dict_gain += s->plain_len - s->stored_len;
	p->dict_blocks += s->codec == STP_CODEC_ZSTD_DICT;
	pthread_mutex_lock(&p->lock);
	s->state = SLOT_FREE;
	s->len = s->body = 0;
	memset(s->code, 0, sizeof(s->code));
	p->written++;
	pthread_mutex_unlock(&p->lock);
	/* what is compressed and written counts, not what is read: 100% comes at the end */
	progress_set(s->in_done < p->total_in || !p->total_in ? s->in_done : p->total_in - 1, 0);
	return 0;
}

/* The slot being filled, waiting for it to be written out first if needed. */
static int filling_slot(struct packer *p, struct slot **out)
{
	struct slot *s = &p->slots[p->submitted % p->nslots];

	if (s->state != SLOT_FREE) {
		int rc = write_oldest(p);

		if (rc)
			return rc;
	}
	if (!s->in) {
		s->in = malloc(p->block_size);
		s->out = malloc(p->block_size);
		if (!s->in || !s->out)
			return -ENOMEM;
	}
	*out = s;
	return 0;
}

static void submit(struct packer *p, struct slot *s)
{
	pthread_mutex_lock(&p->lock);
	s->state = SLOT_QUEUED;
	s->block = p->submitted++;
	s->start = p->stream - s->len;
	s->hot = !p->hot_done;
	s->in_done = p->done_in;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Appends LEN bytes to the stream (DATA NULL: zeros) of a file suited to FILTER. */
static int stream_append(struct packer *p, const uint8_t *data, size_t len, unsigned filter)
{
	while (len) {
		struct slot *s;
		size_t n;
		int rc = filling_slot(p, &s);

		if (rc)
			return rc;
		n = p->fill_size - s->len < len ? p->fill_size - s->len : len;
		if (data)
			memcpy(s->in + s->len, data, n);
		else
			memset(s->in + s->len, 0, n);
		s->len += n;
		if (data)
			s->body = s->len;
		s->code[filter] += n;
		p->stream += n;
		len -= n;
		if (data)
			data += n;
		if (s->len == p->fill_size)
			submit(p, s);
	}
	return 0;
}

static int add_extent(struct node *f, uint64_t file_off, uint64_t stream_off, uint64_t len)
{
	struct stp_extent *last = f->nextents ? &f->extents[f->nextents - 1] : NULL;
	struct stp_extent *grown;

	if (last && last->file_off + last->length == file_off &&
	    last->stream_off + last->length == stream_off) {
		last->length += len;
		return 0;
	}
	grown = realloc(f->extents, (f->nextents + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	f->extents = grown;
	f->extents[f->nextents++] = (struct stp_extent){ file_off, stream_off, len };
	return 0;
}

/* Stores LEN file bytes at FILE_OFF (DATA NULL: zeros) as stream bytes, counting those
 * within the file's code as machine code. */
static int emit(struct packer *p, struct node *f, const uint8_t *data, uint64_t file_off, size_t len)
{
	uint64_t end = file_off + len, a = file_off, b = end;
	int rc = 0;

	if (f->filter != STP_FILTER_NONE) {
		a = f->code->start > a ? (f->code->start < end ? f->code->start : end) : a;
		b = f->code->end < b ? (f->code->end > a ? f->code->end : a) : b;
	}
	/* AArch64 instructions are 4-byte words, and the filter finds them by stream
	 * position: code goes where its file offset puts it, mod 4, whatever a piece's
	 * start or a hole left out before it */
	if (f->filter == STP_FILTER_ARM64 && b > a)
		rc = stream_append(p, NULL, (file_off - p->stream) & 3, STP_FILTER_NONE);
	if (!rc)
		rc = add_extent(f, file_off, p->stream, len);
	if (!rc && a > file_off)
		rc = stream_append(p, data, a - file_off, STP_FILTER_NONE);
	if (!rc && b > a)
		rc = stream_append(p, data ? data + (a - file_off) : NULL, b - a, f->filter);
	if (!rc && end > b)
		rc = stream_append(p, data ? data + (b - file_off) : NULL, end - b, STP_FILTER_NONE);
	return rc;
}

static int is_zero(const uint8_t *b, size_t len)
{
	static const uint8_t zeros[ZERO_STEP];

	return memcmp(b, zeros, len) == 0;
}

/* A pending run of zeros: a hole when long enough, else stored. */
static int flush_zeros(struct packer *p, struct node *f, uint64_t start, uint64_t *pending)
{
	int rc = 0;

	if (*pending && *pending < HOLE_MIN)
		rc = emit(p, f, NULL, start, (size_t)*pending);
	*pending = 0;
	return rc;
}

/* Looks for zeros a file page at a time, whatever offset a piece starts at. */
static int pack_stage(struct packer *p, struct node *f, size_t n, uint64_t off, uint64_t *zeros)
{
	for (size_t i = 0, len; i < n; i += len) {
		uint64_t at = off + i;
		int rc = 0;

		len = ZERO_STEP - at % ZERO_STEP < n - i ? ZERO_STEP - at % ZERO_STEP : n - i;

		if (is_zero(p->stage + i, len)) {
			*zeros += len;
			continue;
		}
		rc = flush_zeros(p, f, at - *zeros, zeros);
		if (!rc)
			rc = emit(p, f, p->stage + i, at, len);
		if (rc)
			return rc;
	}
	return 0;
}

/* The whole pages of a hole at file offset OFF (a page boundary), below END: zeros that
 * need not be read. Whole pages only, so the zero runs found are the ones reading every
 * byte would find, whatever the file system's block size. */
static uint64_t hole_pages(const struct source_file *sf, uint64_t off, uint64_t end)
{
	if (off % ZERO_STEP || off >= end)
		return 0;
	return (source_file_data(sf, off, end) - off) / ZERO_STEP * ZERO_STEP;
}

/* Hashes BUF, the N file bytes at OFF, as copies are found: each piece of a page that is
 * not all zeros, after its offset. A hole adds nothing, so hashing a sparse file costs
 * its data, and the same bytes hash the same however they are stored. */
static void hash_pages(XXH3_state_t *h, const uint8_t *buf, size_t n, uint64_t off)
{
	for (size_t i = 0, len; i < n; i += len) {
		uint64_t at = off + i;
		uint8_t le[8];

		len = ZERO_STEP - at % ZERO_STEP < n - i ? ZERO_STEP - at % ZERO_STEP : n - i;
		if (is_zero(buf + i, len))
			continue;
		for (int k = 0; k < 8; k++)
			le[k] = (uint8_t)(at >> (8 * k));
		XXH3_128bits_update(h, le, sizeof(le));
		XXH3_128bits_update(h, buf + i, len);
	}
}

/* Packs file bytes [OFF, END), hashing them into H when given; holes are counted as
 * zeros without being read. A file that ends early is -ESTALE, or with KEEP_SHORT, cut
 * to the bytes read (its size with them). */
static int read_span(struct packer *p, struct node *f, const struct source_file *sf,
		     uint64_t off, uint64_t end, XXH3_state_t *h, int keep_short)
{
	uint64_t zeros = 0;
	int rc = 0;

	while (off < end && !rc) {
		size_t want = end - off < STAGE_SIZE ? (size_t)(end - off) : STAGE_SIZE;
		uint64_t hole = hole_pages(sf, off, end);
		ssize_t n;

		if (hole) {
			zeros += hole;
			off += hole;
			p->done_in += hole;
			continue;
		}
		n = source_file_pread(sf, p->stage, want, off);
		if (n < 0)
			rc = errno == EINTR ? 0 : report_errno(tree_path(f), errno, "reading");
		else if (n == 0 && keep_short) /* the last try: stored as far as it goes */
			f->st.st_size = (off_t)(end = off);
		else if (n == 0)
			rc = -ESTALE; /* it shrank while it was read */
		else {
			if (h)
				hash_pages(h, p->stage, (size_t)n, off);
			rc = pack_stage(p, f, (size_t)n, off, &zeros);
			off += (uint64_t)n;
			p->done_in += (uint64_t)n;
		}
	}
	if (!rc && zeros)
		rc = flush_zeros(p, f, end - zeros, &zeros);
	return rc;
}

static int read_file(struct packer *p, struct node *f, const struct source_file *sf)
{
	const uint64_t *want = original_hash(p->orig, f);
	XXH3_state_t *h = want ? XXH3_createState() : NULL;
	int rc;

	if (want && !h)
		return -ENOMEM; /* the hash proves the file did not change since it was compared */
	if (h)
		XXH3_128bits_reset(h);
	rc = read_span(p, f, sf, 0, (uint64_t)f->st.st_size, h, 0);
	if (!rc && h) {
		XXH128_hash_t d = XXH3_128bits_digest(h);

		if (d.low64 != want[0] || d.high64 != want[1])
			rc = -ESTALE;
	}
	XXH3_freeState(h);
	return rc;
}

static int cmp_extent(const void *a, const void *b)
{
	const struct stp_extent *x = a, *y = b;

	return (x->file_off > y->file_off) - (x->file_off < y->file_off);
}

/* Pieces of a file are packed apart: sort and join its extents. */
static void sort_extents(struct node *f)
{
	uint32_t k = 0;

	if (f->nextents < 2)
		return;
	qsort(f->extents, f->nextents, sizeof(*f->extents), cmp_extent);
	for (uint32_t i = 0; i < f->nextents; i++) {
		struct stp_extent *last = k ? &f->extents[k - 1] : NULL;

		if (last && last->file_off + last->length == f->extents[i].file_off &&
		    last->stream_off + last->length == f->extents[i].stream_off)
			last->length += f->extents[i].length;
		else
			f->extents[k++] = f->extents[i];
	}
	f->nextents = k;
}

/* F did not read as the scan saw it: what was stored of it is dropped (its stream bytes
 * stay, unused) and it is read again, whole, after the other files. */
static void mark_changed(struct node *f)
{
	free(f->extents);
	f->extents = NULL;
	f->nextents = 0;
	f->trouble = NODE_CHANGED;
}

/* F could not be read (reported where it failed): nothing of it is kept, and the build
 * fails once every other file has been tried. A failure that is not the file's own (no
 * memory, no room for the image) is returned, to stop the build. */
static int mark_failed(struct node *f, int rc)
{
	if (rc == -ENOMEM || rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG)
		return rc;
	free(f->extents);
	f->extents = NULL;
	f->nextents = 0;
	f->trouble = NODE_FAILED;
	return 0;
}

/* What a failure to read F while looking for copies means: none for a change (F is
 * packed and checked later), F failed for the rest but memory. */
static int copy_trouble(struct node *f, int rc)
{
	if (rc == -ESTALE)
		return 0;
	return rc == -ENOMEM ? rc : mark_failed(f, rc);
}

/* Tries to read F whole once more, as it is now; *STILL is set when it changed again.
 * On the last try, LAST, what it reads is kept whatever happens meanwhile. */
static int reread_once(struct packer *p, struct node *f, int last, int *still)
{
	struct source_file sf;
	int rc = source_file_reopen(f, &sf);

	free(f->extents);
	f->extents = NULL;
	f->nextents = 0;
	if (rc)
		return rc;
	rc = read_span(p, f, &sf, 0, (uint64_t)f->st.st_size, NULL, last);
	*still = rc == -ESTALE || (!rc && !source_file_unchanged(&sf));
	source_file_close(&sf);
	return rc == -ESTALE && !last ? 0 : rc;
}

/* Reads F again, up to REREADS times while it keeps changing; then keeps the last read,
 * which is whole and consistent (its size is the bytes read), and warns as tar does. */
#define REREADS 3
static int reread(struct packer *p, struct node *f)
{
	int rc = 0, still = 1;

	f->same_as = NULL;
	for (int i = 0; i < REREADS && !rc && still; i++)
		rc = reread_once(p, f, i + 1 == REREADS, &still);
	if (p->broken)
		return p->broken; /* the image's failure, not the file's */
	if (rc)
		return mark_failed(f, rc);
	if (still) {
		report_warning(tree_path(f), "file changed as we read it");
		p->changed++;
	}
	return 0;
}

/* A copy of a file packed earlier takes its extents, once every piece is packed; a copy
 * whose original changed, or that changed itself, is read on its own. */
static int take_copy(struct packer *p, struct node *f)
{
	size_t bytes = f->same_as->nextents * sizeof(*f->extents);
	struct stat after;
	int rc = f->same_as->trouble ? 0 : source_stat(f, &after);

	if (rc)
		return mark_failed(f, rc);
	if (f->same_as->trouble || !source_same(&f->st, &after)) {
		f->same_as = NULL;
		return reread(p, f);
	}
	f->extents = malloc(bytes ? bytes : 1);
	if (!f->extents)
		return -ENOMEM;
	if (bytes)
		memcpy(f->extents, f->same_as->extents, bytes);
	f->nextents = f->same_as->nextents;
	p->done_in += (uint64_t)f->st.st_size;
	return 0;
}

static int pack_piece(struct packer *p, const struct piece *pc)
{
	struct node *f = pc->file;
	struct source_file sf;
	int rc;

	if (f->same_as || f->trouble)
		return 0;
	rc = source_file_open(f, &sf);
	if (rc == -ESTALE)
		mark_changed(f);
	if (rc)
		return rc == -ESTALE ? 0 : mark_failed(f, rc);
	/* a file read whole is hashed again when others were found to be copies of it */
	rc = pc->start == 0 && pc->end == (uint64_t)f->st.st_size ?
	     read_file(p, f, &sf) : read_span(p, f, &sf, pc->start, pc->end, NULL, 0);
	if (!rc && !source_file_unchanged(&sf))
		rc = -ESTALE;
	source_file_close(&sf);
	if (rc == -ESTALE)
		mark_changed(f);
	if (p->broken)
		return p->broken; /* the image's failure, not the file's */
	return rc == -ESTALE ? 0 : rc ? mark_failed(f, rc) : 0;
}

/* Files of equal size are hashed; later copies of identical content point at the first.
 * The hashes live here, not in the nodes. */
struct sized {
	struct node *n;
	size_t pos;
	uint64_t hash[2];
	int hashed;
};

static int cmp_sized(const void *a, const void *b)
{
	const struct sized *x = a, *y = b;

	if (x->n->st.st_size != y->n->st.st_size)
		return x->n->st.st_size < y->n->st.st_size ? -1 : 1;
	if (x->hashed && y->hashed) {
		int c = memcmp(x->hash, y->hash, sizeof(x->hash));

		if (c)
			return c;
	}
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Hashes F's bytes into OUT, reading through BUF (STAGE_SIZE bytes). */
static int hash_file(struct node *f, uint8_t *buf, uint64_t out[2])
{
	XXH3_state_t *h = XXH3_createState();
	struct source_file sf = { .fd = -1 };
	int rc = h ? source_file_open(f, &sf) : -ENOMEM;
	uint64_t off = 0;

	if (rc)
		goto out;
	XXH3_128bits_reset(h);
	for (;;) {
		ssize_t n;

		off += hole_pages(&sf, off, (uint64_t)f->st.st_size);
		n = source_file_pread(&sf, buf, STAGE_SIZE, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = report_errno(tree_path(f), errno, "reading");
			goto out;
		}
		if (n == 0)
			break;
		hash_pages(h, buf, (size_t)n, off);
		off += (uint64_t)n;
	}
	XXH128_hash_t d = XXH3_128bits_digest(h);
	out[0] = d.low64;
	out[1] = d.high64;
out:
	source_file_close(&sf);
	XXH3_freeState(h);
	return rc;
}

/* 1 when files A and B hold the same bytes, 0 when not, or -errno. BUF holds two
 * halves of STAGE_SIZE / 2. */
static int same_bytes(const struct node *a, const struct node *b, uint8_t *buf)
{
	size_t half = STAGE_SIZE / 2;
	struct source_file fa = { .fd = -1 }, fb = { .fd = -1 };
	uint64_t off = 0;
	int rc = source_file_open(a, &fa);

	if (rc)
		return copy_trouble((struct node *)a, rc);
	rc = source_file_open(b, &fb);
	if (rc) {
		source_file_close(&fa);
		return copy_trouble((struct node *)b, rc);
	}
	rc = 1;
	while (rc == 1 && off < (uint64_t)a->st.st_size) {
		uint64_t ha = hole_pages(&fa, off, (uint64_t)a->st.st_size);
		uint64_t hb = hole_pages(&fb, off, (uint64_t)a->st.st_size);
		ssize_t na, nb;

		if (ha && hb) { /* zeros on both sides */
			off += ha < hb ? ha : hb;
			continue;
		}
		na = source_file_pread(&fa, buf, half, off);
		nb = source_file_pread(&fb, buf + half, half, off);

		if (na < 0 || nb < 0)
			rc = copy_trouble((struct node *)(na < 0 ? a : b),
					  report_errno(tree_path(na < 0 ? a : b), errno, "reading"));
		else if (na != nb || na == 0 || memcmp(buf, buf + half, (size_t)na))
			rc = 0;
		else
			off += (uint64_t)na;
	}
	source_file_close(&fa);
	source_file_close(&fb);
	return rc;
}

/* Whether V[I] has the size of a neighbour, V sorted by size. */
static int same_size(const struct sized *v, size_t n, size_t i)
{
	return (i > 0 && v[i].n->st.st_size == v[i - 1].n->st.st_size) ||
	       (i + 1 < n && v[i].n->st.st_size == v[i + 1].n->st.st_size);
}

/* The bytes of the files of V that share their size with another: those hashed. */
static uint64_t same_size_bytes(const struct sized *v, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += same_size(v, n, i) ? (uint64_t)v[i].n->st.st_size : 0;
	return sum;
}

/* Hashes each file of V (N, by size) that shares its size with another. */
static int hash_same_sized(struct sized *v, size_t n, uint8_t *buf)
{
	int rc = 0;

	progress_phase("compare", same_size_bytes(v, n));
	for (size_t i = 0, done = 0; i < n && !rc; i++) {
		if (same_size(v, n, i) && v[i].n->st.st_size > 0) {
			progress_set(done, 0);
			done += (uint64_t)v[i].n->st.st_size;
			rc = hash_file(v[i].n, buf, v[i].hash);
			v[i].hashed = !rc;
			rc = rc ? copy_trouble(v[i].n, rc) : 0;
		}
	}
	return rc;
}

/* Marks each file of V (N, equal contents together, first first) that holds the same
 * bytes as the one before it a copy of the first. */
static int mark_copies(struct sized *v, size_t n, uint8_t *buf)
{
	int rc = 0;

	for (size_t i = 1; i < n && !rc; i++) {
		struct node *a = v[i - 1].n, *b = v[i].n;

		if (v[i - 1].hashed && v[i].hashed && a->st.st_size == b->st.st_size &&
		    !memcmp(v[i - 1].hash, v[i].hash, sizeof(v[i].hash))) {
			struct node *first = a->same_as ? a->same_as : a;

			/* XXH3 is no proof against a crafted tree: compare the bytes */
			rc = same_bytes(first, b, buf);
			if (rc > 0) {
				b->same_as = first;
				first->copied = 1;
			}
			rc = rc < 0 ? rc : 0;
		}
	}
	return rc;
}

/* The files of V (N) that others copy, added to O. */
static int list_originals(const struct sized *v, size_t n, struct originals *o)
{
	for (size_t i = 0; i < n; i++) {
		if (!v[i].n->copied)
			continue;
		if (!o->n || (o->n & (o->n - 1)) == 0) {
			struct original *grown = reallocarray(o->v, o->n ? 2 * o->n : 1, sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			o->v = grown;
		}
		o->v[o->n++] = (struct original){ v[i].n, { v[i].hash[0], v[i].hash[1] } };
	}
	return 0;
}

/* Marks the copies among the files ORDER[0..n) and fills O with their originals. */
static int find_duplicates(const struct piece *order, size_t n, uint8_t *buf,
			   struct originals *o)
{
	struct sized *v = malloc((n ? n : 1) * sizeof(*v));
	size_t m = 0;
	int rc;

	if (!v)
		return -ENOMEM;
	/* each file by its first byte's piece; a file with hot ranges is never shared, as
	 * its ranges must stay in the hot region */
	for (size_t i = 0; i < n; i++)
		if (order[i].start == 0 && !order[i].file->hot_ranges)
			v[m++] = (struct sized){ .n = order[i].file, .pos = i };
	qsort(v, m, sizeof(*v), cmp_sized);
	rc = hash_same_sized(v, m, buf);
	qsort(v, m, sizeof(*v), cmp_sized); /* now equal contents sit together, first first */
	rc = rc ? rc : mark_copies(v, m, buf);
	rc = rc ? rc : list_originals(v, m, o);
	free(v);
	if (o->n)
		qsort(o->v, o->n, sizeof(*o->v), cmp_original);
	return rc;
}

static int start_workers(struct packer *p)
{
	p->workers = calloc(p->nworkers, sizeof(*p->workers));
	if (!p->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < p->nworkers; i++) {
		int rc = pthread_create(&p->workers[i], NULL, worker_main, p);

		if (rc) {
			p->nworkers = i;
			return -rc;
		}
	}
	return 0;
}

static void stop_workers(struct packer *p)
{
	pthread_mutex_lock(&p->lock);
	p->shutdown = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nworkers; i++)
		pthread_join(p->workers[i], NULL);
	free(p->workers);
}

/* Slots and workers that fit the memory cap: -ENOMEM when not even one block fits. */
static int plan_parallelism(struct packer *p)
{
	uint64_t per_block, per_worker, shared = p->cdict_size;
	const struct pack_opts *o = p->o;

	pack_memory_cost(o, p->cdict != NULL, &per_block, &per_worker);
	p->nworkers = o->threads ? o->threads : 1;
	p->nslots = p->nworkers + 1;
	while (o->memory && p->nslots > 1 &&
	       shared + p->nslots * per_block + p->nworkers * per_worker > o->memory) {
		p->nslots--;
		if (p->nworkers > p->nslots)
			p->nworkers = p->nslots;
	}
	if (o->memory && shared + per_block + per_worker > o->memory) {
		char need[32];

		report_error(NULL, "--memory is below the %s one block needs at this block size "
			     "and level%s",
			stp_human_size(shared + per_block + per_worker, need, sizeof(need)),
			p->cdict ? " with the dictionary" : "");
		return -ENOMEM;
	}
	return 0;
}

/* A file read whole was hashed as it was packed; one packed in pieces that others copy
 * is hashed again, since its copies' bytes were compared with what it held then. */
static int check_copied(struct packer *p, struct node *f)
{
	const uint64_t *want = original_hash(p->orig, f);
	uint64_t now[2];
	int rc = hash_file(f, p->stage, now);

	if (rc && rc != -ESTALE)
		return mark_failed(f, rc);
	if (rc || !want || memcmp(now, want, sizeof(now))) {
		mark_changed(f);
		return reread(p, f);
	}
	return 0;
}

/* Copies take their extents, and files packed in pieces get theirs sorted. Originals
 * come before their copies in ORDER, so their extents are final when copied. */
static int finish_files(struct packer *p, const struct piece *order, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		struct node *f = order[i].file;

		if (order[i].start != 0)
			continue; /* every file has exactly one piece from its first byte */
		if (f->trouble == NODE_CHANGED)
			rc = reread(p, f);
		if (f->trouble == NODE_FAILED)
			p->failed++;
		if (f->trouble || rc)
			continue;
		if (f->same_as) {
			rc = take_copy(p, f);
			continue;
		}
		sort_extents(f);
		if (f->copied && order[i].end != (uint64_t)f->st.st_size)
			rc = check_copied(p, f);
	}
	return rc;
}

/* Submits the block being filled, if it holds anything: it ends short. */
static void submit_partial(struct packer *p)
{
	struct slot *s = &p->slots[p->submitted % p->nslots];

	/* after a block that ended on its edge, this slot may still hold a full block
	 * waiting to be written: only a free one is being filled */
	if (s->state == SLOT_FREE && s->len)
		submit(p, s);
}

/* Bytes the block being filled holds. */
static uint64_t block_fill(const struct packer *p)
{
	return (p->stream - p->block_base) & (p->fill_size - 1);
}

/* Ends the block being filled with zeros, which belong to no extent. */
static int pad_block(struct packer *p)
{
	uint64_t fill = block_fill(p);

	return fill ? stream_append(p, NULL, p->fill_size - fill, STP_FILTER_NONE) : 0;
}

/* Pads the stream to its next page. */
static int pad_page(struct packer *p)
{
	uint64_t off = p->stream % STP_HOT_PAGE;

	return off ? stream_append(p, NULL, STP_HOT_PAGE - off, STP_FILTER_NONE) : 0;
}

/* The stable layout's hot region ends on a page, so that the blocks after it start on
 * a multiple of 4, where AArch64 code filtered from each block's start stays aligned;
 * without hot blocks of their own, it ends a block too. */
static int pad_hot_end(struct packer *p)
{
	int rc = pad_page(p);

	if (!rc && p->fill_size == p->block_size)
		rc = pad_block(p);
	return rc;
}

/* The hot region ends here: its own blocks, if it has them, end with it. */
static int end_hot_region(struct packer *p, struct pack_result *r)
{
	int rc = p->o->stable ? pad_hot_end(p) : 0;

	p->cut_pending = 0; /* the cold region starts a block of its own anyway */
	r->hot_size = p->stream;
	if (rc || p->fill_size == p->block_size) {
		p->hot_done = 1;
		return rc;
	}
	submit_partial(p);
	p->hot_done = 1;
	p->fill_size = p->block_size;
	p->block_base = r->hot_size;
	if (r->hot_size) {
		r->hot_block_log = p->o->hot_block_log;
		r->feat_incompat |= STP_FEAT_INCOMPAT_HOT_BLOCKS;
	}
	return 0;
}

/* Writes out every block submitted, and the one being filled, which ends short. */
static int drain(struct packer *p)
{
	int rc = 0;

	submit_partial(p);
	while (!rc && p->written < p->submitted)
		rc = write_oldest(p);
	return rc;
}

/* Writes carried blocks FIRST to FIRST + COUNT, in order, after every block so far. */
static int put_carried(struct packer *p, uint64_t first, uint64_t count)
{
	const struct pack_carry *c = p->o->carry;
	int rc = count ? drain(p) : 0;

	for (uint64_t i = first; i < first + count && !rc; i++) {
		uint64_t len;

		rc = grow_blocks(p);
		if (!rc)
			rc = c->put(c->ctx, i, p->stream, p->fd, p->pos, &p->blocks[p->written], &len);
		if (rc) {
			p->broken = rc;
			break;
		}
		p->pos += p->blocks[p->written].stored_size;
		p->filters |= 1u << p->blocks[p->written].filter;
		p->stream += len;
		/* the slots count blocks too: the next block filled is the one after */
		pthread_mutex_lock(&p->lock);
		p->written++;
		p->submitted++;
		p->taken++;
		pthread_mutex_unlock(&p->lock);
	}
	return rc;
}

/* The carried blocks that go first, before the cold pieces. */
static int put_carried_head(struct packer *p)
{
	return p->o->carry ? put_carried(p, 0, p->o->carry->nhead) : 0;
}

/* The carried short block that goes last: the block before it is padded whole. */
static int put_carried_tail(struct packer *p)
{
	const struct pack_carry *c = p->o->carry;
	int rc;

	if (!c || !c->tail)
		return 0;
	rc = pad_block(p);
	return rc ? rc : put_carried(p, c->nhead, 1);
}

/* With --base and a hot list, the carried blocks go after the rests of the hot files
 * (the first cold pieces, see order.c), not right after the hot region: a launch that
 * strays beside its recorded ranges then finds those bytes in the block after the hot
 * region, which a mount decodes as it warms, as in an image built without --base. The
 * rests are packed anew in either place, so the blocks an update fetches are the same. */
static int put_carried_after_rests(struct packer *p)
{
	int rc;

	if (!p->o->carry || !p->o->carry->nhead)
		return 0; /* nothing carried: the rests go on into the cold region as they are */
	rc = pad_block(p);
	p->cut_pending = 0;
	return rc ? rc : put_carried_head(p);
}

static int is_rest(const struct piece *pc)
{
	return pc->file->hot_ranges != NULL;
}

/* Packs a cold piece, ending the block before or after it where the cuts say so. */
static int pack_cold_piece(struct packer *p, const struct piece *pc)
{
	uint64_t len = cuts_piece_len(pc);
	int rc = 0;

	if (len && (p->cut_pending || pc->alone || cuts_before(&p->cuts, block_fill(p), len))) {
		rc = pad_block(p);
		p->cut_pending = 0;
	}
	if (!rc)
		rc = pack_piece(p, pc);
	if (!rc && ((len && pc->alone) || cuts_after(&p->cuts, block_fill(p), pc, len)))
		p->cut_pending = 1;
	return rc;
}

/* Packs hot piece ORDER[I]. It starts on a page of the stream unless it goes on from the
 * one before: a stream page then belongs to one file, and a file page to one stream
 * page, so a page never straddles two blocks, which warming could not push (the mount
 * tracks what it warmed by page). For a release series (o->cut_hot) the hot blocks
 * are cut as the cold ones are (cuts.h, at the hot block size), except inside a run of
 * one file, so that a hot file that changed, came or went leaves the hot blocks away
 * from it as they were. Not by default: the cuts pad, and on GCC 12's recorded list
 * the hot region grew by 29% (25.7 to 33.3 MiB), every byte of it decoded at mount. */
static int pack_hot_piece(struct packer *p, const struct piece *order, size_t i)
{
	const struct piece *pc = &order[i];
	int goes_on = i && order[i - 1].file == pc->file && order[i - 1].end == pc->start;
	uint64_t len = cuts_piece_len(pc), fill;
	int rc = goes_on ? 0 : pad_page(p);

	if (!p->o->stable || !p->o->cut_hot || goes_on)
		return rc ? rc : pack_piece(p, pc);
	fill = block_fill(p);
	if (!rc && len && (p->cut_pending || cuts_before(&p->hot_cuts, fill, len))) {
		rc = pad_block(p);
		p->cut_pending = 0;
	}
	if (!rc)
		rc = pack_piece(p, pc);
	if (!rc && cuts_after(&p->hot_cuts, block_fill(p), pc, len))
		p->cut_pending = 1;
	return rc;
}

static int pack_all(struct packer *p, const struct piece *order, size_t n, size_t nhot,
		    struct pack_result *r)
{
	int rc = 0, carry_waits = 0; /* the carried blocks wait for the rests */

	if (nhot && p->o->hot_block_log < p->o->block_log)
		p->fill_size = (size_t)1 << p->o->hot_block_log;
	p->hot_done = !nhot;
	if (!nhot)
		rc = put_carried_head(p);

	for (size_t i = 0; i < n && !rc; i++) {
		if (carry_waits && !is_rest(&order[i])) {
			rc = put_carried_after_rests(p);
			carry_waits = 0;
			if (rc)
				break;
		}
		if (i < nhot)
			rc = pack_hot_piece(p, order, i);
		else
			rc = p->o->stable ? pack_cold_piece(p, &order[i]) : pack_piece(p, &order[i]);
		if (!rc && i + 1 == nhot)
			rc = end_hot_region(p, r);
		carry_waits |= i + 1 == nhot;
	}
	if (!rc && carry_waits)
		rc = put_carried_after_rests(p);
	if (!rc)
		rc = finish_files(p, order, n);
	if (!rc)
		rc = put_carried_tail(p);
	if (!rc)
		rc = drain(p);
	return rc;
}

/* The dictionary's compression tables, made with the blocks' own parameters. */
static int make_cdict(struct packer *p, const uint8_t *dict, size_t len)
{
	ZSTD_CCtx_params *params = make_params(p->o);

	if (params)
		p->cdict = ZSTD_createCDict_advanced2(dict, len, ZSTD_dlm_byRef, ZSTD_dct_auto,
						      params, ZSTD_defaultCMem);
	ZSTD_freeCCtxParams(params);
	if (!p->cdict)
		return -ENOMEM;
	p->cdict_size = ZSTD_sizeof_CDict(p->cdict) + len;
	return 0;
}

/* One pass over the files with DICT (NULL: none), shown as PHASE. */
static int pack_once(const char *phase, const struct piece *order, size_t n, size_t nhot,
		     int fd, uint64_t start, const struct pack_opts *o,
		     const struct originals *orig, const uint8_t *dict, size_t dict_len,
		     struct pack_result *r)
{
	struct packer p = { .o = o, .block_size = (size_t)1 << o->block_log,
			    .fill_size = (size_t)1 << o->block_log, .fd = fd, .pos = start,
			    .orig = orig };
	int rc = dict ? make_cdict(&p, dict, dict_len) : 0;

	cuts_rule(&p.cuts, o->block_log);
	cuts_rule(&p.hot_cuts, o->hot_block_log < o->block_log ? o->hot_block_log : o->block_log);
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < n; i++)
		p.total_in += order[i].end - order[i].start;
	progress_phase(phase, p.total_in);
	if (!rc)
		rc = plan_parallelism(&p);
	if (rc) {
		ZSTD_freeCDict((ZSTD_CDict *)p.cdict);
		return rc;
	}
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.cond, NULL);
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	p.stage = malloc(STAGE_SIZE);
	rc = (!p.slots || !p.stage) ? -ENOMEM : start_workers(&p);
	if (!rc)
		rc = pack_all(&p, order, n, nhot, r);
	if (p.workers)
		stop_workers(&p);
	for (unsigned i = 0; p.slots && i < p.nslots; i++) {
		free(p.slots[i].in);
		free(p.slots[i].out);
	}
	free(p.slots);
	free(p.stage);
	ZSTD_freeCDict((ZSTD_CDict *)p.cdict);
	pthread_mutex_destroy(&p.lock);
	pthread_cond_destroy(&p.cond);
	if (rc) {
		free(p.blocks);
		return rc;
	}
	r->data_size = p.stream;
	r->nblocks = p.written;
	r->blocks = p.blocks;
	r->end = p.pos;
	r->dict_gain = p.dict_gain;
	r->dict_blocks = p.dict_blocks;
	r->changed = p.changed;
	r->failed = p.failed;
	if (p.filters & 1u << STP_FILTER_X86)
		r->feat_incompat |= STP_FEAT_INCOMPAT_BCJ_X86;
	if (p.filters & 1u << STP_FILTER_ARM64)
		r->feat_incompat |= STP_FEAT_INCOMPAT_BCJ_ARM64;
	if (o->stable && p.filters & ~(1u << STP_FILTER_NONE))
		r->feat_incompat |= STP_FEAT_INCOMPAT_BCJ_RELATIVE;
	return 0;
}

/* Forgets what a pass stored, for another pass. */
static void reset_extents(const struct piece *order, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(order[i].file->extents);
		order[i].file->extents = NULL;
		order[i].file->nextents = 0;
		if (order[i].file->trouble == NODE_CHANGED)
			order[i].file->trouble = NODE_OK; /* read in its place this time */
	}
}

/*
 * Whether to keep the dictionary is decided on the real blocks, not on an estimate:
 * every block is compressed with and without it and stores the smaller, and the bytes
 * saved against its best form without the dictionary are counted exactly. The image
 * holds the dictionary once, so it keeps it only when those savings exceed its size (and
 * a byte per block whose codec it changes, for the metadata); otherwise the files are
 * packed again without it. Either way the image is never larger than without it, and
 * the choice depends on nothing but the tree and the options that shape the image.
 */
int pack_files(const struct piece *order, size_t n, size_t nhot, int fd, uint64_t start,
	       const struct pack_opts *o, struct pack_result *r)
{
	uint8_t *dict = NULL, *buf = malloc(STAGE_SIZE);
	size_t dict_len = 0;
	uint64_t gain;
	struct originals orig = { 0 };
	int rc = buf ? find_duplicates(order, n, buf, &orig) : -ENOMEM;

	free(buf);
	memset(r, 0, sizeof(*r));
	/* a dictionary is trained anew for each release and changes every block using it */
	if (!rc && o->block_log < DICT_BLOCK_LOG_LIMIT && !o->stable)
		rc = dict_train(order, n, o->block_log, &dict, &dict_len);
	if (!rc)
		rc = pack_once("compress", order, n, nhot, fd, start, o, &orig, dict, dict_len, r);
	if (!rc && dict && r->dict_gain <= dict_len + r->dict_blocks) {
		gain = r->dict_gain;
		free(r->blocks);
		reset_extents(order, n);
		free(dict);
		dict = NULL;
		rc = pack_once("compress again, without the dictionary", order, n, nhot, fd, start,
			       o, &orig, NULL, 0, r);
		r->dict_gain = gain;
	}
	free(orig.v);
	if (rc || !dict) {
		free(dict);
		return rc;
	}
	r->dict = dict;
	r->dict_size = dict_len;
	r->feat_incompat |= STP_FEAT_INCOMPAT_DICT;
	return 0;
}
