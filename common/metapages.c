/* SPDX-License-Identifier: MIT */
/* The metadata page cache: a table of resident pages, and a victim chosen at random.
 *
 * Random, not least recently used: the walks that overflow the cache come back over the
 * same pages in the same order (a runtime probing each folder of its path for every
 * import, a walker listing a tree again), and there LRU always drops the page that is
 * needed next and misses every time, while a random victim leaves most of the pages
 * resident. The 1 M-file tree's import storm cycles 334 pages through 256 slots: LRU
 * decoded 6,396 pages, a random victim 2,624 (the best possible, replaying its trace:
 * 1,310). Where the pages fit, as in launches, nothing is evicted either way. */
#include "metapages.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

struct page {
	size_t at;                /* where in resident[]; protected by lock */
	uint64_t index;
	size_t len;
	uint8_t data[];
};

struct stp_metapages {
	uint64_t size, npages;
	stp_metapages_load_fn load;
	void *ctx;
	pthread_mutex_t lock;
	struct page **slots;      /* npages entries, NULL when not resident; lock */
	struct page **resident;   /* the resident pages, nres of them, in no order; lock */
	size_t nres;              /* lock */
	uint64_t rng;             /* lock */
	size_t budget, bytes, peak; /* lock */
	uint64_t loads, hits;     /* lock */
	uint64_t loads_max, refused; /* lock */
};

int stp_metapages_create(uint64_t size, size_t budget, stp_metapages_load_fn load, void *ctx,
			 struct stp_metapages **out)
{
	struct stp_metapages *mp = calloc(1, sizeof(*mp));
	size_t n;

	if (!mp)
		return -ENOMEM;
	mp->size = size;
	mp->npages = (size + STP_META_PAGE_SIZE - 1) / STP_META_PAGE_SIZE;
	n = mp->npages ? (size_t)mp->npages : 1;
	mp->slots = calloc(n, sizeof(*mp->slots));
	mp->resident = calloc(n, sizeof(*mp->resident));
	if (!mp->slots || !mp->resident) {
		free(mp->slots);
		free(mp->resident);
		free(mp);
		return -ENOMEM;
	}
	mp->load = load;
	mp->ctx = ctx;
	mp->budget = budget;
	mp->rng = 0x9e3779b97f4a7c15ull; /* fixed: a run's choices repeat, for tests and figures */
	pthread_mutex_init(&mp->lock, NULL);
	*out = mp;
	return 0;
}

void stp_metapages_destroy(struct stp_metapages *mp)
{
	if (!mp)
		return;
	for (size_t i = 0; i < mp->nres; i++)
		free(mp->resident[i]);
	pthread_mutex_destroy(&mp->lock);
	free(mp->slots);
	free(mp->resident);
	free(mp);
}

/* xorshift64*: a victim at random, cheaply. Under lock. */
static size_t pick(struct stp_metapages *mp, size_t n)
{
	mp->rng ^= mp->rng >> 12;
	mp->rng ^= mp->rng << 25;
	mp->rng ^= mp->rng >> 27;
	return (size_t)((mp->rng * 0x2545f4914f6cdd1dull) >> 32) % n;
}

static void add_resident(struct stp_metapages *mp, struct page *p)
{
	p->at = mp->nres;
	mp->resident[mp->nres++] = p;
	mp->slots[p->index] = p;
	mp->bytes += p->len;
}

static void drop_resident(struct stp_metapages *mp, struct page *p)
{
	struct page *last = mp->resident[--mp->nres];

	mp->resident[p->at] = last;
	last->at = p->at;
	mp->slots[p->index] = NULL;
	mp->bytes -= p->len;
	free(p);
}

/* Drops pages at random until the budget holds, never KEEP. Under lock. */
static void evict(struct stp_metapages *mp, const struct page *keep)
{
	while (mp->bytes > mp->budget && mp->nres > 1) {
		struct page *p = mp->resident[pick(mp, mp->nres)];

		if (p == keep) /* the last slot then, which is another page */
			p = mp->resident[keep->at == mp->nres - 1 ? 0 : mp->nres - 1];
		drop_resident(mp, p);
	}
}

/* Makes page INDEX resident, loaded without the lock; returns with the lock held. */
static int fetch(struct stp_metapages *mp, uint64_t index, struct page **out)
{
	uint64_t start = index * STP_META_PAGE_SIZE;
	size_t len = mp->size - start < STP_META_PAGE_SIZE ? mp->size - start : STP_META_PAGE_SIZE;
	struct page *p = malloc(sizeof(*p) + len);
	int rc;

	if (!p)
		return -ENOMEM;
	rc = mp->load(mp->ctx, index, p->data, len);
	if (rc) {
		free(p);
		return rc;
	}
	p->index = index;
	p->len = len;
	pthread_mutex_lock(&mp->lock);
	mp->loads++;
	if (mp->slots[index]) { /* another thread loaded it meanwhile */
		free(p);
		*out = mp->slots[index];
		return 0;
	}
	add_resident(mp, p);
	evict(mp, p);
	if (mp->bytes > mp->peak)
		mp->peak = mp->bytes;
	*out = p;
	return 0;
}

/* Copies LEN bytes at IN of page INDEX into DST. */
static int copy_page(struct stp_metapages *mp, uint64_t index, size_t in, size_t len, void *dst)
{
	struct page *p;
	int rc;

	pthread_mutex_lock(&mp->lock);
	p = mp->slots[index];
	if (p) {
		mp->hits++;
	} else if (mp->loads_max && mp->loads >= mp->loads_max) {
		mp->refused++;
		pthread_mutex_unlock(&mp->lock);
		return -ENOBUFS;
	} else {
		pthread_mutex_unlock(&mp->lock);
		rc = fetch(mp, index, &p);
		if (rc)
			return rc;
	}
	memcpy(dst, p->data + in, len);
	pthread_mutex_unlock(&mp->lock);
	return 0;
}

int stp_metapages_read(struct stp_metapages *mp, uint64_t off, size_t len, void *dst)
{
	uint8_t *d = dst;

	if (off > mp->size || len > mp->size - off)
		return -EINVAL;
	while (len) {
		uint64_t index = off / STP_META_PAGE_SIZE;
		size_t in = (size_t)(off % STP_META_PAGE_SIZE);
		size_t n = STP_META_PAGE_SIZE - in < len ? STP_META_PAGE_SIZE - in : len;
		int rc = copy_page(mp, index, in, n, d);

		if (rc)
			return rc;
		d += n;
		off += n;
		len -= n;
	}
	return 0;
}

void stp_metapages_set_budget(struct stp_metapages *mp, size_t budget)
{
	pthread_mutex_lock(&mp->lock);
	mp->budget = budget;
	pthread_mutex_unlock(&mp->lock);
}

void stp_metapages_limit_loads(struct stp_metapages *mp, uint64_t max)
{
	pthread_mutex_lock(&mp->lock);
	mp->loads_max = max;
	pthread_mutex_unlock(&mp->lock);
}

void stp_metapages_stats(struct stp_metapages *mp, struct stp_metapages_stats *st)
{
	pthread_mutex_lock(&mp->lock);
	st->loads = mp->loads;
	st->hits = mp->hits;
	st->refused = mp->refused;
	st->resident = mp->bytes;
	st->peak = mp->peak;
	pthread_mutex_unlock(&mp->lock);
}
