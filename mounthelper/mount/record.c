/* SPDX-License-Identifier: MIT */
/* The hot list recorder. */
#include "record.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
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

/* The names looked up, in the order of their first lookup: each lookup is appended, and
 * repeats are dropped (drop_repeats) when the list reaches LOOKUPS_ROOM and when it is
 * written, so that it holds a few MiB at the most. */
struct rec_lookups {
	pthread_mutex_t lock;
	struct rec_lookup *v;
	uint32_t n, cap;
	bool full; /* STP_LOOKUP_MAX names kept: no later one is */
};

#define LOOKUPS_ROOM (2 * STP_LOOKUP_MAX)

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

/* By directory and name, then by place in the list (the array's order): the first of
 * equals comes first. */
static int cmp_lookup(const void *a, const void *b)
{
	const struct rec_lookup *x = *(const struct rec_lookup *const *)a;
	const struct rec_lookup *y = *(const struct rec_lookup *const *)b;
	int c;

	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	c = strcmp(x->name, y->name);
	return c ? c : (x > y) - (x < y);
}

/* Drops from L each lookup that repeats an earlier one, and the names past the first
 * STP_LOOKUP_MAX: the rest stay in order. */
static int drop_repeats(struct rec_lookups *l)
{
	struct rec_lookup **by = reallocarray(NULL, l->n ? l->n : 1, sizeof(*by));
	uint32_t k = 0;

	if (!by)
		return -ENOMEM;
	for (uint32_t i = 0; i < l->n; i++)
		by[i] = &l->v[i];
	qsort(by, l->n, sizeof(*by), cmp_lookup);
	for (uint32_t i = l->n; i-- > 1;) {
		if (by[i]->dir == by[i - 1]->dir && !strcmp(by[i]->name, by[i - 1]->name)) {
			free(by[i]->name);
			by[i]->name = NULL;
		}
	}
	free(by);
	for (uint32_t i = 0; i < l->n; i++) {
		if (l->v[i].name && k < STP_LOOKUP_MAX)
			l->v[k++] = l->v[i];
		else
			free(l->v[i].name);
	}
	l->n = k;
	l->full = k == STP_LOOKUP_MAX;
	return 0;
}

/* Room for one more lookup in L, its repeats dropped when it is at LOOKUPS_ROOM. */
static int lookups_grow(struct rec_lookups *l)
{
	if (l->n == LOOKUPS_ROOM && drop_repeats(l))
		return -ENOMEM;
	if (l->full)
		return -ENOSPC;
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 256;
		struct rec_lookup *v = reallocarray(l->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	return 0;
}

void stp_record_lookup(struct stp_recorder *r, uint32_t dir, const char *name, size_t len)
{
	struct rec_lookups *l;
	char *copy;

	if (!r || dir >= r->ninodes || !len)
		return;
	l = &r->names;
	pthread_mutex_lock(&l->lock);
	/* out of memory, or past the most an image keeps: the list misses a name, and a
	 * full list copies none */
	if (!lookups_grow(l) && (copy = strndup(name, len)))
		l->v[l->n++] = (struct rec_lookup){ dir, copy };
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

/* LEN bytes of TEXT, cut to MAX after a whole line: *CUT when they were. */
static size_t fitting(const char *text, size_t len, uint64_t max, bool *cut)
{
	*cut = len > max;
	if (!*cut)
		return len;
	while (max && text[max - 1] != '\n')
		max--;
	return (size_t)max;
}

int stp_record_write(struct stp_recorder *r, int fd, uint64_t max)
{
	size_t slots = r->ninodes ? r->ninodes : 1;
	struct named nm = { r, calloc(slots, sizeof(char *)), calloc(slots, 1) };
	FILE *f = NULL;
	char *text = NULL;
	size_t len = 0;
	bool cut = false;
	int rc = nm.paths && nm.dirs ? drop_repeats(&r->names) : -ENOMEM;

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
	rc = fclose(f) || rc ? -ENOMEM : stp_write_full(fd, text, fitting(text, len, max, &cut));
	if (!rc && cut)
		rc = -EFBIG;
out:
	free(text);
	for (uint32_t i = 0; nm.paths && i < r->ninodes; i++)
		free(nm.paths[i]);
	free(nm.paths);
	free(nm.dirs);
	return rc;
}
