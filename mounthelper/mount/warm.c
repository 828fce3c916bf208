/* SPDX-License-Identifier: MIT */
/*
 * Warming the hot region. The plan (warmplan.h: which hot file bytes lie in which block)
 * is built once at start; workers then take blocks in order, decode them through the cache, push
 * the bytes of files the kernel knows into its page cache, and hold each block until its
 * hot pages are in the page cache or have been read. A store thread pushes a file's
 * warmed bytes when the kernel first learns of the file, and again those of a file whose
 * store the kernel refused while it was still taking in the file's lookup reply.
 */
#include "warm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cache.h"
#include "format.h"
#include "image.h"
#include "inodes.h"
#include "log.h"
#include "pagestore.h"
#include "util.h"
#include "warmplan.h"

#define HOLD_WAIT_NS 1000000000ll /* how long a full warmer waits for reads to free a block */
#define QUEUE_LEN 65536u          /* inodes waiting for a store; more are not stored */
#define LINGER_NS 30000000000ll  /* after warming, how long held blocks wait for a reader */
/* A file whose store the kernel refused while the table knew it (the kernel had not
 * taken the lookup reply yet: its requester had not run again, as on a busy machine) is
 * stored again later by pagestore.h's rule, while its blocks are held; RETRY_MAX such
 * retries a warmer makes in all, RETRY_PENDING waiting at once. */
#define RETRY_MAX 1024u
#define RETRY_PENDING 64u
/* How long stopping waits for a thread: one blocked in notify_store, on a page that a
 * read the ended loop will never answer holds locked, never returns. */
#define STOP_WAIT_S 2

enum bstate { B_PENDING, B_DECODING, B_HELD, B_RELEASED };
/* The block after the hot region (warmplan.h: follow): none, to decode, being, done. */
enum fstate { F_NONE, F_PENDING, F_DECODING, F_DONE };

/* Why a held block is let go once its pushes end (unhold_locked while it is pushed). */
enum letgo { L_NONE, L_ROOM, L_CONSUMED };

struct wblock {
	struct stp_block_ref ref;  /* B_HELD: the warmer's pin, which its pushes use too */
	enum bstate state;         /* protected by lock */
	unsigned pushing;          /* threads pushing its pages now: it stays held; lock */
	enum letgo let_go;         /* asked meanwhile: done by the last push; lock */
	uint32_t pages_left;       /* atomic: hot pages neither stored nor read */
};

struct stp_warmer {
	const struct stp_image *img;
	struct stp_cache *cache;
	struct stp_pagestore store; /* its session NULL: pages are never stored */
	const struct stp_inodes *inodes; /* the inodes the kernel knows */
	struct stp_warm_plan plan;
	const struct stp_superblock *sb; /* the plan's, copied for brevity */
	uint64_t hot_size, nblocks;
	uint32_t ninodes;
	uint8_t *page_done;        /* atomic, by hot page */
	struct wblock *blocks;

	pthread_mutex_t lock;
	pthread_cond_t cond;       /* a block was let go, the queue grew, or stop */
	uint64_t next, warmed, held; /* protected by lock */
	uint64_t finished;         /* blocks decoded and pushed, or failed; lock */
	uint64_t decoding;         /* blocks taken, not yet held; protected by lock */
	unsigned idle_full;        /* workers waiting on a full budget with no reads; lock */
	unsigned running;          /* workers still warming; protected by lock */
	unsigned demand;           /* reads decoding a block themselves now; lock */
	uint64_t ahead;            /* hot blocks a read decoded before warming took them; lock */
	enum fstate follow;        /* protected by lock */
	int stop;                  /* protected by lock */
	uint32_t queue[QUEUE_LEN]; /* inodes to store; lock */
	unsigned qhead, qlen;
	struct wretry {
		uint32_t ino;
		unsigned round;    /* 1 for the first retry */
		uint64_t due_ns;   /* stp_now_ns() */
	} retries[RETRY_PENDING];  /* lock */
	unsigned nretries;         /* waiting in RETRIES; lock */
	unsigned retrying;         /* retries waiting or running; protected by lock */
	unsigned retries_left;     /* protected by lock */
	uint64_t reads;            /* atomic: reads answered, whatever their block */

