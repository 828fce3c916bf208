/* SPDX-License-Identifier: MIT */
/*
 * The filler: one mutex guards the lookup counts, the index and the queues; the thread
 * copies what a job needs out of the index under it and pushes outside it. A file the
 * kernel learns of is only queued under it (the inode table's lock is held then): the
 * thread walks its extents with no lock held, then files the pieces.
 */
#include "fill.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cache.h"
#include "fileread.h"
#include "format.h"
#include "image.h"
#include "inodes.h"
#include "pagestore.h"
#include "util.h"

#define NONE UINT32_MAX
#define PIECES_MAX (1u << 18)      /* index records at most: 10 MiB */
#define STOP_WAIT_S 2              /* as warm.c: a push stuck in the kernel never returns */
#define WALK_CALLS_MAX (4u * PIECES_MAX) /* pieces a file's walk looks at, kept or not */

/* indexed[ino]: the kernel knows the file; its pieces are filed; it waits in the ring */
#define S_KNOWN 1u
#define S_FILED 2u
#define S_RINGED 4u

/* LEN bytes of file INO at FILE_OFF, stored at stream offset STREAM_OFF, in one block. */
struct piece {
	uint64_t file_off, stream_off, file_size;
	uint32_t ino, len;
	uint32_t next, prev; /* the block's list; next also chains the free list; in a job's
			      * copy, next is the record's index */
	uint32_t next_of_ino;
	uint32_t pushed;     /* all its pages went in once: not again while the file is known */
};

enum job_kind { JOB_BLOCK, JOB_FILE };

struct job {
	enum job_kind kind;
	uint64_t id;   /* block or image inode */
	unsigned tries; /* times run before, refused an inode whose lookup reply was on its way */
	uint64_t due;  /* not run before (stp_now_ns) */
};

struct stp_filler {
	const struct stp_image *img;
	struct stp_cache *cache;
	struct stp_pagestore store;
	const struct stp_inodes *inodes; /* the inodes the kernel knows */
	const struct stp_superblock *sb; /* the image's: where its blocks lie */
	uint32_t ninodes;
	uint64_t nblocks;
	uint64_t warmed_end;       /* stream bytes below it are the warmer's to push */

	pthread_mutex_t lock;
	pthread_cond_t cond;       /* a job was queued, or stop */
	uint8_t *indexed;          /* by image inode: S_* of a regular file (known: counted) */
	uint32_t *ring;            /* files to index, each once at most: ninodes slots */
	uint32_t ring_head, ring_len;
	int walking;               /* a file taken from the ring is being walked */
	uint32_t *ino_head;        /* by image inode: its first piece, stored + 1 (head()) */
	uint32_t *block_head;      /* by block: its first piece, stored + 1 */
	uint8_t *queued;           /* by block: a job for it waits */
	struct piece *pool;
	uint32_t pool_len, pool_cap, free_head, pieces;
	uint64_t known;
	struct job queue[STP_FILL_QUEUE];
	unsigned qhead, qlen;
	int stop;
	struct stp_fill_status st; /* counters, lock (cpu_ns: the thread's) */

	pthread_t thread;
	int started, joined;
};

/* The heads are stored plus one, so that zeroed memory reads NONE: the tables (4 bytes
 * an inode and a block) come from calloc untouched, and no page of them is written
 * before a piece is filed there (memset to NONE faulted in all of them before the mount
 * was live: 4 MiB for a million files). */
static uint32_t head(const uint32_t *heads, uint64_t k)
{
	return heads[k] - 1;
}

static void set_head(uint32_t *heads, uint64_t k, uint32_t i)
{
	heads[k] = i + 1;
}

/* Lock held: a free record, or NONE when the index is at its bound. */
static uint32_t piece_new(struct stp_filler *f)
{
	uint32_t i = f->free_head;

	if (i != NONE) {
		f->free_head = f->pool[i].next;
		return i;
	}
	if (f->pool_len == f->pool_cap) {
		uint32_t cap = f->pool_cap ? f->pool_cap * 2 : 1024;
		struct piece *p;

		if (cap > PIECES_MAX)
			cap = PIECES_MAX;
		if (cap == f->pool_cap || !(p = realloc(f->pool, cap * sizeof(*p))))
			return NONE;
		f->pool = p;
		f->pool_cap = cap;
	}
	return f->pool_len++;
}

