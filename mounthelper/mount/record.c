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

struct file_rec {
	uint64_t first;        /* order of first access, 0: never read */
	struct stp_hot_range *ranges; /* sorted, disjoint, not adjacent */
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

/* Merges [s, e) into the sorted ranges of F. Reads mostly extend the last range. */
static int add_range(struct file_rec *f, uint64_t s, uint64_t e)
{
	uint32_t i = f->n, j;

	while (i > 0 && f->ranges[i - 1].start > e)
		i--;
	/* ranges [j, i) touch [s, e) */
	j = i;
	while (j > 0 && f->ranges[j - 1].end >= s)
		j--;
	if (j < i) {
		s = s < f->ranges[j].start ? s : f->ranges[j].start;
		e = e > f->ranges[i - 1].end ? e : f->ranges[i - 1].end;
		f->ranges[j] = (struct stp_hot_range){ s, e };
		memmove(&f->ranges[j + 1], &f->ranges[i], (f->n - i) * sizeof(*f->ranges));
		f->n -= i - j - 1;
		return 0;
	}
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 4;
		struct stp_hot_range *grown;

		if (f->cap > UINT32_MAX / 2 ||
		    !(grown = reallocarray(f->ranges, cap, sizeof(*grown))))
			return -ENOMEM;
		f->ranges = grown;
		f->cap = cap;
	}
	memmove(&f->ranges[i + 1], &f->ranges[i], (f->n - i) * sizeof(*f->ranges));
	f->ranges[i] = (struct stp_hot_range){ s, e };
	f->n++;
	return 0;
}

void stp_record_read(struct stp_recorder *r, uint32_t ino, uint64_t off, uint64_t len)
{
	pthread_mutex_t *lock;
	struct file_rec *f;
	uint64_t s = off & ~(uint64_t)(STP_HOT_PAGE - 1);
	uint64_t e = (off + len + STP_HOT_PAGE - 1) & ~(uint64_t)(STP_HOT_PAGE - 1);

	if (!r || ino >= r->ninodes || !len)
		return;
	f = &r->files[ino];
	lock = &r->stripe[ino % STRIPES];
	pthread_mutex_lock(lock);
	if (!f->first)
		f->first = __atomic_add_fetch(&r->next_seq, 1, __ATOMIC_RELAXED);
	add_range(f, s, e); /* out of memory: the list misses a range, nothing worse */
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

	if (e->dtype == DT_DIR || !nm->r->files[e->ino].first || nm->paths[e->ino])
		return 0;
	nm->paths[e->ino] = strdup(e->path);
	return nm->paths[e->ino] ? 0 : -ENOMEM;
}

static int cmp_first(const void *a, const void *b, void *arg)
{
	const struct file_rec *files = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (files[x].first > files[y].first) - (files[x].first < files[y].first);
}

static void write_lines(struct stp_recorder *r, char **paths, uint32_t *order, uint32_t n, FILE *f)
{
	for (uint32_t k = 0; k < n; k++) {
		const struct file_rec *rec = &r->files[order[k]];

		if (!paths[order[k]])
			continue;
		stp_hotlist_put(f, paths[order[k]], rec->ranges, rec->n); /* fclose reports */
	}
}

int stp_record_write(struct stp_recorder *r, int fd)
{
	struct named nm = { r, calloc(r->ninodes ? r->ninodes : 1, sizeof(char *)) };
	uint32_t *order = reallocarray(NULL, r->ninodes ? r->ninodes : 1, sizeof(*order)), n = 0;
	FILE *f = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc = nm.paths && order ? stp_treewalk_tree(r->img, note_path, &nm) : -ENOMEM;

	if (rc)
		goto out;
	for (uint32_t i = 0; i < r->ninodes; i++)
		if (r->files[i].first)
			order[n++] = i;
	qsort_r(order, n, sizeof(*order), cmp_first, r->files);
	/* built in memory, then written with write(): the sandbox allows little else */
	f = open_memstream(&text, &len);
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	write_lines(r, nm.paths, order, n, f);
	rc = fclose(f) ? -ENOMEM : stp_write_full(fd, text, len);
out:
	free(text);
	for (uint32_t i = 0; nm.paths && i < r->ninodes; i++)
		free(nm.paths[i]);
	free(nm.paths);
	free(order);
	return rc;
}