	unsigned nworkers;
	pthread_t *threads;        /* nworkers workers, then the store thread */
	unsigned nthreads, joined;
};

/* The warmer's own state beside the plan: stored pages, block states. */
static int alloc_state(struct stp_warmer *w)
{
	uint64_t hot_pages = (w->hot_size + STP_HOT_PAGE - 1) / STP_HOT_PAGE;

	w->page_done = calloc(hot_pages ? hot_pages : 1, 1);
	w->blocks = calloc(w->nblocks ? w->nblocks : 1, sizeof(*w->blocks));
	if (!w->page_done || !w->blocks)
		return -ENOMEM;
	for (uint64_t k = 0; k < w->nblocks; k++)
		w->blocks[k].pages_left = w->plan.block_pages[k];
	return 0;
}

/* Lets go of block K (lock held): its pin moves to *ref for the caller to release. A
 * block being pushed stays held, counted against the budget, until its last push ends
 * (push_end does it then, for WHY): a push may wait for a read, and the read for a
 * buffer (warm.h). */
static int unhold_locked(struct stp_warmer *w, uint64_t k, struct stp_block_ref *ref,
			 enum letgo why)
{
	if (w->blocks[k].state != B_HELD)
		return 0;
	if (w->blocks[k].pushing) {
		w->blocks[k].let_go = why > w->blocks[k].let_go ? why : w->blocks[k].let_go;
		return 0;
	}
	w->blocks[k].state = B_RELEASED;
	*ref = w->blocks[k].ref;
	w->held--;
	pthread_cond_broadcast(&w->cond);
	return 1;
}

/* Whether block K holds zeros of no file (a hot block cut early, or the end of a hot
 * region padded to its block). */
static int block_padded(const struct stp_warmer *w, uint64_t k)
{
	uint64_t start = stp_sb_block_start(w->sb, k), end = stp_sb_block_end(w->sb, k);

	end = end < w->hot_size ? end : w->hot_size;
	return w->plan.block_pages[k] < (end - start + STP_HOT_PAGE - 1) / STP_HOT_PAGE;
}

/* Outside the lock: releases the pin unhold_locked handed over; a consumed block that is
 * not padded leaves the cache too. */
static void let_go(struct stp_warmer *w, uint64_t k, struct stp_block_ref *ref, enum letgo why)
{
	stp_cache_release(w->cache, ref);
	if (why == L_CONSUMED && !block_padded(w, k))
		stp_cache_drop(w->cache, k);
}

/* K's hot bytes are all in the page cache: nothing needs the block any more. A padded
 * one goes back to the cache's LRU instead: such blocks were held until warming ended,
 * and a read that still comes for them (the kernel may not keep every stored page) found
 * them decoded. */
static void block_consumed(struct stp_warmer *w, uint64_t k)
{
	struct stp_block_ref ref;
	int had;

	pthread_mutex_lock(&w->lock);
	had = unhold_locked(w, k, &ref, L_CONSUMED);
	pthread_mutex_unlock(&w->lock);
	if (had)
		let_go(w, k, &ref, L_CONSUMED);
}

/* Pins held block K for a push: REF borrows the warmer's pin (never released by the
 * caller), and K stays held until push_end. 0 when K is not held, or is to go once the
 * pushes under way end (consumed: nothing is left to push). */
static int push_begin(struct stp_warmer *w, uint64_t k, struct stp_block_ref *ref)
{
	int held;

	pthread_mutex_lock(&w->lock);
	held = w->blocks[k].state == B_HELD && w->blocks[k].let_go == L_NONE;
	if (held) {
		w->blocks[k].pushing++;
		*ref = w->blocks[k].ref;
	}
	pthread_mutex_unlock(&w->lock);
	return held;
}

