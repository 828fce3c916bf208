/* SPDX-License-Identifier: MIT */
/* The hot list recorder. */
#include "record.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "hotlist.h"
#include "image.h"
#include "treewalk.h"
#include "util.h"

#define STRIPES 64

/* Pages [start, end) of a file, first read as read number SEQ (the earliest of those
 * merged into it). */
struct rec_range {
	uint64_t start, end, seq;
};

struct file_rec {
	struct rec_range *ranges; /* sorted, disjoint, not adjacent */
	uint32_t n, cap;
};

/* A name looked up, in the order of its first lookup. */
struct rec_lookup {
	uint32_t dir;
	char *name;
};

/* The names looked up: a list in order, and a hash set over it (indexes + 1, 0 free)
 * kept at most half full so that a repeated lookup is found in a probe or two. */
struct rec_lookups {
	pthread_mutex_t lock;
	struct rec_lookup *v;
	uint32_t n, cap;
	uint32_t *slots;
	uint32_t nslots;
};

struct stp_recorder {
	const struct stp_image *img;
	struct rec_lookups names;
	uint32_t ninodes;
	struct file_rec *files;          /* by inode; each protected by its stripe */
	pthread_mutex_t stripe[STRIPES];
	uint64_t next_seq;               /* atomic */
};

int stp_record_new(const struct stp_image *img, struct stp_recorder **out)
{
	struct stp_recorder *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->img = img;
	r->ninodes = stp_image_sb(img)->inode_count;
	r->files = calloc(r->ninodes, sizeof(*r->files));
	if (!r->files) {
		free(r);
		return -ENOMEM;
	}
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&r->stripe[i], NULL);
	pthread_mutex_init(&r->names.lock, NULL);
	*out = r;
	return 0;
}

void stp_record_free(struct stp_recorder *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < r->ninodes; i++)
		free(r->files[i].ranges);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&r->stripe[i]);
	for (uint32_t i = 0; i < r->names.n; i++)
		free(r->names.v[i].name);
	free(r->names.v);
	free(r->names.slots);
	pthread_mutex_destroy(&r->names.lock);
	free(r->files);
	free(r);
}

/* Merges [s, e), first read as SEQ, into the sorted ranges of F. Reads mostly extend
 * the last range. */
static int add_range(struct file_rec *f, uint64_t s, uint64_t e, uint64_t seq)
{
	uint32_t i = f->n, j;

	while (i > 0 && f->ranges[i - 1].start > e)
		i--;
	/* ranges [j, i) touch [s, e) */
	j = i;
	while (j > 0 && f->ranges[j - 1].end >= s)
		j--;
	if (j < i) {
		for (uint32_t k = j; k < i; k++)
			seq = f->ranges[k].seq < seq ? f->ranges[k].seq : seq;
		s = s < f->ranges[j].start ? s : f->ranges[j].start;
		e = e > f->ranges[i - 1].end ? e : f->ranges[i - 1].end;
		f->ranges[j] = (struct rec_range){ s, e, seq };
		memmove(&f->ranges[j + 1], &f->ranges[i], (f->n - i) * sizeof(*f->ranges));
		f->n -= i - j - 1;
		return 0;
	}
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 4;
		struct rec_range *grown;

		if (f->cap > UINT32_MAX / 2 ||
		    !(grown = reallocarray(f->ranges, cap, sizeof(*grown))))
			return -ENOMEM;
		f->ranges = grown;
		f->cap = cap;
	}
	memmove(&f->ranges[i + 1], &f->ranges[i], (f->n - i) * sizeof(*f->ranges));
	f->ranges[i] = (struct rec_range){ s, e, seq };
	f->n++;
	return 0;
}

