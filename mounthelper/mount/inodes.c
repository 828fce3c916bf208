/* SPDX-License-Identifier: MIT */
/* The kernel's lookup counts, and who is told when they reach or leave 0. */
#include "inodes.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "format.h"

struct watcher {
	stp_inodes_fn fn;
	void *ctx;
};

struct stp_inodes {
	uint32_t ninodes;
	pthread_mutex_t lock;      /* every change of a count, and the watchers' calls */
	uint32_t *lookups;         /* by image inode; read atomically without the lock */
	uint64_t known;            /* lock */
	struct watcher watchers[STP_INODES_WATCHERS];
	unsigned nwatchers;        /* set before the loop */
};

uint64_t stp_inodes_memory(const struct stp_superblock *sb)
{
	return (uint64_t)sb->inode_count * sizeof(uint32_t) + sizeof(struct stp_inodes);
}

int stp_inodes_new(uint32_t ninodes, struct stp_inodes **out)
{
	struct stp_inodes *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t || !(t->lookups = calloc(ninodes ? ninodes : 1, sizeof(*t->lookups)))) {
		free(t);
		return -ENOMEM;
	}
	t->ninodes = ninodes;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void stp_inodes_free(struct stp_inodes *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->lookups);
	free(t);
}

int stp_inodes_watch(struct stp_inodes *t, stp_inodes_fn fn, void *ctx)
{
	if (t->nwatchers == STP_INODES_WATCHERS)
		return -ENOSPC;
	t->watchers[t->nwatchers++] = (struct watcher){ fn, ctx };
	return 0;
}

/* Lock held. */
static void tell(struct stp_inodes *t, uint32_t ino, const struct stp_inode *inode)
{
	for (unsigned i = 0; i < t->nwatchers; i++)
		t->watchers[i].fn(t->watchers[i].ctx, ino, inode);
}

void stp_inodes_lookup(struct stp_inodes *t, uint32_t ino, const struct stp_inode *inode)
{
	uint32_t n;

	if (!t || ino >= t->ninodes)
		return;
	pthread_mutex_lock(&t->lock);
	n = t->lookups[ino];
	if (n != UINT32_MAX) /* saturated: never forgotten */
		__atomic_store_n(&t->lookups[ino], n + 1, __ATOMIC_RELEASE);
	if (n == 0) {
		t->known++;
		tell(t, ino, inode);
	}
	pthread_mutex_unlock(&t->lock);
}

void stp_inodes_forget(struct stp_inodes *t, uint32_t ino, uint64_t nlookup)
{
	uint32_t n;

	if (!t || ino >= t->ninodes)
		return;
	pthread_mutex_lock(&t->lock);
	n = t->lookups[ino];
	if (n && n != UINT32_MAX) {
		n = nlookup >= n ? 0 : n - (uint32_t)nlookup;
		__atomic_store_n(&t->lookups[ino], n, __ATOMIC_RELEASE);
		if (!n) {
			t->known--;
			tell(t, ino, NULL);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

bool stp_inodes_known(const struct stp_inodes *t, uint32_t ino)
{
	return t && ino < t->ninodes && __atomic_load_n(&t->lookups[ino], __ATOMIC_ACQUIRE);
}

uint64_t stp_inodes_count(struct stp_inodes *t)
{
	uint64_t n;

	if (!t)
		return 0;
	pthread_mutex_lock(&t->lock);
	n = t->known;
	pthread_mutex_unlock(&t->lock);
	return n;
}
