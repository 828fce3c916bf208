/* SPDX-License-Identifier: MIT */
/* The disk cache of URL mounts (diskcache.h). */
#include "diskcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "sign.h"
#include "util.h"

#define SUFFIX ".cache"
#define FILES_MAX 4096

struct range {
	uint64_t off, len, sum;
	uint32_t prev, next; /* the LRU list of ranges held, NONE-terminated */
	bool held;
};

#define NONE UINT32_MAX

struct stp_diskcache {
	int fd;
	uint64_t limit, used;
	struct range *r;
	uint32_t n, cap;
	pthread_mutex_t lock;      /* the LRU list, used */
	uint32_t head, tail;       /* most and least recently used */
};

char *stp_diskcache_default_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *dir = NULL;

	if (geteuid() == 0)
		return strdup("/var/cache/stipple");
	if (xdg && xdg[0] == '/')
		return asprintf(&dir, "%s/stipple", xdg) < 0 ? NULL : dir;
	if (home && home[0] == '/')
		return asprintf(&dir, "%s/.cache/stipple", home) < 0 ? NULL : dir;
	return NULL;
}

int stp_diskcache_key(const uint8_t *raw_sb, size_t sb_len, uint64_t size,
		      const char *validator, uint8_t key[32])
{
	size_t vlen = strlen(validator), n = sb_len + 8 + vlen;
	uint8_t *all = malloc(n);

	if (!all)
		return -ENOMEM;
	memcpy(all, raw_sb, sb_len);
	for (int i = 0; i < 8; i++)
		all[sb_len + i] = (uint8_t)(size >> (8 * i));
	memcpy(all + sb_len + 8, validator, vlen);
	stp_sign_hash(all, n, key);
	free(all);
	return 0;
}

/* Makes DIR and its missing parents, as mkdir -p, private to their owner (as the XDG
 * base directories ask). */
static int make_dirs(const char *dir)
{
	char *p = strdup(dir);
	int err = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; !err; s++) {
		bool last = !*s;

		if (*s != '/' && !last)
			continue;
		*s = '\0';
		if (mkdir(p, 0700) && errno != EEXIST)
			err = -errno;
		if (last)
			break;
		*s = '/';
	}
	free(p);
	return err;
}

struct entry {
	char name[80];
	int64_t mtime;
	uint64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Removes DIRFD's least recently used cache files (not KEEP, none in use: an exclusive
 * lock must be had at once) until the rest holds at most LIMIT bytes. */
