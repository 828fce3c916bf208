/* SPDX-License-Identifier: MIT */
/* Delta files for `stipple publish --base` (pubdelta.h). */
#include "pubdelta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cli.h"
#include "delta.h"
#include "format.h"
#include "image.h"
#include "imgsrc.h"
#include "localindex.h"
#include "sign.h"
#include "treewalk.h"

#include <dirent.h>
#include <pthread.h>

/* A run of one file's bytes within one block. */
struct piece {
	uint64_t path;      /* XXH64 of the path */
	uint64_t file_off, len;
	uint64_t block;
};

struct pieces {
	struct piece *v;
	size_t n, cap;
	const struct stp_image *img;
};

struct oldblock {
	uint8_t sha[STP_PUBINDEX_HASH_LEN];
	uint64_t block;
};

/* What a worker is doing with its block (pubdelta_next takes them in order). */
enum job { JOB_IDLE, JOB_BUSY, JOB_DONE };

/* One thread's state: each block's delta is made by one worker, with its own buffers,
 * so that what it makes depends on the block alone, never on the threads. */
struct worker {
	struct pubdelta *d;
	pthread_t thread;
	int started;
	uint64_t *score;          /* per OLD block, for the block being matched */
	uint64_t *touched;        /* the OLD blocks scored */
	uint8_t *content, *prefix, *stored, *delta, *check;
	enum job job;
	size_t want;              /* the index in d->want of the block it holds */
	int rc;                   /* make_delta's */
	struct stp_pubindex_delta ent;
};

struct pubdelta {
	const struct stp_cli *cli;
	const char *oldpath;
	struct stp_image *old, *img;
	int level;
	struct oldblock *hashes;  /* OLD's blocks by hash, sorted */
	struct pieces oldp, newp; /* OLD's by (path, file_off); the new image's by block */
	size_t block_max;         /* the larger block size of the two images */
	struct worker *workers;
	unsigned nworkers;
	pthread_mutex_t lock;     /* guards the jobs, claimed and taken below */
	pthread_cond_t changed;
	const struct pubdelta_want *want;
	size_t nwant, claimed, taken;
	struct worker *held;      /* the worker whose delta pubdelta_next last gave */
	int stop;
};

static int piece_add(struct pieces *ps, const struct piece *p)
{
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 1024;
		struct piece *v = realloc(ps->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ps->v = v;
		ps->cap = cap;
	}
	ps->v[ps->n++] = *p;
	return 0;
}

/* Each extent of a regular file, cut at its blocks' ends. */
static int file_pieces(void *ctx, const struct stp_tree_entry *e)
{
	struct pieces *ps = ctx;
	const struct stp_superblock *sb = stp_image_sb(ps->img);
	uint64_t path = XXH64(e->path, e->path_len, 0);

	if (!e->inode || e->dtype != DT_REG)
		return 0;
	for (uint32_t k = 0; k < e->inode->count; k++) {
		struct stp_extent x;
		int err = stp_image_extent(ps->img, e->inode, k, &x);

		while (!err && x.length) {
			uint64_t blk = stp_sb_block_of(sb, x.stream_off);
			uint64_t n = stp_sb_block_end(sb, blk) - x.stream_off;
			struct piece p = { .path = path, .file_off = x.file_off, .block = blk };

			p.len = n < x.length ? n : x.length;
			err = piece_add(ps, &p);
			x.file_off += p.len;
			x.stream_off += p.len;
			x.length -= p.len;
		}
		if (err)
			return err;
	}
	return 0;
}

static int by_path(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->path != y->path)
		return x->path < y->path ? -1 : 1;
	return x->file_off < y->file_off ? -1 : x->file_off > y->file_off;
}

static int by_block(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return x->block < y->block ? -1 : x->block > y->block;
}

static int map_files(struct stp_image *img, struct pieces *ps,
		     int (*order)(const void *, const void *))
{
	const struct stp_treewalk_ops ops = { .enter = file_pieces, .inodes = 1 };
	int err;

	ps->img = img;
	err = stp_treewalk(img, &ops, ps);
	if (!err && ps->n)
		qsort(ps->v, ps->n, sizeof(*ps->v), order);
	return err;
}

static int by_sha(const void *a, const void *b)
{
	return memcmp(a, b, STP_PUBINDEX_HASH_LEN);
}