/* A push from K ended: the last one lets K go if that was asked meanwhile. */
static void push_end(struct stp_warmer *w, uint64_t k)
{
	struct stp_block_ref ref;
	enum letgo why;
	int had = 0;

	pthread_mutex_lock(&w->lock);
	why = w->blocks[k].let_go;
	if (--w->blocks[k].pushing == 0 && why != L_NONE) {
		w->blocks[k].let_go = L_NONE;
		had = unhold_locked(w, k, &ref, why);
	}
	pthread_mutex_unlock(&w->lock);
	if (had)
		let_go(w, k, &ref, why);
}

static void mark_pages(struct stp_warmer *w, uint64_t off, uint64_t len)
{
	uint64_t end = off + len < w->hot_size ? off + len : w->hot_size;

	for (uint64_t p = off / STP_HOT_PAGE; p * STP_HOT_PAGE < end; p++) {
		uint64_t k = stp_sb_block_of(w->sb, p * STP_HOT_PAGE);

		if (__atomic_exchange_n(&w->page_done[p], 1, __ATOMIC_RELAXED))
			continue;
		if (__atomic_sub_fetch(&w->blocks[k].pages_left, 1, __ATOMIC_ACQ_REL) == 0)
			block_consumed(w, k);
	}
}

void stp_warm_note_read(struct stp_warmer *w, uint64_t off, uint64_t len)
{
	if (!w)
		return;
	__atomic_add_fetch(&w->reads, 1, __ATOMIC_RELAXED);
	if (off < w->hot_size && len)
		mark_pages(w, off, len);
}

/* Lock held: queues INO for the store thread. */
static void enqueue_locked(struct stp_warmer *w, uint32_t ino)
{
	if (w->qlen >= QUEUE_LEN)
		return;
	w->queue[(w->qhead + w->qlen++) % QUEUE_LEN] = ino;
	pthread_cond_broadcast(&w->cond);
}

/* A store of INO after ROUND retries met a lookup reply the kernel has not taken yet:
 * the store thread tries the file again later (pagestore.h), while its blocks are held,
 * instead of leaving those pages to reads after warming. */
static void retry_later(struct stp_warmer *w, uint32_t ino, unsigned round)
{
	pthread_mutex_lock(&w->lock);
	if (round < STP_PAGESTORE_ROUNDS && w->retries_left && w->nretries < RETRY_PENDING &&
	    !w->stop) {
		w->retries_left--;
		w->retrying++;
		w->retries[w->nretries++] = (struct wretry){
			ino, round + 1, stp_now_ns() + STP_PAGESTORE_LATER_NS(round) };
		pthread_cond_broadcast(&w->cond);
	} else {
		stp_pagestore_give_up(&w->store);
	}
	pthread_mutex_unlock(&w->lock);
}

/* Lock held: takes a retry that is due into *R (1), or says in *NEXT when the first one
 * will be (0; UINT64_MAX: none waits). */
static int take_due_retry_locked(struct stp_warmer *w, struct wretry *r, uint64_t *next)
{
	uint64_t now = stp_now_ns();

	*next = UINT64_MAX;
	for (unsigned i = 0; i < w->nretries; i++) {
		if (w->retries[i].due_ns <= now) {
			*r = w->retries[i];
			w->retries[i] = w->retries[--w->nretries];
			return 1;
		}
		if (w->retries[i].due_ns < *next)
			*next = w->retries[i].due_ns;
	}
	return 0;
}

/* Pushes the whole pages of S (from pinned block REF) into the kernel's page cache.
 * 1 when the kernel refused a file the table still knows: worth trying again. */
