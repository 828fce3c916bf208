/* SPDX-License-Identifier: MIT */
/* The block cache: one mutex guards the slot table, the LRU list and the counters;
 * decoding happens outside it. */
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "image.h"
#include "util.h"

enum entry_state { ENTRY_LOADING, ENTRY_READY, ENTRY_FAILED };

struct entry {
	uint64_t block;
	enum entry_state state; /* protected by cache->lock */
	int error;              /* ENTRY_FAILED: why */
	uint32_t refs;          /* holders and waiters; protected by cache->lock */
	int drop;               /* free at the last release instead of caching */
	uint8_t *data;
	size_t size;
	struct entry *prev, *next; /* LRU links, only while refs == 0 and READY */
};

struct stp_cache {
	const struct stp_image *img;
	uint32_t budget;
	pthread_mutex_t lock;
	pthread_cond_t done;      /* a decode finished */
	struct entry **slots;     /* by block number; protected by lock */
	struct entry *lru_head, *lru_tail; /* unpinned ready entries, most recent first */
	uint32_t resident;        /* ready entries, pinned or not */
	uint32_t pinned;
	uint8_t *spare;           /* an evicted block's buffer, reused by the next decode
				   * (saves faulting in a fresh block); protected by lock */
	struct stp_cache_stats stats;
};

int stp_cache_new(const struct stp_image *img, uint32_t budget, struct stp_cache **out)
{
	struct stp_cache *c;
	uint64_t n = stp_image_sb(img)->block_count;

	if (budget < 1)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->slots = calloc(n ? n : 1, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return -ENOMEM;
	}
	c->img = img;
	c->budget = budget;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done, NULL);
	*out = c;
	return 0;
}

static void entry_free(struct entry *e)
{
	free(e->data);
	free(e);
}

void stp_cache_free(struct stp_cache *c)
{
	uint64_t n;

	if (!c)
		return;
	n = stp_image_sb(c->img)->block_count;
	for (uint64_t i = 0; i < n; i++)
		if (c->slots[i])
			entry_free(c->slots[i]);
	free(c->slots);
	free(c->spare);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->done);
	free(c);
}

static void lru_unlink(struct stp_cache *c, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->lru_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->lru_tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct stp_cache *c, struct entry *e)
{
	e->prev = NULL;
	e->next = c->lru_head;
	if (c->lru_head)
		c->lru_head->prev = e;
	else
		c->lru_tail = e;
	c->lru_head = e;
}

/* Removes a ready, unpinned entry from the cache. Caller frees it outside the lock. */
static void evict(struct stp_cache *c, struct entry *e)
{
	lru_unlink(c, e);
	c->slots[e->block] = NULL;
	c->resident--;
}

/* Evicts least recently used entries over budget; returns them chained by ->next. The
 * first full-size buffer becomes the spare when there is none. */
static struct entry *trim(struct stp_cache *c)
{
	struct entry *freed = NULL;
	size_t full = (size_t)1 << stp_image_sb(c->img)->block_log;

	while (c->resident > c->budget && c->lru_tail) {
		struct entry *e = c->lru_tail;

		evict(c, e);
		if (!c->spare && e->size == full) {
			c->spare = e->data;
			e->data = NULL;
		}
		e->next = freed;
		freed = e;
	}
	return freed;
}

static void free_chain(struct entry *e)
{
	while (e) {
		struct entry *next = e->next;

		entry_free(e);
		e = next;
	}
}

static void pin(struct stp_cache *c, struct entry *e)
{
	if (e->refs++ == 0 && e->state == ENTRY_READY) {
		lru_unlink(c, e);
		c->pinned++;
	}
}