/* The SHA-256 of every stored block of OLD, sorted. */
static int hash_old(struct pubdelta *d)
{
	uint64_t n = stp_image_sb(d->old)->block_count;

	d->hashes = calloc(n ? n : 1, sizeof(*d->hashes));
	if (!d->hashes)
		return -ENOMEM;
	for (uint64_t b = 0; b < n; b++) {
		size_t len;
		uint8_t *buf = d->workers[0].stored;
		int err = stp_image_read_stored(d->old, STP_SIG_HASH_BLOCK0 + b, buf, &len);

		if (err)
			return err;
		stp_sign_hash(buf, len, d->hashes[b].sha);
		d->hashes[b].block = b;
	}
	qsort(d->hashes, n, sizeof(*d->hashes), by_sha);
	return 0;
}

int pubdelta_old_has(const struct pubdelta *d, const uint8_t sha[STP_PUBINDEX_HASH_LEN])
{
	return bsearch(sha, d->hashes, stp_image_sb(d->old)->block_count, sizeof(*d->hashes),
		       by_sha) != NULL;
}

static int worker_buffers(struct pubdelta *d, struct worker *w)
{
	size_t smax = stp_image_stored_max(d->old), nmax = stp_image_stored_max(d->img);
	uint64_t nold = stp_image_sb(d->old)->block_count + 1;

	w->d = d;
	w->content = malloc(d->block_max);
	w->check = malloc(d->block_max);
	w->delta = malloc(d->block_max);
	w->prefix = malloc(2 * d->block_max);
	w->stored = malloc(smax > nmax ? smax : nmax);
	w->score = calloc(nold, sizeof(*w->score));
	w->touched = calloc(nold, sizeof(*w->touched));
	return w->content && w->check && w->delta && w->prefix && w->stored && w->score &&
	       w->touched ? 0 : -ENOMEM;
}

/* THREADS workers' buffers: each thread's memory is about five blocks and its zstd
 * state, so that THREADS bounds publish's. */
static int buffers(struct pubdelta *d, unsigned threads)
{
	size_t a = stp_image_block_size(d->old), b = stp_image_block_size(d->img);
	int err = 0;

	d->block_max = a > b ? a : b;
	d->workers = calloc(threads, sizeof(*d->workers));
	if (!d->workers)
		return -ENOMEM;
	d->nworkers = threads;
	for (unsigned i = 0; i < threads && !err; i++)
		err = worker_buffers(d, &d->workers[i]);
	return err;
}

/* OLD: a one-file image, or an index with its blocks beside it (localindex.h). */
static int open_old(struct pubdelta *d)
{
	struct stp_imgsrc *src;
	const char *why = NULL;
	int err;

	if (!stp_localindex_is(d->oldpath))
		return stp_cli_open(d->cli, d->oldpath, &d->old);
	err = stp_localindex_open(d->oldpath, &src, &why);
	if (!err)
		err = stp_image_open_src(src, &d->old); /* takes SRC, even on failure */
	if (err)
		stp_cli_problem(d->cli, d->oldpath, NULL, "cannot be a base: %s",
				why ? why : stp_strerror(err));
	return err;
}

int pubdelta_open(const struct stp_cli *cli, const char *old, struct stp_image *img, int level,
		  unsigned threads, struct pubdelta **out)
{
	struct pubdelta *d = calloc(1, sizeof(*d));
	int err;

	if (!d) {
		stp_cli_error(cli, "out of memory");
		return -ENOMEM;
	}
	*d = (struct pubdelta){ .cli = cli, .oldpath = old, .img = img, .level = level };
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->changed, NULL);
	err = open_old(d);
	if (err) {
		pubdelta_close(d);
		return err;
	}
	err = buffers(d, threads ? threads : 1) ?: hash_old(d) ?: map_files(d->old, &d->oldp, by_path) ?:
	      map_files(img, &d->newp, by_block);
	if (err) {
		stp_cli_problem(cli, old, NULL, "cannot be a base: %s", stp_strerror(err));
		pubdelta_close(d);
		return err;
	}
	*out = d;
	return 0;
}

static void worker_free(struct worker *w)
{
	free(w->score);
	free(w->touched);
	free(w->content);
	free(w->check);
	free(w->delta);
	free(w->prefix);
	free(w->stored);
}

/* Stops the workers: each ends after the block it is making. */
static void stop_workers(struct pubdelta *d)
{
	pthread_mutex_lock(&d->lock);
	d->stop = 1;
	pthread_cond_broadcast(&d->changed);
	pthread_mutex_unlock(&d->lock);
	for (unsigned i = 0; i < d->nworkers; i++)
		if (d->workers[i].started)
			pthread_join(d->workers[i].thread, NULL);
}