struct index_walk {
	const struct stp_filler *f;
	uint32_t ino;
	uint64_t file_size;
	struct piece *ps;  /* the pieces found, the caller's to free */
	uint32_t n, cap;
	uint32_t calls;
	int full;
};

/* No lock held: keeps a stored piece, but for its bytes below warmed_end. */
static int index_piece(void *ctx, const struct stp_file_piece *fp)
{
	struct index_walk *iw = ctx;
	const struct stp_filler *f = iw->f;
	uint64_t skip = 0, k = fp->block;

	if (++iw->calls > WALK_CALLS_MAX) {
		iw->full = 1; /* a hostile file's walk is cut short: its rest is read as before */
		return -ENOSPC;
	}
	if (k == STP_FILE_HOLE || k >= f->nblocks)
		return 0; /* past the stream: reads report it */
	if (fp->stream_off < f->warmed_end)
		skip = f->warmed_end - fp->stream_off;
	if (skip >= fp->len)
		return 0;
	if (iw->n == iw->cap) {
		uint32_t cap = iw->cap ? iw->cap * 2 : 64;
		struct piece *p = cap <= PIECES_MAX ? realloc(iw->ps, cap * sizeof(*p)) : NULL;

		if (!p) {
			iw->full = 1;
			return -ENOSPC;
		}
		iw->ps = p;
		iw->cap = cap;
	}
	iw->ps[iw->n++] = (struct piece){ .file_off = fp->file_off + skip,
					  .stream_off = fp->stream_off + skip,
					  .file_size = iw->file_size, .ino = iw->ino,
					  .len = (uint32_t)(fp->len - skip) };
	return 0;
}

/* Lock held: files piece P of its block K; 0, or -ENOSPC when the index is full. */
static int file_piece(struct stp_filler *f, const struct piece *p, uint64_t k)
{
	uint32_t i = piece_new(f);

	if (i == NONE)
		return -ENOSPC;
	f->pool[i] = *p;
	f->pool[i].next = head(f->block_head, k);
	f->pool[i].prev = NONE;
	f->pool[i].next_of_ino = head(f->ino_head, p->ino);
	if (head(f->block_head, k) != NONE)
		f->pool[head(f->block_head, k)].prev = i;
	set_head(f->block_head, k, i);
	set_head(f->ino_head, p->ino, i);
	f->pieces++;
	return 0;
}

/* Lock held: frees every piece of INO. */
static void unindex(struct stp_filler *f, uint32_t ino)
{
	for (uint32_t i = head(f->ino_head, ino), next; i != NONE; i = next) {
		struct piece *p = &f->pool[i];
		uint64_t k = stp_sb_block_of(f->sb, p->stream_off);

		next = p->next_of_ino;
		if (p->prev != NONE)
			f->pool[p->prev].next = p->next;
		else
			set_head(f->block_head, k, p->next);
		if (p->next != NONE)
			f->pool[p->next].prev = p->prev;
		p->next = f->free_head;
		f->free_head = i;
		f->pieces--;
	}
	set_head(f->ino_head, ino, NONE);
}

/* Lock held. Drops the job when the queue is full: the pages are read as before. */
static void enqueue_job(struct stp_filler *f, const struct job *j)
{
	if (f->qlen == STP_FILL_QUEUE) {
		f->st.dropped++;
		return;
	}
	if (j->kind == JOB_BLOCK) {
		if (f->queued[j->id])
			return;
		f->queued[j->id] = 1;
	}
	f->queue[(f->qhead + f->qlen++) % STP_FILL_QUEUE] = *j;
	pthread_cond_signal(&f->cond);
}

static void enqueue(struct stp_filler *f, enum job_kind kind, uint64_t id)
{
	enqueue_job(f, &(struct job){ .kind = kind, .id = id });
}

/* Lock held on entry and return, dropped for the walk: files the pieces of INO, taken
 * from the ring, if the kernel still knows it and they are not filed yet. */
