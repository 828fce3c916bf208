/* SPDX-License-Identifier: MIT */
/* One helper thread per calling thread, handed one hash at a time. */
#include "hasher.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* SHA-256 needs little stack; a small one keeps many helpers cheap under RLIMIT_DATA. */
#define HELPER_STACK (256u << 10)

enum job_state { JOB_IDLE, JOB_QUEUED, JOB_DONE, JOB_QUIT };

struct hasher {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* state changed, either way */
	pthread_t thread;
	bool threaded;       /* the helper runs; else hashes are made inline */
	enum job_state state;
	const void *p;
	size_t len;
	size_t ready;        /* the bytes of P final so far: LEN, but for a followed job */
	uint8_t digest[STP_SIG_HASH_SIZE];
};

static pthread_key_t hasher_key;
static pthread_once_t hasher_once = PTHREAD_ONCE_INIT;

/* The queued job, lock held on entry and on return: its bytes hashed as they become
 * final (all at once when they already are). */
static void hash_job(struct hasher *h)
{
	struct stp_sha256 *s;
	size_t done = 0, to;

	if (h->ready == h->len) {
		pthread_mutex_unlock(&h->lock);
		stp_sign_hash(h->p, h->len, h->digest);
		pthread_mutex_lock(&h->lock);
		return;
	}
	pthread_mutex_unlock(&h->lock);
	s = stp_sha256_begin();
	pthread_mutex_lock(&h->lock);
	while (done < h->len && h->state != JOB_QUIT) {
		while (h->ready == done && h->state != JOB_QUIT)
			pthread_cond_wait(&h->cond, &h->lock);
		to = h->ready;
		pthread_mutex_unlock(&h->lock);
		stp_sha256_update(s, (const uint8_t *)h->p + done, to - done);
		pthread_mutex_lock(&h->lock);
		done = to;
	}
	stp_sha256_end(s, h->digest);
}

static void *helper_main(void *arg)
{
	struct hasher *h = arg;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (h->state != JOB_QUEUED && h->state != JOB_QUIT)
			pthread_cond_wait(&h->cond, &h->lock);
		if (h->state == JOB_QUIT)
			break;
		hash_job(h);
		if (h->state == JOB_QUIT)
			break;
		h->state = JOB_DONE;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* The calling thread exits: its helper goes with it. */
static void hasher_free(void *arg)
{
	struct hasher *h = arg;

	if (h->threaded) {
		pthread_mutex_lock(&h->lock);
		h->state = JOB_QUIT;
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->thread, NULL);
	}
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static void hasher_key_create(void)
{
	pthread_key_create(&hasher_key, hasher_free);
}

/* The helper takes no signals: the caller's handlers expect them on threads they know. */
static bool start_helper(struct hasher *h)
{
	return stp_thread_create_blocked(&h->thread, HELPER_STACK, helper_main, h) == 0;
}

/* This thread's hasher, made at its first use; NULL when out of memory. */
static struct hasher *my_hasher(void)
{
	struct hasher *h;

	pthread_once(&hasher_once, hasher_key_create);
	h = pthread_getspecific(hasher_key);
	if (h)
		return h;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	h->threaded = start_helper(h);
	if (pthread_setspecific(hasher_key, h)) {
		hasher_free(h);
		return NULL;
	}
	return h;
}

/* With no helper, the hash is made inline, at once or (a followed job) at the wait,
 * into this thread's fallback. */
static __thread uint8_t inline_digest[STP_SIG_HASH_SIZE];
static __thread const void *inline_p;
static __thread size_t inline_len;
static __thread bool inline_follow; /* a followed job, hashed at the wait */

static void queue(const void *p, size_t len, size_t ready)
{
	struct hasher *h = my_hasher();

	if (!h || !h->threaded) {
		inline_p = p;
		inline_len = len;
		inline_follow = ready != len;
		if (!inline_follow)
			stp_sign_hash(p, len, inline_digest);
		return;
	}
	pthread_mutex_lock(&h->lock);
	h->p = p;
	h->len = len;
	h->ready = ready;
	h->state = JOB_QUEUED;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

void stp_hasher_start(const void *p, size_t len)
{
	queue(p, len, len);
}

void stp_hasher_follow(const void *p, size_t len)
{
	queue(p, len, 0);
}

void stp_hasher_ready(size_t n)
{
	struct hasher *h = pthread_getspecific(hasher_key);

	if (!h || !h->threaded)
		return; /* hashed whole at the wait */
	pthread_mutex_lock(&h->lock);
	if (n > h->ready && n <= h->len) {
		h->ready = n;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
}

void stp_hasher_wait(uint8_t out[STP_SIG_HASH_SIZE])
{
	struct hasher *h = pthread_getspecific(hasher_key);

	if (!h || !h->threaded) {
		if (inline_follow) /* its bytes are all final now */
			stp_sign_hash(inline_p, inline_len, inline_digest);
		inline_follow = false;
		memcpy(out, inline_digest, STP_SIG_HASH_SIZE);
		return;
	}
	pthread_mutex_lock(&h->lock);
	while (h->state == JOB_QUEUED)
		pthread_cond_wait(&h->cond, &h->lock);
	memcpy(out, h->digest, STP_SIG_HASH_SIZE);
	h->state = JOB_IDLE;
	pthread_mutex_unlock(&h->lock);
}