void pubdelta_close(struct pubdelta *d)
{
	if (!d)
		return;
	stop_workers(d);
	for (unsigned i = 0; i < d->nworkers; i++)
		worker_free(&d->workers[i]);
	free(d->workers);
	if (d->old)
		stp_image_close(d->old);
	free(d->hashes);
	free(d->oldp.v);
	free(d->newp.v);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->changed);
	free(d);
}

/* The first piece of PS at or after KEY in ORDER. */
static size_t lower_bound(const struct pieces *ps, const struct piece *key,
			  int (*order)(const void *, const void *))
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (order(&ps->v[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Scores the OLD blocks holding bytes of P's file near P's file offsets (a block's
 * worth either side: files grow and shrink between releases). */
static void score_piece(struct worker *w, const struct piece *p, size_t *ntouched)
{
	const struct pubdelta *d = w->d;
	struct piece key = { .path = p->path };
	uint64_t slack = d->block_max / 8;
	uint64_t lo = p->file_off > slack ? p->file_off - slack : 0;
	uint64_t hi = p->file_off + p->len + slack;

	for (size_t i = lower_bound(&d->oldp, &key, by_path);
	     i < d->oldp.n && d->oldp.v[i].path == p->path && d->oldp.v[i].file_off < hi; i++) {
		const struct piece *o = &d->oldp.v[i];
		uint64_t from = o->file_off > lo ? o->file_off : lo;
		uint64_t to = o->file_off + o->len < hi ? o->file_off + o->len : hi;

		if (to <= from)
			continue;
		if (!w->score[o->block])
			w->touched[(*ntouched)++] = o->block;
		w->score[o->block] += to - from;
	}
}

/* Whether OLD's block OB can be a base: a zstd frame without a dictionary. */
static int base_usable(const struct pubdelta *d, uint64_t ob)
{
	struct stp_blockent be;

	return !stp_image_block(d->old, ob, &be) && be.codec == STP_CODEC_ZSTD;
}

/* The bases of new block B, best first: how many (0: no OLD block shares its files). */
static unsigned choose_bases(struct worker *w, uint64_t b, uint64_t base[2])
{
	const struct pubdelta *d = w->d;
	struct piece key = { .block = b };
	uint64_t best[2] = { 0, 0 };
	size_t ntouched = 0;
	unsigned n = 0;

	for (size_t i = lower_bound(&d->newp, &key, by_block);
	     i < d->newp.n && d->newp.v[i].block == b; i++)
		score_piece(w, &d->newp.v[i], &ntouched);
	for (size_t i = 0; i < ntouched; i++) {
		uint64_t ob = w->touched[i], s = w->score[ob];

		w->score[ob] = 0;
		if (!base_usable(d, ob) || s <= best[1])
			continue;
		if (s > best[0]) {
			best[1] = best[0], base[1] = base[0];
			best[0] = s, base[0] = ob;
		} else {
			best[1] = s, base[1] = ob;
		}
	}
	n = best[0] ? 1 : 0;
	/* a second base that holds little of the block only slows the delta */
	if (best[1] && best[1] >= best[0] / 16)
		n = 2;
	return n;
}

/* The bases' contents one after the other in w->prefix, their hashes in ENT. */
static int load_prefix(struct worker *w, const uint64_t *base, unsigned n,
		       struct stp_pubindex_delta *ent, size_t *plen)
{
	const struct pubdelta *d = w->d;
	*plen = 0;
	for (unsigned i = 0; i < n; i++) {
		size_t len, got;
		int err = stp_image_read_stored(d->old, STP_SIG_HASH_BLOCK0 + base[i], w->stored,
						&len);

		if (!err)
			err = stp_delta_content(w->stored, len, w->prefix + *plen, d->block_max,
						&got);
		if (err) {
			stp_cli_problem(d->cli, d->oldpath, NULL, "block %" PRIu64 ": %s", base[i],
					stp_strerror(err));
			return err;
		}
		stp_sign_hash(w->stored, len, ent->base_sha256[i]);
		*plen += got;
	}
	ent->base_count = n;
	return 0;
}

/* The delta of w->content (CLEN bytes) against the prefix, when it is at most CAP bytes
 * and rebuilds the content exactly. */
static int delta_of(struct worker *w, size_t clen, size_t plen, size_t cap, size_t *dlen)
{
	int err = stp_delta_make(w->content, clen, w->prefix, plen, w->d->level, w->delta, cap,
				 dlen);

	if (err == -ENOSPC)
		return 0;
	if (!err)
		err = stp_delta_apply(w->delta, *dlen, w->prefix, plen, w->check, clen);
	if (!err && memcmp(w->check, w->content, clen))
		err = -EUCLEAN;
	if (err) {
		stp_cli_error(w->d->cli, "a delta could not be made: %s", stp_strerror(err));
		return err;
	}
	return 1;
}

/* Reads block B of the new image into w->stored, and checks that it still hashes to
 * SHA, as the first pass found it: *LEN its stored bytes. */
static int read_new(struct worker *w, uint64_t b, const uint8_t *sha, size_t *len)
{
	uint8_t now[STP_PUBINDEX_HASH_LEN];
	int err = stp_image_read_stored(w->d->img, STP_SIG_HASH_BLOCK0 + b, w->stored, len);

	if (!err) {
		stp_sign_hash(w->stored, *len, now);
		err = memcmp(now, sha, sizeof(now)) ? -EAGAIN : 0;
	}
	if (err)
		stp_cli_problem(w->d->cli, stp_image_path(w->d->img), NULL, "block %" PRIu64
				": %s", b, err == -EAGAIN ? "changed while it was being published"
				: stp_strerror(err));
	return err;
}

/* The delta of the block of WANT into w->delta and w->ent, when one pays: 1 with a
 * delta, 0 without, or a negative errno. */
static int make_delta(struct worker *w, const struct pubdelta_want *want)
{
	const struct pubdelta *d = w->d;
	const struct stp_superblock *sb = stp_image_sb(d->img);
	struct stp_pubindex_delta *ent = &w->ent;
	struct stp_blockent be;
	uint64_t base[2], b = want->block;
	size_t len, clen, plen, dlen;
	unsigned n;
	int rc;

	if (stp_image_block(d->img, b, &be) || be.codec != STP_CODEC_ZSTD ||
	    !(n = choose_bases(w, b, base)))
		return 0;
	if ((rc = read_new(w, b, want->sha256, &len)))
		return rc;
	if (stp_delta_content(w->stored, len, w->content, d->block_max, &clen) ||
	    clen != stp_sb_block_len(sb, b))
		return 0;
	memset(ent, 0, sizeof(*ent));
	rc = load_prefix(w, base, n, ent, &plen);
	if (!rc)
		rc = delta_of(w, clen, plen, len / 4 * 3, &dlen);
	if (rc <= 0)
		return rc;
	ent->block = b;
	ent->delta_size = (uint32_t)dlen;
	ent->content_size = (uint32_t)clen;
	stp_sign_hash(w->delta, dlen, ent->delta_sha256);
	stp_sign_hash(w->content, clen, ent->content_sha256);
	return 1;
}

/* A worker: claims the next block wanted, makes its delta, and waits for pubdelta_next
 * to take it before it claims another, so that at most one delta a thread is held. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pubdelta *d = w->d;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (w->job != JOB_IDLE && !d->stop)
			pthread_cond_wait(&d->changed, &d->lock);
		if (d->stop || d->claimed == d->nwant)
			break;
		w->want = d->claimed++;
		w->job = JOB_BUSY;
		pthread_mutex_unlock(&d->lock);
		w->rc = make_delta(w, &d->want[w->want]);
		pthread_mutex_lock(&d->lock);
		w->job = JOB_DONE;
		pthread_cond_broadcast(&d->changed);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int pubdelta_start(struct pubdelta *d, const struct pubdelta_want *want, size_t n)
{
	d->want = want;
	d->nwant = n;
	for (unsigned i = 0; i < d->nworkers; i++) {
		int err = -pthread_create(&d->workers[i].thread, NULL, worker_main,
					  &d->workers[i]);

		if (err) {
			stp_cli_error(d->cli, "cannot start a thread: %s", stp_strerror(err));
			return err;
		}
		d->workers[i].started = 1;
	}
	return 0;
}

/* The worker that holds the delta of d->want[I], once it is made (under the lock). */
static struct worker *made(struct pubdelta *d, size_t i)
{
	for (;;) {
		for (unsigned k = 0; k < d->nworkers; k++) {
			struct worker *w = &d->workers[k];

			if (w->job == JOB_DONE && w->want == i)
				return w;
		}
		pthread_cond_wait(&d->changed, &d->lock);
	}
}

int pubdelta_next(struct pubdelta *d, const uint8_t **delta, struct stp_pubindex_delta *ent)
{
	struct worker *w;

	if (d->taken == d->nwant)
		return -EINVAL; /* the caller's bug: more taken than wanted */
	pthread_mutex_lock(&d->lock);
	if (d->held) {
		d->held->job = JOB_IDLE;
		pthread_cond_broadcast(&d->changed);
	}
	w = d->held = made(d, d->taken++);
	pthread_mutex_unlock(&d->lock);
	if (w->rc == 1) {
		*ent = w->ent;
		*delta = w->delta;
	}
	return w->rc;
}