void stp_record_read(struct stp_recorder *r, uint32_t ino, uint64_t off, uint64_t len)
{
	pthread_mutex_t *lock;
	struct file_rec *f;
	uint64_t s = off & ~(uint64_t)(STP_HOT_PAGE - 1);
	uint64_t e = (off + len + STP_HOT_PAGE - 1) & ~(uint64_t)(STP_HOT_PAGE - 1), seq;

	if (!r || ino >= r->ninodes || !len)
		return;
	f = &r->files[ino];
	lock = &r->stripe[ino % STRIPES];
	seq = __atomic_add_fetch(&r->next_seq, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(lock);
	add_range(f, s, e, seq); /* out of memory: the list misses a range, nothing worse */
	pthread_mutex_unlock(lock);
}

static uint64_t lookup_hash(uint32_t dir, const char *name, size_t len)
{
	return stp_checksum(name, len) ^ (dir * 0x9e3779b97f4a7c15ull);
}

/* The slot of (DIR, NAME) in the set: where it is, or the free one where it would go. */
static uint32_t *lookup_slot(const struct rec_lookups *l, uint32_t dir, const char *name,
			     size_t len)
{
	uint32_t mask = l->nslots - 1, i = (uint32_t)lookup_hash(dir, name, len) & mask;

	for (;; i = (i + 1) & mask) {
		const struct rec_lookup *e = l->slots[i] ? &l->v[l->slots[i] - 1] : NULL;

		if (!e || (e->dir == dir && !strncmp(e->name, name, len) && !e->name[len]))
			return &l->slots[i];
	}
}

/* Room for one more name: the list and a set at most half full. */
static int lookups_grow(struct rec_lookups *l)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 256;
		struct rec_lookup *v = reallocarray(l->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (2 * (l->n + 1) > l->nslots) {
		uint32_t nslots = l->nslots ? l->nslots * 2 : 1024;
		uint32_t *old = l->slots, oldn = l->nslots;

		l->slots = calloc(nslots, sizeof(*l->slots));
		if (!l->slots) {
			l->slots = old;
			return -ENOMEM;
		}
		l->nslots = nslots;
		for (uint32_t i = 0; i < oldn; i++)
			if (old[i]) {
				const struct rec_lookup *e = &l->v[old[i] - 1];

				*lookup_slot(l, e->dir, e->name, strlen(e->name)) = old[i];
			}
		free(old);
	}
	return 0;
}

void stp_record_lookup(struct stp_recorder *r, uint32_t dir, const char *name, size_t len)
{
	struct rec_lookups *l;
	uint32_t *slot;
	char *copy;

	if (!r || dir >= r->ninodes || !len)
		return;
	l = &r->names;
	pthread_mutex_lock(&l->lock);
	/* out of memory, or past the most an image keeps: the list misses a name */
	if (l->n < STP_LOOKUP_MAX && !lookups_grow(l) &&
	    !*(slot = lookup_slot(l, dir, name, len)) && (copy = strndup(name, len))) {
		l->v[l->n++] = (struct rec_lookup){ dir, copy };
		*slot = l->n;
	}
	pthread_mutex_unlock(&l->lock);
}

/* Paths of the recorded inodes, by inode. */
struct named {
	const struct stp_recorder *r;
	char **paths;
	uint8_t *dirs; /* by inode: a name was looked up in it */
};

/* The first path of each recorded file (a hard link has several), and the path of
 * every directory a name was looked up in. */
static int note_path(void *ctx, const struct stp_tree_entry *e)
{
	struct named *nm = ctx;
	int wanted = e->dtype == DT_DIR ? nm->dirs[e->ino] : nm->r->files[e->ino].n != 0;

	if (!wanted || nm->paths[e->ino])
		return 0;
	nm->paths[e->ino] = strdup(e->path);
	return nm->paths[e->ino] ? 0 : -ENOMEM;
}

/* One recorded range, for sorting all of them by first read. */
struct listed {
	uint64_t seq;
	uint32_t ino, idx;
};

static int cmp_seq(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;

	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Every range of the inodes with a path, in the order of their first read. */
static struct listed *listed_in_order(const struct stp_recorder *r, char **paths, size_t *count)
{
	size_t n = 0, k = 0;
	struct listed *v;

	for (uint32_t i = 0; i < r->ninodes; i++)
		n += paths[i] ? r->files[i].n : 0;
	v = reallocarray(NULL, n ? n : 1, sizeof(*v));
	if (!v)
		return NULL;
	for (uint32_t i = 0; i < r->ninodes; i++)
		for (uint32_t j = 0; paths[i] && j < r->files[i].n; j++)
			v[k++] = (struct listed){ r->files[i].ranges[j].seq, i, j };
	qsort(v, n, sizeof(*v), cmp_seq);
	*count = n;
	return v;
}

/* One line per run of ranges of the same file, in the order they were first read: a file
 * read again after others comes again, so that mkstipple lays the hot region out in the
 * order start-up reads it. */
static int write_lines(const struct stp_recorder *r, char **paths, FILE *f)
{
	size_t n = 0, run;
	struct listed *v = listed_in_order(r, paths, &n);
	struct stp_hot_range *line = reallocarray(NULL, n ? n : 1, sizeof(*line));

	if (!v || !line) {
		free(v);
		free(line);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i += run) {
		const struct file_rec *rec = &r->files[v[i].ino];

		for (run = 0; i + run < n && v[i + run].ino == v[i].ino; run++)
			line[run] = (struct stp_hot_range){ rec->ranges[v[i + run].idx].start,
							    rec->ranges[v[i + run].idx].end };
		stp_hotlist_put(f, paths[v[i].ino], line, run); /* fclose reports */
	}
	free(v);
	free(line);
	return 0;
}

/* The lookup lines: the directory's path, then the name (the root's names alone). */
static void write_lookups(const struct stp_recorder *r, char **paths, FILE *f)
{
	char path[PATH_MAX];

	for (uint32_t i = 0; i < r->names.n; i++) {
		const struct rec_lookup *e = &r->names.v[i];
		const char *dir = e->dir == STP_ROOT_INO ? "" : paths[e->dir];

		if (!dir || snprintf(path, sizeof(path), "%s%s%s", dir, *dir ? "/" : "",
				     e->name) >= (int)sizeof(path))
			continue;
		stp_hotlist_put_lookup(f, path); /* fclose reports */
	}
}

int stp_record_write(struct stp_recorder *r, int fd)
{
	size_t slots = r->ninodes ? r->ninodes : 1;
	struct named nm = { r, calloc(slots, sizeof(char *)), calloc(slots, 1) };
	FILE *f = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc = nm.paths && nm.dirs ? 0 : -ENOMEM;

	for (uint32_t i = 0; !rc && i < r->names.n; i++)
		nm.dirs[r->names.v[i].dir] = 1;
	if (!rc)
		rc = stp_treewalk_tree(r->img, note_path, &nm);
	if (rc)
		goto out;
	/* built in memory, then written with write(): the sandbox allows little else */
	f = open_memstream(&text, &len);
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	rc = write_lines(r, nm.paths, f);
	if (!rc)
		write_lookups(r, nm.paths, f);
	rc = fclose(f) || rc ? -ENOMEM : stp_write_full(fd, text, len);
out:
	free(text);
	for (uint32_t i = 0; nm.paths && i < r->ninodes; i++)
		free(nm.paths[i]);
	free(nm.paths);
	free(nm.dirs);
	return rc;
}
