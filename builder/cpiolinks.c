/* SPDX-License-Identifier: MIT */
/* The length of libarchive's cpio link list, by (device, inode). */
#include "cpiolinks.h"

#include <errno.h>
#include <stdlib.h>

struct cpio_link {
	uint64_t dev, ino;
	uint32_t left;  /* links still to come */
	uint8_t used;
};

static uint64_t home(const struct cpio_links *l, uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;

	return (h ^ (h >> 32)) & (l->nslots - 1);
}

/* The slot of (DEV, INO), or the free one where it would go. A table holds only the
 * inodes on the list, so a probe passes at most the list's length, which the steps
 * already count: keys made to collide cost no more than the walks they mirror. */
static uint64_t slot_of(const struct cpio_links *l, uint64_t dev, uint64_t ino)
{
	for (uint64_t h = home(l, dev, ino);; h = (h + 1) & (l->nslots - 1)) {
		const struct cpio_link *s = &l->slots[h];

		if (!s->used || (s->dev == dev && s->ino == ino))
			return h;
	}
}

static int grow(struct cpio_links *l)
{
	struct cpio_links bigger = { .nslots = l->nslots ? l->nslots * 2 : 1024 };

	bigger.slots = calloc(bigger.nslots, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -ENOMEM;
	for (uint64_t i = 0; i < l->nslots; i++)
		if (l->slots[i].used)
			bigger.slots[slot_of(&bigger, l->slots[i].dev, l->slots[i].ino)] = l->slots[i];
	free(l->slots);
	l->slots = bigger.slots;
	l->nslots = bigger.nslots;
	return 0;
}

/* Empties slot I, moving back the entries after it that probing would no longer reach
 * (linear probing's deletion, without tombstones). */
static void remove_at(struct cpio_links *l, uint64_t i)
{
	uint64_t mask = l->nslots - 1;

	l->slots[i].used = 0;
	for (uint64_t j = (i + 1) & mask; l->slots[j].used; j = (j + 1) & mask) {
		uint64_t k = home(l, l->slots[j].dev, l->slots[j].ino);

		/* J stays where it is when its home lies cyclically in (I, J] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		l->slots[i] = l->slots[j];
		l->slots[j].used = 0;
		i = j;
	}
}

int cpio_links_note(struct cpio_links *l, uint64_t dev, uint64_t ino, uint32_t nlink)
{
	uint64_t at;
	int rc;

	if (nlink < 2)
		return 0; /* never on the list */
	if ((l->live + 1) * 2 > l->nslots && (rc = grow(l)))
		return rc;
	l->steps += l->live; /* the walk, at most the whole list */
	at = slot_of(l, dev, ino);
	if (!l->slots[at].used) {
		l->slots[at] = (struct cpio_link){ .dev = dev, .ino = ino, .left = nlink - 1,
						   .used = 1 };
		l->live++;
	} else if (!--l->slots[at].left) {
		remove_at(l, at); /* its links have all come: off the list */
		l->live--;
	}
	return 0;
}

void cpio_links_free(struct cpio_links *l)
{
	free(l->slots);
	*l = (struct cpio_links){ 0 };
}
