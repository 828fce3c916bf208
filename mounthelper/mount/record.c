/* SPDX-License-Identifier: MIT */
/* The hot list recorder. */
#include "record.h"

#include <dirent.h>
#include <errno.h>
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

struct stp_recorder {
	const struct stp_image *img;
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

/* Paths of the recorded inodes, by inode. */
struct named {
	const struct stp_recorder *r;
	char **paths;
};

/* The first path of each recorded inode (a hard link has several). */
static int note_path(void *ctx, const struct stp_tree_entry *e)
{
	struct named *nm = ctx;

	if (e->dtype == DT_DIR || !nm->r->files[e->ino].n || nm->paths[e->ino])
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

int stp_record_write(struct stp_recorder *r, int fd)
{
	struct named nm = { r, calloc(r->ninodes ? r->ninodes : 1, sizeof(char *)) };
	FILE *f = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc = nm.paths ? stp_treewalk_tree(r->img, note_path, &nm) : -ENOMEM;

	if (rc)
		goto out;
	/* built in memory, then written with write(): the sandbox allows little else */
	f = open_memstream(&text, &len);
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	rc = write_lines(r, nm.paths, f);
	rc = fclose(f) || rc ? -ENOMEM : stp_write_full(fd, text, len);
out:
	free(text);
	for (uint32_t i = 0; nm.paths && i < r->ninodes; i++)
		free(nm.paths[i]);
	free(nm.paths);
	return rc;
}