static void index_file(struct stp_filler *f, uint32_t ino)
{
	struct index_walk iw = { f, ino, 0, NULL, 0, 0, 0, 0 };
	struct stp_inode inode;
	int rc;

	if ((f->indexed[ino] & (S_KNOWN | S_FILED)) != S_KNOWN)
		return;
	f->walking = 1;
	pthread_mutex_unlock(&f->lock);
	rc = stp_image_inode(f->img, ino, &inode);
	if (!rc) {
		iw.file_size = inode.size;
		stp_file_walk(f->img, &inode, 0, inode.size, index_piece, &iw);
	}
	pthread_mutex_lock(&f->lock);
	f->walking = 0;
	/* forgotten meanwhile: nothing to file; known again: the same pieces */
	if ((f->indexed[ino] & (S_KNOWN | S_FILED)) == S_KNOWN) {
		f->indexed[ino] |= S_FILED;
		for (uint32_t i = 0; i < iw.n && !iw.full; i++)
			iw.full = file_piece(f, &iw.ps[i], stp_sb_block_of(f->sb,
									   iw.ps[i].stream_off)) != 0;
		if (iw.full || rc)
			f->st.dropped++; /* the pieces that fitted stay */
		if (head(f->ino_head, ino) != NONE)
			enqueue(f, JOB_FILE, ino);
	}
	free(iw.ps);
}

/* Watches the inode table (inodes.h calls it in the order the counts moved). */
static void note_known(void *ctx, uint32_t ino, const struct stp_inode *inode)
{
	struct stp_filler *f = ctx;

	if (ino >= f->ninodes || (inode && (!S_ISREG(inode->mode) || !inode->size)))
		return;
	pthread_mutex_lock(&f->lock);
	if (inode && !(f->indexed[ino] & S_KNOWN)) {
		f->indexed[ino] |= S_KNOWN;
		f->known++;
		if (!(f->indexed[ino] & S_RINGED)) { /* each inode once: the ring never fills */
			f->indexed[ino] |= S_RINGED;
			f->ring[(f->ring_head + f->ring_len++) % f->ninodes] = ino;
			pthread_cond_signal(&f->cond);
		}
	} else if (!inode && (f->indexed[ino] & S_KNOWN)) {
		f->indexed[ino] &= (uint8_t)~(S_KNOWN | S_FILED);
		f->known--;
		unindex(f, ino);
	}
	pthread_mutex_unlock(&f->lock);
}

void stp_fill_note_decoded(struct stp_filler *f, uint64_t block)
{
	if (!f || block >= f->nblocks)
		return;
	pthread_mutex_lock(&f->lock);
	/* files not indexed yet may have pieces in it: the ring goes first, then the block */
	if (head(f->block_head, block) != NONE || f->ring_len || f->walking)
		enqueue(f, JOB_BLOCK, block);
	pthread_mutex_unlock(&f->lock);
}

/* Pushes the whole pages of P from its block's data BASE, at most BUDGET bytes; returns
 * the bytes pushed, *AGAIN set when the kernel does not hold the file yet. A page cut by
 * the block's edge is left to reads, and so is the last page of a piece unless the file
 * ends there. */
static uint64_t push_piece(struct stp_filler *f, struct piece *p,
			   const struct stp_block_ref *ref, uint64_t budget, int *again)
{
	uint64_t a, b, done, want;
	size_t in;

	stp_pagestore_span(p->file_off, p->len, p->file_size, &a, &b);
	in = (size_t)(stp_sb_block_offset(f->sb, p->stream_off) + (a - p->file_off));
	want = b - a;
	if (want > budget)
		b = a + (budget & ~(uint64_t)(STP_PAGESTORE_PAGE - 1));
	/* short: forgotten, or the mount is going: reads serve it */
	done = stp_pagestore_push_once(&f->store, p->ino, a, b, ref, in, again);
	p->pushed = done == want; /* nothing whole to push counts as pushed */
	return done;
}

/* Lock held: copies the pieces of a job not pushed yet into a new array (*N of them). */
static struct piece *collect(struct stp_filler *f, const struct job *j, uint32_t *n)
{
	uint32_t count = 0, first = head(j->kind == JOB_BLOCK ? f->block_head : f->ino_head, j->id);
	struct piece *out;