static int store_seg(struct stp_warmer *w, const struct stp_warm_seg *s,
		     const struct stp_block_ref *ref)
{
	uint64_t a, b;
	size_t in;

	stp_pagestore_span(s->file_off, s->len, s->file_size, &a, &b);
	in = (size_t)(stp_sb_block_offset(w->sb, s->stream_off) + (a - s->file_off));
	if (!w->store.se || b == a)
		return 0;
	/* all or nothing: the kernel forgot the inode, or the mount is going: reads serve it */
	if (stp_pagestore_push(&w->store, s->ino, a, b, ref, in) == b - a) {
		mark_pages(w, s->stream_off + (a - s->file_off), b - a);
		return 0;
	}
	return stp_inodes_known(w->inodes, s->ino);
}

/* Stores every segment of block K whose file the kernel knows. */
static void store_block(struct stp_warmer *w, uint64_t k)
{
	const struct stp_warm_plan *p = &w->plan;
	struct stp_block_ref ref;

	if (!push_begin(w, k, &ref))
		return; /* read whole meanwhile */
	for (uint32_t i = p->block_first[k]; i < p->block_first[k + 1]; i++)
		if (stp_inodes_known(w->inodes, p->segs[i].ino) && store_seg(w, &p->segs[i], &ref))
			retry_later(w, p->segs[i].ino, 0);
	push_end(w, k);
}

/* Stores INO's warmed pages from the blocks still held, after ROUND retries; a refusal
 * is tried again later (retry_later). */
static void store_inode(struct stp_warmer *w, uint32_t ino, unsigned round)
{
	const struct stp_warm_plan *p = &w->plan;
	int again = 0;

	for (uint32_t i = p->ino_first[ino]; i < p->ino_first[ino + 1]; i++) {
		const struct stp_warm_seg *s = &p->segs[p->by_ino[i]];
		uint64_t k = stp_sb_block_of(w->sb, s->stream_off);
		struct stp_block_ref ref;

		/* a block not warmed yet is stored by its worker, which sees the inode known; one
		 * let go meanwhile is not decoded again for this */
		if (push_begin(w, k, &ref)) {
			again |= store_seg(w, s, &ref);
			push_end(w, k);
		}
	}
	if (again)
		retry_later(w, ino, round);
}

/* Watches the inode table: a file the kernel has just learnt of gets its warmed pages.
 * Forgotten ones need nothing: the table tells the workers. */
static void note_known(void *ctx, uint32_t ino, const struct stp_inode *inode)
{
	struct stp_warmer *w = ctx;

	if (!inode || ino >= w->ninodes)
		return;
	if (w->plan.ino_first[ino] == w->plan.ino_first[ino + 1])
		return;
	pthread_mutex_lock(&w->lock);
	enqueue_locked(w, ino);
	pthread_mutex_unlock(&w->lock);
}

int stp_warm_demand_begin(struct stp_warmer *w, uint64_t block)
{
	int pending;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	pending = block < w->nblocks && w->blocks[block].state == B_PENDING;
	/* a read that joins a worker's decode waits for its own block: warming goes on */
	if (block >= w->nblocks || w->blocks[block].state != B_DECODING)
		w->demand++;
	else
		pending = -1;
	pthread_mutex_unlock(&w->lock);
	return pending;
}

void stp_warm_demand_end(struct stp_warmer *w, int begun, int decoded)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (begun >= 0 && --w->demand == 0)
		pthread_cond_broadcast(&w->cond);
	w->ahead += begun == 1 && decoded;
	pthread_mutex_unlock(&w->lock);
}

static void deadline_in(struct timespec *ts, long long ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (ts->tv_nsec + ns) / 1000000000ll;
	ts->tv_nsec = (ts->tv_nsec + ns) % 1000000000ll;
}

/* The earlier of TS and NS (both CLOCK_MONOTONIC). */
static struct timespec earlier(struct timespec ts, uint64_t ns)
{
	struct timespec at = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	return at.tv_sec < ts.tv_sec || (at.tv_sec == ts.tv_sec && at.tv_nsec < ts.tv_nsec) ? at : ts;
}

/* Lock held. Waits while the warmer holds a full budget. While nothing reads (the
 * application has not started), it keeps the first blocks of the region and waits; when
 * reads go on but free nothing in time, the oldest held block goes back to the cache's
 * LRU (still cached, just not held) so that warming moves on. */
