/* SPDX-License-Identifier: MIT */
/* The length of libarchive's cpio link list, by (device, inode). */
#include "cpiolinks.h"

#include <errno.h>
#include <stdlib.h>

struct cpio_link {
	uint64_t dev, ino;
	uint32_t left;  /* links still to come; 0: off the list (or a free slot) */
	uint8_t used;
};

static uint64_t slot_of(const struct cpio_links *l, uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;

	for (h = (h ^ (h >> 32)) & (l->nslots - 1);; h = (h + 1) & (l->nslots - 1)) {
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

int cpio_links_note(struct cpio_links *l, uint64_t dev, uint64_t ino, uint32_t nlink)
{
	struct cpio_link *s;
	int rc;

	if (nlink < 2)
		return 0; /* never on the list */
	if ((l->nkeys + 1) * 2 > l->nslots && (rc = grow(l)))
		return rc;
	l->steps += l->live; /* the walk, whether it finds the inode or not */
	s = &l->slots[slot_of(l, dev, ino)];
	if (!s->used) {
		*s = (struct cpio_link){ .dev = dev, .ino = ino, .used = 1 };
		l->nkeys++;
	}
	if (s->left) {
		if (!--s->left)
			l->live--;
	} else {
		s->left = nlink - 1;
		l->live++;
	}
	return 0;
}

void cpio_links_free(struct cpio_links *l)
{
	free(l->slots);
	*l = (struct cpio_links){ 0 };
}
