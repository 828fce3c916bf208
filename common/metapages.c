/* SPDX-License-Identifier: MIT */
/* The metadata page cache: a table of resident pages and a least-recently-used list. */
#include "metapages.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

struct page {
	struct page *prev, *next; /* the list, most recent first; protected by lock */
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
	struct page *head, *tail; /* lock */
	size_t budget, resident, peak; /* lock */
	uint64_t loads, hits;     /* lock */
};

int stp_metapages_create(uint64_t size, size_t budget, stp_metapages_load_fn load, void *ctx,
			 struct stp_metapages **out)
{
	struct stp_metapages *mp = calloc(1, sizeof(*mp));

	if (!mp)
		return -ENOMEM;
	mp->size = size;
	mp->npages = (size + STP_META_PAGE_SIZE - 1) / STP_META_PAGE_SIZE;
	mp->slots = calloc(mp->npages ? mp->npages : 1, sizeof(*mp->slots));
	if (!mp->slots) {
		free(mp);
		return -ENOMEM;
	}
	mp->load = load;
	mp->ctx = ctx;
	mp->budget = budget;
	pthread_mutex_init(&mp->lock, NULL);
	*out = mp;
	return 0;
}

void stp_metapages_destroy(struct stp_metapages *mp)
{
	if (!mp)
		return;
	for (struct page *p = mp->head, *next; p; p = next) {
		next = p->next;
		free(p);
	}
	pthread_mutex_destroy(&mp->lock);
	free(mp->slots);
	free(mp);
}

static void unlink_page(struct stp_metapages *mp, struct page *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		mp->head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		mp->tail = p->prev;
}

static void push_front(struct stp_metapages *mp, struct page *p)
{
	p->prev = NULL;
	p->next = mp->head;
	if (mp->head)
		mp->head->prev = p;
	else
		mp->tail = p;
	mp->head = p;
}

/* Drops least recently used pages until the budget holds, never KEEP. Under lock. */
static void evict(struct stp_metapages *mp, const struct page *keep)
{
	while (mp->resident > mp->budget && mp->tail && mp->tail != keep) {
		struct page *p = mp->tail;

		unlink_page(mp, p);
		mp->slots[p->index] = NULL;
		mp->resident -= p->len;
		free(p);
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
	mp->slots[index] = p;
	push_front(mp, p);
	mp->resident += len;
	evict(mp, p);
	if (mp->resident > mp->peak)
		mp->peak = mp->resident;
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
		if (p != mp->head) {
			unlink_page(mp, p);
			push_front(mp, p);
		}
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

void stp_metapages_stats(struct stp_metapages *mp, struct stp_metapages_stats *st)
{
	pthread_mutex_lock(&mp->lock);
	st->loads = mp->loads;
	st->hits = mp->hits;
	st->resident = mp->resident;
	st->peak = mp->peak;
	pthread_mutex_unlock(&mp->lock);
}
