/* SPDX-License-Identifier: MIT */
/* The block cache: one mutex guards the slot table, the LRU list, the buffer count and
 * the counters; decoding happens outside it. Buffers are mapped and unmapped directly,
 * never taken from malloc: a freed block goes back to the system at once, instead of
 * staying in the arena of the thread that freed it, so resident memory follows the
 * count. */
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "image.h"
#include "util.h"

enum entry_state { ENTRY_LOADING, ENTRY_READY, ENTRY_FAILED };

struct entry {
	uint64_t block;
	enum entry_state state; /* protected by cache->lock */
	int error;              /* ENTRY_FAILED: why */
	uint32_t refs;          /* holders and waiters; protected by cache->lock */
	int drop;               /* free at the last release instead of caching */
	uint8_t *data;          /* one of the counted buffers (NULL until decode maps it) */
	size_t size;            /* decoded bytes */
	size_t alloc;           /* bytes mapped at data: a reused buffer may be larger */
	struct entry *prev, *next; /* LRU links, only while refs == 0 and READY */
};

struct stp_cache {
	const struct stp_image *img;
	uint32_t budget;
	uint32_t max_buffers;     /* budget + extra */
	size_t full;              /* bytes of a full block */
	pthread_mutex_t lock;
	pthread_cond_t done;      /* a decode finished */
	pthread_cond_t room;      /* a buffer was freed or a block became idle */
	struct entry **slots;     /* by block number; protected by lock */
	struct entry *lru_head, *lru_tail; /* unpinned ready entries, most recent first */
	uint32_t resident;        /* ready entries, pinned or not */
	uint32_t pinned;
	uint32_t idle;            /* entries on the LRU list */
	uint32_t buffers;         /* buffers that exist or are promised to a decode, the
				   * spare included; never above max_buffers; lock */
	uint8_t *spare;           /* an evicted full block's buffer, reused by the next decode
				   * (saves faulting in a fresh block); protected by lock */
	struct stp_cache_stats stats;
};

int stp_cache_new(const struct stp_image *img, uint32_t budget, uint32_t extra,
		  struct stp_cache **out)
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
	c->max_buffers = extra > UINT32_MAX - budget ? UINT32_MAX : budget + extra;
	c->full = stp_image_block_buffer_size(img); /* every buffer: decodes are in place */
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done, NULL);
	pthread_cond_init(&c->room, NULL);
	*out = c;
	return 0;
}

static uint8_t *buf_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void buf_unmap(uint8_t *p, size_t len)
{
	if (p)
		munmap(p, len);
}

static void entry_free(struct entry *e)
{
	buf_unmap(e->data, e->alloc);
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
	buf_unmap(c->spare, c->full);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->room);
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
	c->idle--;
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
	c->idle++;
}

/* Removes a ready, unpinned entry from the cache; its buffer is still counted. */
static void evict(struct stp_cache *c, struct entry *e)
{
	lru_unlink(c, e);
	c->slots[e->block] = NULL;
	c->resident--;
}

/* Lock held: how many buffers a get could have now. */
static uint32_t available(const struct stp_cache *c)
{
	return (c->spare != NULL) + (c->max_buffers - c->buffers) + c->idle;
}

/* Lock held, available() > 0. Gives a fresh entry a buffer within the bound: the spare,
 * a new one (*DATA stays NULL: decode maps it), or the least recently used idle block's,
 * whose entry is chained on *VICTIMS for the caller to free. */
static void take_buffer(struct stp_cache *c, uint8_t **data, size_t *alloc,
			struct entry **victims)
{
	struct entry *v = c->lru_tail;

	if (c->spare) {
		*data = c->spare;
		*alloc = c->full;
		c->spare = NULL;
	} else if (c->buffers < c->max_buffers) {
		if (++c->buffers > c->stats.peak_buffers)
			c->stats.peak_buffers = c->buffers;
	} else {
		evict(c, v);
		*data = v->data;
		*alloc = v->alloc;
		v->data = NULL;
		v->next = *victims;
		*victims = v;
	}
}

/* Lock held. A buffer is no longer used: it becomes the spare (a full one, when there is
 * none), or it is returned for the caller to give to buf_drop, counted until then (else
 * a buffer being unmapped and one being mapped meanwhile would both be resident). */
static uint8_t *put_buffer(struct stp_cache *c, uint8_t *data, size_t alloc)
{
	if (data && !c->spare && alloc == c->full) {
		c->spare = data;
		data = NULL;
	} else if (!data) {
		c->buffers--; /* counted, never mapped */
	}
	pthread_cond_broadcast(&c->room);
	return data;
}

/* Outside the lock: unmaps a buffer that put_buffer returned, then stops counting it. */
static void buf_drop(struct stp_cache *c, uint8_t *data, size_t alloc)
{
	if (!data)
		return;
	buf_unmap(data, alloc);
	pthread_mutex_lock(&c->lock);
	c->buffers--;
	pthread_cond_broadcast(&c->room);
	pthread_mutex_unlock(&c->lock);
}

/* Lock held. Puts E's buffer back and chains E (taken out of the cache) before CHAIN. */
static struct entry *retire(struct stp_cache *c, struct entry *e, struct entry *chain)
{
	e->data = put_buffer(c, e->data, e->alloc);
	e->next = chain;
	return e;
}