static void wait_for_room(struct stp_warmer *w, uint32_t budget, struct stp_block_ref *ref,
			  int *unheld)
{
	uint64_t reads = __atomic_load_n(&w->reads, __ATOMIC_RELAXED);
	struct timespec ts;
	int idle = 0;

	deadline_in(&ts, HOLD_WAIT_NS);
	while (!w->stop && w->held + w->decoding >= budget) {
		uint64_t now;

		if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT)
			continue;
		deadline_in(&ts, HOLD_WAIT_NS);
		now = __atomic_load_n(&w->reads, __ATOMIC_RELAXED);
		if (now == reads) {
			/* idle: the first blocks are the ones worth keeping */
			w->idle_full += !idle;
			idle = 1;
			continue;
		}
		reads = now;
		w->idle_full -= idle;
		idle = 0;
		for (uint64_t k = 0; k < w->next && !*unheld; k++)
			if (!w->blocks[k].pushing) /* a pushed one is not idle */
				*unheld = unhold_locked(w, k, ref, L_ROOM);
		if (*unheld)
			break;
	}
	w->idle_full -= idle;
}

static void warm_one(struct stp_warmer *w, uint64_t k)
{
	struct stp_block_ref ref;
	int rc = stp_cache_get(w->cache, k, &ref);

	pthread_mutex_lock(&w->lock);
	w->decoding--;
	w->warmed++;
	if (rc) {
		w->blocks[k].state = B_RELEASED;
		w->finished++;
		pthread_mutex_unlock(&w->lock);
		stp_log(STP_LOG_ERR, "%s: warming block %llu: %s", stp_image_path(w->img),
			(unsigned long long)k, stp_strerror(rc));
		return;
	}
	w->blocks[k].ref = ref;
	w->blocks[k].state = B_HELD;
	w->held++;
	pthread_mutex_unlock(&w->lock);
	store_block(w, k);
	if (__atomic_load_n(&w->blocks[k].pages_left, __ATOMIC_ACQUIRE) == 0)
		block_consumed(w, k);
	pthread_mutex_lock(&w->lock);
	w->finished++; /* done means pushed, not just decoded: status --wait waits for it */
	pthread_mutex_unlock(&w->lock);
}

/* Lock held: whether a worker has a block left to take. */
static int work_left_locked(const struct stp_warmer *w)
{
	return !w->stop && (w->next < w->nblocks || w->follow == F_PENDING);
}

/* The block after the hot region, last: decoded into the cache as far as the rests of hot
 * files in it reach, its decode then parked (stp_cache_prefix), its pages not pushed (a
 * launch reads few of them). A launch that strays past its recorded ranges into the rest
 * of a hot file then finds those bytes decoded, instead of waiting for the block's stored
 * bytes to be read, checked and decoded on the read's time; a read further on goes on
 * with the parked decode. Decoding no more than that keeps the CPU for a launch that is
 * running meanwhile. One block, only when the plan says a hot file continues there. */