static void evict_files(int dirfd, const char *keep, uint64_t limit)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct entry *e = calloc(FILES_MAX, sizeof(*e));
	struct dirent *de;
	uint64_t total = 0;
	size_t n = 0;

	while (d && e && n < FILES_MAX && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat st;

		if (len <= strlen(SUFFIX) || len >= sizeof(e->name) ||
		    strcmp(de->d_name + len - strlen(SUFFIX), SUFFIX) || !strcmp(de->d_name, keep) ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		memcpy(e[n].name, de->d_name, len + 1);
		e[n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		e[n].bytes = (uint64_t)st.st_blocks * 512;
		total += e[n++].bytes;
	}
	qsort(e, n, sizeof(*e), by_age);
	for (size_t i = 0; i < n && total > limit; i++) {
		int f = openat(dirfd, e[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

		if (f < 0)
			continue;
		if (!flock(f, LOCK_EX | LOCK_NB) && !unlinkat(dirfd, e[i].name, 0))
			total -= e[i].bytes;
		close(f);
	}
	free(e);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
}

int stp_diskcache_open_file(const char *dir, const uint8_t key[32], uint64_t image_size,
			    uint64_t limit, const char *prog, int *out)
{
	char name[80];
	struct stat st;
	int dirfd, fd, err = make_dirs(dir);

	for (int i = 0; i < 32; i++)
		snprintf(name + 2 * i, 3, "%02x", key[i]);
	strcat(name, SUFFIX);
	dirfd = err ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		err = err ? err : -errno;
		fprintf(stderr, "%s: warning: disk cache %s: %s (going on without it)\n", prog, dir,
			stp_strerror(err));
		return err;
	}
	/* the file is made and removed under the directory's lock, never half there */
	flock(dirfd, LOCK_EX);
	evict_files(dirfd, name, limit);
	fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	err = fd < 0 ? -errno : 0;
	if (!err && (fstat(fd, &st) || !S_ISREG(st.st_mode)))
		err = -EINVAL;
	if (!err && flock(fd, LOCK_SH))
		err = -errno;
	if (!err && (uint64_t)st.st_size != image_size && ftruncate(fd, (off_t)image_size))
		err = -errno;
	if (!err)
		futimens(fd, NULL); /* the directory's LRU order */
	flock(dirfd, LOCK_UN);
	close(dirfd);
	if (err) {
		if (fd >= 0)
			close(fd);
		fprintf(stderr, "%s: warning: disk cache %s/%s: %s (going on without it)\n", prog,
			dir, name, stp_strerror(err));
		return err;
	}
	*out = fd;
	return 0;
}

int stp_diskcache_new(int fd, uint64_t limit, struct stp_diskcache **out)
{
	struct stp_diskcache *c = calloc(1, sizeof(*c));
	struct stat st;

	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->limit = limit;
	c->head = c->tail = NONE;
	c->used = fstat(fd, &st) ? 0 : (uint64_t)st.st_blocks * 512;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void stp_diskcache_free(struct stp_diskcache *c)
{
	if (!c)
		return;
	close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c->r);
	free(c);
}

int stp_diskcache_expect(struct stp_diskcache *c, uint64_t off, uint64_t len, uint64_t sum)
{
	if (!len)
		return 0;
	if (c->n == c->cap) {
		uint32_t cap = c->cap ? 2 * c->cap : 64;
		struct range *r = realloc(c->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		c->r = r;
		c->cap = cap;
	}
	c->r[c->n++] = (struct range){ off, len, sum, NONE, NONE, false };
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return (x->off > y->off) - (x->off < y->off);
}

void stp_diskcache_ready(struct stp_diskcache *c)
{
	/* the list is indexed by position: it starts again from empty after a sort */
	c->head = c->tail = NONE;
	for (uint32_t i = 0; i < c->n; i++) {
		c->r[i].prev = c->r[i].next = NONE;
		c->r[i].held = false;
	}
	qsort(c->r, c->n, sizeof(*c->r), by_offset);
}

static struct range *find(struct stp_diskcache *c, uint64_t off, uint64_t len)
{
	uint32_t lo = 0, hi = c->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->r[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < c->n && c->r[lo].off == off; lo++)
		if (c->r[lo].len == len)
			return &c->r[lo];
	return NULL;
}

/* Lock held: R out of the LRU list. */
static void unlink_range(struct stp_diskcache *c, struct range *r)
{
	if (!r->held)
		return;
	if (r->prev != NONE)
		c->r[r->prev].next = r->next;
	else
		c->head = r->next;
	if (r->next != NONE)
		c->r[r->next].prev = r->prev;
	else
		c->tail = r->prev;
	r->prev = r->next = NONE;
	r->held = false;
}

/* Lock held: R at the front, most recently used. */
static void touch(struct stp_diskcache *c, struct range *r)
{
	uint32_t i = (uint32_t)(r - c->r);

	unlink_range(c, r);
	r->next = c->head;
	if (c->head != NONE)
		c->r[c->head].prev = i;
	c->head = i;
	if (c->tail == NONE)
		c->tail = i;
	r->held = true;
}

int stp_diskcache_get(struct stp_diskcache *c, void *buf, size_t len, uint64_t off)
{
	struct range *r = find(c, off, len);
	off_t data;

	if (!r)
		return -ENOENT;
	/* a hole at OFF (never written, or punched out): a miss without reading zeros */
	data = lseek(c->fd, (off_t)off, SEEK_DATA);
	if (data != (off_t)off || stp_pread_full(c->fd, buf, len, off) ||
	    stp_checksum(buf, len) != r->sum)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	touch(c, r);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* What the file holds on disk: a punched range frees only the file system blocks it
 * covers whole, so the count of bytes punched would drift from it. */
static void measure(struct stp_diskcache *c)
{
	struct stat st;

	if (!fstat(c->fd, &st))
		c->used = (uint64_t)st.st_blocks * 512;
}

/* Lock held: punches the least recently used ranges out until the file fits. */
static void trim(struct stp_diskcache *c)
{
	if (c->used <= c->limit)
		return;
	measure(c);
	while (c->used > c->limit && c->tail != NONE) {
		struct range *r = &c->r[c->tail];

		unlink_range(c, r);
		if (!fallocate(c->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)r->off,
			       (off_t)r->len))
			measure(c);
	}
}

void stp_diskcache_put(struct stp_diskcache *c, const void *buf, size_t len, uint64_t off)
{
	struct range *r = find(c, off, len);

	if (!r || len > c->limit || stp_checksum(buf, len) != r->sum)
		return;
	if (stp_pwrite_full(c->fd, buf, len, off))
		return;
	pthread_mutex_lock(&c->lock);
	if (!r->held)
		c->used += len;
	touch(c, r);
	trim(c);
	pthread_mutex_unlock(&c->lock);
}