/* Evicts least recently used entries over budget; returns them chained by ->next. */
static struct entry *trim(struct stp_cache *c)
{
	struct entry *freed = NULL;

	while (c->resident > c->budget && c->lru_tail) {
		struct entry *e = c->lru_tail;

		evict(c, e);
		freed = retire(c, e, freed);
	}
	return freed;
}

/* Outside the lock: frees entries taken out of the cache, dropping their buffers. */
static void free_chain(struct stp_cache *c, struct entry *e)
{
	while (e) {
		struct entry *next = e->next;

		buf_drop(c, e->data, e->alloc);
		free(e);
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

/* Outside the lock: makes *DATA a buffer of at least LEN bytes (the count holds it). */
static int buf_fit(uint8_t **data, size_t *alloc, size_t len)
{
	if (*data && *alloc >= len)
		return 0;
	buf_unmap(*data, *alloc);
	*alloc = len ? len : 1;
	*data = buf_map(*alloc);
	if (!*data)
		*alloc = 0;
	return *data ? 0 : -ENOMEM;
}

/* Outside the lock: fills E's buffer; the stored bytes are decoded in place in it. */
static int decode(struct stp_cache *c, struct entry *e)
{
	int rc;

	e->size = stp_image_block_decoded_size(c->img, e->block);
	rc = buf_fit(&e->data, &e->alloc, c->full);
	return rc ? rc : stp_image_decode_block(c->img, e->block, e->data);
}

/* Called with the lock held by the thread that decoded E. A failed entry leaves the
 * cache and gives back its buffer: the caller frees what is returned, outside the lock. */
static void finish_load(struct stp_cache *c, struct entry *e, int rc, uint64_t ns)
{
	c->stats.decode_ns += ns;
	if (rc) {
		e->state = ENTRY_FAILED;
		e->error = rc;
		c->slots[e->block] = NULL;
		c->stats.failures++;
		e->data = put_buffer(c, e->data, e->alloc);
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
	ref->fresh = 0;
	ref->entry = e;
}

/* Drops a waiter's hold on a failed entry and unlocks; the last one frees it. */
static int leave_failed(struct stp_cache *c, struct entry *e)
{
	int rc = e->error;
	int last = --e->refs == 0;

	pthread_mutex_unlock(&c->lock);
	if (last)
		entry_free(e);
	return rc;
}

/* Lock held, released on return: pins E, which is in the cache, once it is decoded. */
static int join(struct stp_cache *c, struct entry *e, struct stp_block_ref *ref)
{
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

/* Lock held, released on return: decodes BLOCK into fresh entry E, which holds its
 * buffer. */
static int load(struct stp_cache *c, struct entry *e, uint64_t block, struct stp_block_ref *ref)
{
	struct entry *freed = NULL;
	uint8_t *gone = NULL;
	size_t gone_len = 0;
	uint64_t t0;
	int rc;

	e->block = block;
	e->state = ENTRY_LOADING;
	e->refs = 1;
	c->slots[block] = e;
	c->stats.misses++;
	pthread_mutex_unlock(&c->lock);

	t0 = stp_now_ns();
	rc = decode(c, e);

	pthread_mutex_lock(&c->lock);
	finish_load(c, e, rc, stp_now_ns() - t0);
	if (rc) {
		gone = e->data; /* uncounted now: unmapped here, not by the last waiter */
		gone_len = e->alloc;
		e->data = NULL;
	} else {
		freed = trim(c);
	}
	pthread_mutex_unlock(&c->lock);
	buf_drop(c, gone, gone_len);
	free_chain(c, freed);
	if (rc) {
		pthread_mutex_lock(&c->lock);
		return leave_failed(c, e);
	}
	fill_ref(e, ref);
	ref->fresh = 1;
	return 0;
}

int stp_cache_get(struct stp_cache *c, uint64_t block, struct stp_block_ref *ref)
{
	struct entry *e, *fresh = NULL, *victims = NULL;
	int waited = 0, rc = 0;

	if (block >= stp_image_sb(c->img)->block_count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		e = c->slots[block];
		if (e) {
			rc = join(c, e, ref);
			free(fresh);
			return rc;
		}
		if (!fresh && !(fresh = calloc(1, sizeof(*fresh)))) {
			pthread_mutex_unlock(&c->lock);
			return -ENOMEM;
		}
		if (available(c))
			break;
		/* every buffer is pinned or loading: holders release them without waiting */
		c->stats.waits += !waited;
		waited = 1;
		pthread_cond_wait(&c->room, &c->lock);
	}
	take_buffer(c, &fresh->data, &fresh->alloc, &victims);
	rc = load(c, fresh, block, ref);
	free_chain(c, victims);
	return rc;
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
			freed = retire(c, e, NULL);
		} else {
			lru_push(c, e);
			pthread_cond_broadcast(&c->room); /* an idle block can be evicted now */
			freed = trim(c);
		}
	}
	pthread_mutex_unlock(&c->lock);
	free_chain(c, freed);
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
			freed = retire(c, e, NULL);
		} else {
			e->drop = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	free_chain(c, freed);
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
	out->buffers = c->buffers;
	out->max_buffers = c->max_buffers;
	pthread_mutex_unlock(&c->lock);
}