static void warm_follow(struct stp_warmer *w)
{
	int rc = stp_cache_prefix(w->cache, w->nblocks, w->plan.follow_end);

	if (rc)
		stp_log(STP_LOG_ERR, "%s: warming block %llu: %s", stp_image_path(w->img),
			(unsigned long long)w->nblocks, stp_strerror(rc));
	pthread_mutex_lock(&w->lock);
	w->decoding--;
	w->follow = F_DONE;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Lock held, released on return: waits while a read decodes its own block, then takes
 * the block after the hot region if it is still to decode. 1 when it was taken. */
static int take_follow(struct stp_warmer *w)
{
	while (!w->stop && w->demand)
		pthread_cond_wait(&w->cond, &w->lock);
	if (w->stop || w->follow != F_PENDING) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	w->follow = F_DECODING;
	w->decoding++;
	pthread_mutex_unlock(&w->lock);
	return 1;
}

static void *worker_main(void *arg)
{
	struct stp_warmer *w = arg;
	struct stp_cache_stats st;

	stp_cache_stats(w->cache, &st);
	/* one block of the budget stays free for reads outside the hot region */
	st.budget = st.budget > 1 ? st.budget - 1 : 1;
	for (;;) {
		struct stp_block_ref ref;
		int unheld = 0;
		uint64_t k;

		pthread_mutex_lock(&w->lock);
		if (!work_left_locked(w))
			break; /* nothing left to warm: never let a held block go for room */
		/* the block after the hot region is pinned only while it decodes, as a read's
		 * would be: no room to wait for, no held block let go for it */
		if (w->next >= w->nblocks) {
			if (take_follow(w))
				warm_follow(w);
			continue;
		}
		wait_for_room(w, st.budget, &ref, &unheld);
		if (unheld) {
			pthread_mutex_unlock(&w->lock);
			stp_cache_release(w->cache, &ref);
			continue;
		}
		/* a read decoding its own block goes first: no new block meanwhile */
		while (!w->stop && w->demand)
			pthread_cond_wait(&w->cond, &w->lock);
		/* another worker may have taken the room meanwhile: held + decoding stay within
		 * the budget, which warm.h's rule counts on */
		if (w->stop || w->next >= w->nblocks || w->held + w->decoding >= st.budget) {
			pthread_mutex_unlock(&w->lock);
			continue;
		}
		k = w->next++;
		w->blocks[k].state = B_DECODING;
		w->decoding++;
		pthread_mutex_unlock(&w->lock);
		warm_one(w, k);
	}
	w->running--;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Lock held: every block still held goes back to the cache's LRU, where the budget
 * decides how long it stays. */
static void unhold_all_locked(struct stp_warmer *w)
{
	for (uint64_t k = 0; k < w->nblocks; k++) {
		struct stp_block_ref ref;

		if (unhold_locked(w, k, &ref, L_ROOM)) {
			pthread_mutex_unlock(&w->lock);
			stp_cache_release(w->cache, &ref);
			pthread_mutex_lock(&w->lock);
		}
	}
}

/* Stores files as the kernel learns of them. Once warming is over, held blocks wait
 * LINGER_NS after the last such file for their readers, then go back to the cache. */
static void *store_main(void *arg)
{
	struct stp_warmer *w = arg;
	struct timespec linger = { 0 };

	pthread_mutex_lock(&w->lock);
	while (!w->stop && (w->running || w->held || w->qlen || w->nretries)) {
		struct wretry r;
		uint64_t next;
		uint32_t ino;

		if (take_due_retry_locked(w, &r, &next)) {
			pthread_mutex_unlock(&w->lock);
			store_inode(w, r.ino, r.round);
			pthread_mutex_lock(&w->lock);
			w->retrying--;
			continue;
		}
		if (!w->qlen) {
			struct timespec ts;

			if (w->running) {
				deadline_in(&ts, HOLD_WAIT_NS);
			} else {
				if (!linger.tv_sec)
					deadline_in(&linger, LINGER_NS);
				ts = linger;
			}
			if (next != UINT64_MAX)
				ts = earlier(ts, next);
			if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT)
				linger.tv_sec = 0; /* something happened: wait afresh */
			else if (!w->running && ts.tv_sec == linger.tv_sec && ts.tv_nsec == linger.tv_nsec)
				unhold_all_locked(w);
			continue;
		}
		linger.tv_sec = 0;
		ino = w->queue[w->qhead];
		w->qhead = (w->qhead + 1) % QUEUE_LEN;
		w->qlen--;
		pthread_mutex_unlock(&w->lock);
		store_inode(w, ino, 0);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int start_threads(struct stp_warmer *w)
{
	w->threads = calloc(w->nworkers + 1, sizeof(*w->threads));
	if (!w->threads)
		return -ENOMEM;
	w->running = w->nworkers;
	for (unsigned i = 0; i <= w->nworkers; i++) {
		/* no signal: the daemon's handlers run on the thread that serves (ending.h) */
		int rc = -stp_thread_create_blocked(&w->threads[i], 0,
						    i < w->nworkers ? worker_main : store_main, w);

		if (rc) {
			pthread_mutex_lock(&w->lock);
			w->running -= w->nworkers - (i < w->nworkers ? i : w->nworkers);
			w->stop = 1;
			pthread_mutex_unlock(&w->lock);
			return -rc;
		}
		w->nthreads = i + 1;
	}
	return 0;
}

static void warmer_free(struct stp_warmer *w)
{
	stp_warm_plan_free(&w->plan);
	free(w->page_done);
	free(w->blocks);
	free(w->threads);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

uint64_t stp_warm_memory(const struct stp_superblock *sb)
{
	uint64_t hot = sb->hot_size < sb->data_size ? sb->hot_size : sb->data_size;

	if (!hot)
		return 0;
	return stp_warm_plan_memory(sb) + stp_warm_plan_blocks(sb) * sizeof(struct wblock) +
	       (hot + STP_HOT_PAGE - 1) / STP_HOT_PAGE;
}

int stp_warm_start(const struct stp_image *img, struct stp_cache *cache, struct fuse_session *se,
		   struct stp_inodes *inodes, unsigned workers, struct stp_warmer **out)
{
	struct stp_warmer *w;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!workers || !stp_image_sb(img)->hot_size)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->img = img;
	w->cache = cache;
	stp_pagestore_init(&w->store, se, inodes);
	w->inodes = inodes;
	w->nworkers = workers;
	w->retries_left = RETRY_MAX;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = stp_warm_plan_build(img, &w->plan);
	w->sb = w->plan.sb;
	w->hot_size = w->plan.hot_size;
	w->nblocks = w->plan.nblocks;
	w->ninodes = w->plan.ninodes;
	w->follow = w->plan.follow ? F_PENDING : F_NONE;
	if (!rc)
		rc = alloc_state(w);
	if (!rc)
		rc = start_threads(w);
	if (!rc)
		rc = stp_inodes_watch(inodes, note_known, w);
	if (rc) {
		stp_warm_stop(w);
		return rc;
	}
	*out = w;
	return 0;
}

/* Joins every thread by DEADLINE; -ETIMEDOUT when one is still running. */
static int join_threads(struct stp_warmer *w, const struct timespec *deadline)
{
	int rc = 0;

	for (; w->joined < w->nthreads; w->joined++) {
		rc = pthread_timedjoin_np(w->threads[w->joined], NULL, deadline);
		if (rc)
			return -rc;
	}
	return 0;
}

int stp_warm_halt(struct stp_warmer *w)
{
	struct timespec deadline;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STOP_WAIT_S;
	return join_threads(w, &deadline);
}

int stp_warm_stop(struct stp_warmer *w)
{
	if (!w)
		return 0;
	if (stp_warm_halt(w))
		return -ETIMEDOUT; /* left as it is: a thread still uses it */
	for (uint64_t k = 0; k < w->nblocks; k++)
		if (w->blocks && w->blocks[k].state == B_HELD)
			stp_cache_release(w->cache, &w->blocks[k].ref);
	warmer_free(w);
	return 0;
}

void stp_warm_status(struct stp_warmer *w, struct stp_warm_status *out)
{
	memset(out, 0, sizeof(*out));
	if (!w) {
		out->done = 1;
		return;
	}
	pthread_mutex_lock(&w->lock);
	out->hot_blocks = w->nblocks;
	out->warmed = w->warmed;
	out->held = w->held;
	out->workers = w->nworkers;
	out->ahead = w->ahead;
	/* the block after the hot region counts: a launch after warming should not meet it */
	out->done = w->finished == w->nblocks && (w->follow == F_NONE || w->follow == F_DONE) &&
		    !w->retrying;
	out->full = !out->done && w->idle_full > 0;
	pthread_mutex_unlock(&w->lock);
	stp_pagestore_stats(&w->store, &out->store);
}