static int decode(struct stp_cache *c, struct entry *e)
{
	size_t full = (size_t)1 << stp_image_sb(c->img)->block_log;
	uint64_t t0 = stp_now_ns();
	int rc;

	e->size = stp_image_block_decoded_size(c->img, e->block);
	pthread_mutex_lock(&c->lock);
	if (e->size == full) {
		e->data = c->spare;
		c->spare = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (!e->data)
		e->data = malloc(e->size ? e->size : 1);
	if (!e->data)
		return -ENOMEM;
	rc = stp_image_decode_block(c->img, e->block, e->data);
	pthread_mutex_lock(&c->lock);
	c->stats.decode_ns += stp_now_ns() - t0;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Called with the lock held by the thread that decoded E. */
static void finish_load(struct stp_cache *c, struct entry *e, int rc)
{
	if (rc) {
		e->state = ENTRY_FAILED;
		e->error = rc;
		c->slots[e->block] = NULL;
		c->stats.failures++;
	} else {
		e->state = ENTRY_READY;
		c->resident++;
		c->pinned++;
		c->stats.decoded++;
		c->stats.decoded_bytes += e->size;
	}
	pthread_cond_broadcast(&c->done);
}

static void fill_ref(struct entry *e, struct stp_block_ref *ref)
{
	ref->data = e->data;
	ref->size = e->size;
	ref->block = e->block;
	ref->entry = e;
}

/* Drops a waiter's hold on a failed entry; the last one frees it. */
static int leave_failed(struct stp_cache *c, struct entry *e)
{
	int rc = e->error;

	if (--e->refs == 0) {
		pthread_mutex_unlock(&c->lock);
		entry_free(e);
		return rc;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int stp_cache_get(struct stp_cache *c, uint64_t block, struct stp_block_ref *ref)
{
	struct entry *e, *freed;
	int rc;

	if (block >= stp_image_sb(c->img)->block_count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	e = c->slots[block];
	if (e) {
		pin(c, e);
		while (e->state == ENTRY_LOADING)
			pthread_cond_wait(&c->done, &c->lock);
		if (e->state == ENTRY_FAILED)
			return leave_failed(c, e);
		c->stats.hits++;
		e->drop = 0;
		pthread_mutex_unlock(&c->lock);
		fill_ref(e, ref);
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	e->block = block;
	e->state = ENTRY_LOADING;
	e->refs = 1;
	c->slots[block] = e;
	c->stats.misses++;
	pthread_mutex_unlock(&c->lock);

	rc = decode(c, e);

	pthread_mutex_lock(&c->lock);
	finish_load(c, e, rc);
	if (rc)
		return leave_failed(c, e);
	freed = trim(c);
	pthread_mutex_unlock(&c->lock);
	free_chain(freed);
	fill_ref(e, ref);
	return 0;
}

int stp_cache_get_resident(struct stp_cache *c, uint64_t block, struct stp_block_ref *ref)
{
	struct entry *e;

	if (block >= stp_image_sb(c->img)->block_count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	e = c->slots[block];
	if (!e || e->state != ENTRY_READY) {
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	pin(c, e);
	c->stats.hits++;
	pthread_mutex_unlock(&c->lock);
	fill_ref(e, ref);
	return 0;
}

void stp_cache_release(struct stp_cache *c, struct stp_block_ref *ref)
{
	struct entry *e = ref->entry, *freed = NULL;

	if (!e)
		return;
	ref->entry = NULL;
	pthread_mutex_lock(&c->lock);
	if (--e->refs == 0) {
		c->pinned--;
		if (e->drop) {
			c->slots[e->block] = NULL;
			c->resident--;
			e->next = NULL;
			freed = e;
		} else {
			lru_push(c, e);
			freed = trim(c);
		}
	}
	pthread_mutex_unlock(&c->lock);
	free_chain(freed);
}

void stp_cache_drop(struct stp_cache *c, uint64_t block)
{
	struct entry *e, *freed = NULL;

	if (block >= stp_image_sb(c->img)->block_count)
		return;
	pthread_mutex_lock(&c->lock);
	e = c->slots[block];
	if (e && e->state == ENTRY_READY) {
		if (e->refs == 0) {
			evict(c, e);
			freed = e;
		} else {
			e->drop = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (freed)
		entry_free(freed);
}

int stp_cache_contains(struct stp_cache *c, uint64_t block)
{
	int yes;

	if (block >= stp_image_sb(c->img)->block_count)
		return 0;
	pthread_mutex_lock(&c->lock);
	yes = c->slots[block] && c->slots[block]->state == ENTRY_READY;
	pthread_mutex_unlock(&c->lock);
	return yes;
}

void stp_cache_stats(struct stp_cache *c, struct stp_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->stats;
	out->resident = c->resident;
	out->pinned = c->pinned;
	out->budget = c->budget;
	pthread_mutex_unlock(&c->lock);
}