	for (uint32_t i = first; i != NONE;
	     i = j->kind == JOB_BLOCK ? f->pool[i].next : f->pool[i].next_of_ino)
		count += !f->pool[i].pushed;
	*n = 0;
	if (!count || !(out = malloc(count * sizeof(*out))))
		return NULL;
	for (uint32_t i = first; i != NONE;
	     i = j->kind == JOB_BLOCK ? f->pool[i].next : f->pool[i].next_of_ino) {
		if (f->pool[i].pushed)
			continue;
		out[*n] = f->pool[i];
		out[(*n)++].next = i;
	}
	return out;
}

/* One job, outside the lock: blocks are pinned only if still resident (or being decoded),
 * one at a time. True when a piece is to be tried again (its file's lookup reply was
 * still on its way). */
static int run_job(struct stp_filler *f, const struct job *j, struct piece *ps, uint32_t n)
{
	uint64_t left = STP_FILL_BLOCK_BYTES, pushed;
	struct stp_block_ref ref = { 0 };
	int again = 0;

	for (uint32_t i = 0; i < n && left; i++) {
		uint64_t k = stp_sb_block_of(f->sb, ps[i].stream_off);
		uint64_t in = stp_sb_block_offset(f->sb, ps[i].stream_off);

		if (ref.entry && ref.block != k)
			stp_cache_release(f->cache, &ref);
		/* a block still decoding for a read is waited for: only whole ones are pushed */
		if (!ref.entry && stp_cache_get_decoded(f->cache, k, &ref))
			continue;
		if (in + ps[i].len > ref.size)
			continue; /* extents past the block's bytes: a read reports the damage */
		pushed = push_piece(f, &ps[i], &ref, left, &again);
		left -= pushed;
		if (j->kind == JOB_FILE && !ps[i].pushed && left)
			break; /* the kernel does not have the file (yet, or any more) */
	}
	stp_cache_release(f->cache, &ref);
	return again;
}

/* Lock held: the job at the queue's head that is due, the ones not due yet moved behind
 * it; 0 when none is, *WAIT then the nanoseconds until the first is. */
static int take_due(struct stp_filler *f, struct job *j, uint64_t *wait)
{
	uint64_t now = stp_now_ns();

	*wait = UINT64_MAX;
	for (unsigned i = f->qlen; i; i--) {
		*j = f->queue[f->qhead];
		f->qhead = (f->qhead + 1) % STP_FILL_QUEUE;
		if (j->due <= now) {
			f->qlen--;
			return 1;
		}
		if (j->due - now < *wait)
			*wait = j->due - now;
		f->queue[(f->qhead + f->qlen - 1) % STP_FILL_QUEUE] = *j;
	}
	return 0;
}

/* Lock held: waits for a job or a signal, at most WAIT ns (UINT64_MAX: no bound). */
static void wait_job(struct stp_filler *f, uint64_t wait)
{
	struct timespec ts;

	if (wait == UINT64_MAX) {
		pthread_cond_wait(&f->cond, &f->lock);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)((ts.tv_nsec + wait) / 1000000000u);
	ts.tv_nsec = (long)((ts.tv_nsec + wait) % 1000000000u);
	pthread_cond_timedwait(&f->cond, &f->lock, &ts);
}

/* Lock held: a job that met a file whose lookup reply was on its way runs again later
 * (pagestore.h), after the jobs queued meanwhile (the filler never naps with work
 * waiting). */
static void retry_later(struct stp_filler *f, struct job *j)
{
	if (j->tries >= STP_PAGESTORE_ROUNDS) {
		stp_pagestore_give_up(&f->store); /* those pages are read as usual */
		return;
	}
	j->due = stp_now_ns() + STP_PAGESTORE_LATER_NS(j->tries++);
	if (j->kind == JOB_BLOCK)
		f->queued[j->id] = 0;
	enqueue_job(f, j);
}

/* Lock held: records the pieces a job pushed whole, unless forgotten meanwhile (a record
 * reused since for the same file and stream bytes is the same piece). */
static void mark_pushed(struct stp_filler *f, const struct piece *ps, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct piece *p = &f->pool[ps[i].next];

		if (ps[i].pushed && p->ino == ps[i].ino && p->stream_off == ps[i].stream_off &&
		    (f->indexed[p->ino] & S_KNOWN))
			p->pushed = 1;
	}
}

