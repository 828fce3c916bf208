/* SPDX-License-Identifier: MIT */
/* The block store's ledger (ledger.h). */
#include "ledger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "util.h"

#define LEDGER_MAGIC "STPLDG02"

/* The file: this head, then NGROUPS groups, then NPEND pending files, in the host's byte
 * order (the store is one machine's). */
struct ledger_head {
	char magic[8];
	uint64_t dir[STP_LEDGER_FANOUT];
	uint32_t ngroups, npend;
};

/* A secret prefix of fixed length before a fixed-length input is a sound keyed hash for
 * output no one outside the store sees (length extension needs the output and a longer
 * input). */
unsigned stp_ledger_fanout(const struct stp_ledger *l, const uint8_t sha[32])
{
	uint8_t in[STP_LEDGER_KEY_SIZE + 32], out[STP_SIG_HASH_SIZE];

	memcpy(in, l->key, STP_LEDGER_KEY_SIZE);
	memcpy(in + STP_LEDGER_KEY_SIZE, sha, 32);
	stp_sign_hash(in, sizeof(in), out);
	return out[0];
}

static int by_hash(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

bool stp_ledger_pending_in(const struct stp_ledger *l, uint32_t n, const uint8_t sha[32])
{
	return n && bsearch(sha, l->p, n, sizeof(*l->p), by_hash);
}

bool stp_ledger_is_pending(const struct stp_ledger *l, const uint8_t sha[32])
{
	return stp_ledger_pending_in(l, l->npend, sha);
}

void stp_ledger_set_dir(struct stp_ledger *l, unsigned d, uint64_t bytes)
{
	l->total = l->total - l->dir[d] + bytes;
	l->dir[d] = bytes;
}

void stp_ledger_remove(struct stp_ledger *l, unsigned d, uint64_t bytes)
{
	stp_ledger_set_dir(l, d, l->dir[d] > bytes ? l->dir[d] - bytes : 0);
}

/* Whether H names a ledger of LEN bytes whose counts it can follow. */
static bool head_ok(const struct ledger_head *h, uint64_t len)
{
	if (memcmp(h->magic, LEDGER_MAGIC, 8) || h->npend > STP_LEDGER_PENDING_MAX ||
	    h->ngroups > h->npend)
		return false;
	return len == sizeof(*h) + (uint64_t)h->ngroups * sizeof(struct stp_ledger_group) +
			      (uint64_t)h->npend * sizeof(struct stp_ledger_pending);
}

/* H's arrays read from FD into L (its counts checked): false when they cannot be, or a
 * pending file names a group there is not. */
static bool read_arrays(struct stp_ledger *l, int fd, const struct ledger_head *h)
{
	size_t groups = h->ngroups * sizeof(*l->g);
	bool ok;

	l->g = calloc(h->ngroups + 1u, sizeof(*l->g));
	l->p = calloc(h->npend + 1u, sizeof(*l->p));
	ok = l->g && l->p && !stp_pread_full(fd, l->g, groups, sizeof(*h)) &&
	     !stp_pread_full(fd, l->p, h->npend * sizeof(*l->p), sizeof(*h) + groups);
	for (uint32_t i = 0; ok && i < h->npend; i++)
		ok = l->p[i].group < h->ngroups;
	return ok;
}

void stp_ledger_read(struct stp_ledger *l, int fd, uint64_t len)
{
	struct ledger_head h;

	if (len < sizeof(h) || stp_pread_full(fd, &h, sizeof(h), 0) || !head_ok(&h, len))
		return;
	if (!read_arrays(l, fd, &h)) {
		stp_ledger_free(l);
		return;
	}
	l->ngroups = h.ngroups;
	l->npend = h.npend;
	memcpy(l->dir, h.dir, sizeof(l->dir));
	l->known = true;
	l->total = 0;
	for (unsigned d = 0; d < STP_LEDGER_FANOUT; d++)
		l->total += l->dir[d];
	for (uint32_t g = 0; g < l->ngroups; g++)
		l->total += l->g[g].room;
	stp_ledger_sort(l);
}

/* Drops the groups left without a file and numbers the rest from 0. */
static void compact(struct stp_ledger *l)
{
	uint32_t *map = calloc(l->ngroups + 1u, sizeof(*map)), n = 0;

	if (!map)
		return;
	for (uint32_t i = 0; i < l->npend; i++)
		map[l->p[i].group] = 1;
	for (uint32_t g = 0; g < l->ngroups; g++) {
		if (!map[g]) {
			l->total -= l->g[g].room;
			continue;
		}
		l->g[n] = l->g[g];
		map[g] = n++;
	}
	for (uint32_t i = 0; i < l->npend; i++)
		l->p[i].group = map[l->p[i].group];
	l->ngroups = n;
	free(map);
}

int stp_ledger_write(struct stp_ledger *l, int fd)
{
	struct ledger_head h = { LEDGER_MAGIC, { 0 }, 0, 0 };
	size_t groups;
	int err;

	compact(l);
	memcpy(h.dir, l->dir, sizeof(h.dir));
	h.ngroups = l->ngroups;
	h.npend = l->npend;
	groups = h.ngroups * sizeof(*l->g);
	err = stp_pwrite_full(fd, &h, sizeof(h), 0);
	if (!err)
		err = stp_pwrite_full(fd, l->g, groups, sizeof(h));
	if (!err)
		err = stp_pwrite_full(fd, l->p, h.npend * sizeof(*l->p), sizeof(h) + groups);
	return err;
}

int stp_ledger_add_group(struct stp_ledger *l, uint32_t pid, uint64_t start, uint64_t want,
			 uint32_t *group, uint32_t *earlier, uint64_t *room_for)
{
	uint64_t left = STP_LEDGER_PENDING_MAX - l->npend, n = want < left ? want : left;
	struct stp_ledger_group *g = realloc(l->g, (l->ngroups + 1u) * sizeof(*g));
	struct stp_ledger_pending *p = g ? realloc(l->p, (l->npend + n + 1) * sizeof(*p)) : NULL;

	if (g)
		l->g = g;
	if (!p)
		return -ENOMEM;
	l->p = p;
	*group = l->ngroups;
	*earlier = l->npend;
	*room_for = n;
	l->g[l->ngroups++] = (struct stp_ledger_group){ 0, start, pid, 0 };
	return 0;
}

void stp_ledger_add_pending(struct stp_ledger *l, const uint8_t sha[32], uint32_t group)
{
	memcpy(l->p[l->npend].sha, sha, 32);
	l->p[l->npend++].group = group;
}

void stp_ledger_sort(struct stp_ledger *l)
{
	qsort(l->p, l->npend, sizeof(*l->p), by_hash);
}

/* A file two groups were handed (an index naming a block twice, ...) counts once, and not
 * while a live group may still write it. */
void stp_ledger_settle(struct stp_ledger *l, const uint8_t *state, const uint64_t *bytes)
{
	uint32_t kept = 0;

	for (uint32_t i = 0, j; i < l->npend; i = j) {
		bool held = false;

		for (j = i; j < l->npend && !memcmp(l->p[j].sha, l->p[i].sha, 32); j++)
			held |= state[l->p[j].group] == STP_LEDGER_HELD;
		for (uint32_t k = i; k < j; k++)
			if (state[l->p[k].group] == STP_LEDGER_HELD)
				l->p[kept++] = l->p[k];
		if (!held && l->known) {
			unsigned d = stp_ledger_fanout(l, l->p[i].sha);

			stp_ledger_set_dir(l, d, l->dir[d] + bytes[i]);
		}
	}
	l->npend = kept;
	compact(l);
}

void stp_ledger_free(struct stp_ledger *l)
{
	free(l->g);
	free(l->p);
	l->g = NULL;
	l->p = NULL;
	l->ngroups = l->npend = 0;
}