/* The filler's own CPU time, system time included: what the pushes cost. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *fill_main(void *arg)
{
	struct stp_filler *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		struct piece *ps;
		struct job j;
		uint64_t t0, wait;
		uint32_t n;
		int again = 0;

		if (f->ring_len) { /* new files first: their pages are the likeliest read */
			uint32_t ino = f->ring[f->ring_head];

			f->ring_head = (f->ring_head + 1) % f->ninodes;
			f->ring_len--;
			f->indexed[ino] &= (uint8_t)~S_RINGED;
			index_file(f, ino);
			continue;
		}
		if (!take_due(f, &j, &wait)) {
			wait_job(f, wait);
			continue;
		}
		if (j.kind == JOB_BLOCK)
			f->queued[j.id] = 0;
		f->st.jobs++;
		ps = collect(f, &j, &n);
		pthread_mutex_unlock(&f->lock);
		t0 = thread_cpu_ns();
		if (ps)
			again = run_job(f, &j, ps, n);
		pthread_mutex_lock(&f->lock);
		mark_pushed(f, ps, n);
		if (again)
			retry_later(f, &j);
		free(ps);
		f->st.cpu_ns += thread_cpu_ns() - t0;
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void filler_free(struct stp_filler *f)
{
	free(f->indexed);
	free(f->ring);
	free(f->ino_head);
	free(f->block_head);
	free(f->queued);
	free(f->pool);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

uint64_t stp_fill_memory(const struct stp_superblock *sb)
{
	struct stp_filler *f = NULL;

	return sb->block_count * (sizeof(*f->block_head) + sizeof(*f->queued)) +
	       (uint64_t)sb->inode_count *
		       (sizeof(*f->indexed) + sizeof(*f->ring) + sizeof(*f->ino_head)) +
	       sizeof(*f);
}

int stp_fill_new(const struct stp_image *img, struct stp_cache *cache, struct fuse_session *se,
		 struct stp_inodes *inodes, uint64_t warmed_end, struct stp_filler **out)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	struct stp_filler *f = calloc(1, sizeof(*f));
	int rc;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->img = img;
	f->cache = cache;
	stp_pagestore_init(&f->store, se, inodes);
	f->inodes = inodes;
	f->sb = sb;
	f->ninodes = sb->inode_count;
	f->nblocks = sb->block_count;
	f->warmed_end = warmed_end;
	f->free_head = NONE;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->indexed = calloc(f->ninodes ? f->ninodes : 1, sizeof(*f->indexed));
	f->ring = malloc((f->ninodes ? f->ninodes : 1) * sizeof(*f->ring));
	f->ino_head = calloc(f->ninodes ? f->ninodes : 1, sizeof(*f->ino_head));
	f->block_head = calloc(f->nblocks ? f->nblocks : 1, sizeof(*f->block_head));
	f->queued = calloc(f->nblocks ? f->nblocks : 1, 1);
	if (!f->indexed || !f->ring || !f->ino_head || !f->block_head || !f->queued) {
		filler_free(f);
		return -ENOMEM;
	}
	rc = stp_inodes_watch(inodes, note_known, f);
	if (rc) {
		filler_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

int stp_fill_run(struct stp_filler *f)
{
	int rc = stp_thread_create_blocked(&f->thread, 0, fill_main, f);

	f->started = rc == 0;
	return rc;
}

int stp_fill_halt(struct stp_filler *f)
{
	struct timespec deadline;
	int rc;

	if (!f || !f->started || f->joined)
		return 0;
	pthread_mutex_lock(&f->lock);
	f->stop = 1;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STOP_WAIT_S;
	rc = pthread_timedjoin_np(f->thread, NULL, &deadline);
	f->joined = rc == 0;
	return -rc;
}

int stp_fill_stop(struct stp_filler *f)
{
	if (!f)
		return 0;
	if (stp_fill_halt(f))
		return -ETIMEDOUT;
	filler_free(f);
	return 0;
}

void stp_fill_status(struct stp_filler *f, struct stp_fill_status *out)
{
	memset(out, 0, sizeof(*out));
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	*out = f->st;
	stp_pagestore_stats(&f->store, &out->store);
	out->known = f->known;
	out->pieces = f->pieces;
	pthread_mutex_unlock(&f->lock);
}
