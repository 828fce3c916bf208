/* SPDX-License-Identifier: MIT */
/* The disk cache of URL mounts (diskcache.h). */
#include "diskcache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "format.h"
#include "util.h"

#define SUFFIX ".cache"
#define SECRET "secret"
#define FILES_MAX 4096
#define PAGE 4096u

struct range {
	uint64_t off, len, sum;
	uint64_t slot;       /* its tag's place after tags_at */
	uint32_t prev, next; /* the LRU list of ranges held, NONE-terminated */
	bool held;
};

#define NONE UINT32_MAX

struct stp_diskcache {
	int fd;
	uint64_t limit, used;
	uint64_t tags_at, slots, added; /* added: slots handed out, in the order of expect */
	EVP_MAC_CTX *mac;          /* keyed with the file's tag key; copied for each use */
	uint64_t rejected;         /* atomic */
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

/* A MAC context keyed with KEY, to be copied for each tag. */
static EVP_MAC_CTX *keyed_mac(const uint8_t key[32])
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};

	if (ctx && !EVP_MAC_init(ctx, key, 32, params)) {
		EVP_MAC_CTX_free(ctx);
		ctx = NULL;
	}
	EVP_MAC_free(mac); /* the context holds its own reference */
	return ctx;
}

/* HMAC-SHA256 under KEY of the NPARTS parts (pointer, length) into OUT. */
static int hmac(const uint8_t key[32], const void *const *parts, const size_t *lens,
		size_t nparts, uint8_t out[32])
{
	EVP_MAC_CTX *ctx = keyed_mac(key);
	size_t n = 0;
	int ok = ctx != NULL;

	for (size_t i = 0; ok && i < nparts; i++)
		ok = EVP_MAC_update(ctx, parts[i], lens[i]);
	ok = ok && EVP_MAC_final(ctx, out, &n, 32) && n == 32;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

int stp_diskcache_key(const uint8_t secret[32], const struct stp_diskcache_id *id,
		      char name[72], uint8_t tag_key[32])
{
	static const char domain[] = "stipple disk cache v2", tags[] = "stipple cache tags v2";
	uint8_t size[8], key[32];
	const void *parts[] = { domain, id->url, id->raw_sb, size, id->validator };
	size_t lens[] = { sizeof(domain), strlen(id->url) + 1, id->sb_len, 8,
			  strlen(id->validator) };
	int err;

	stp_put64(size, id->size);
	err = hmac(secret, parts, lens, 5, key);
	if (!err)
		err = hmac(secret, (const void *[]){ tags, key }, (size_t[]){ sizeof(tags), 32 },
			   2, tag_key);
	for (int i = 0; !err && i < 32; i++)
		snprintf(name + 2 * i, 3, "%02x", key[i]);
	if (!err)
		strcat(name, SUFFIX);
	return err;
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

/* Whether NAME is one stp_diskcache_key makes: 64 lowercase hex digits and SUFFIX. The
 * directory may be one the user keeps other files in (~/.cache): nothing else goes. */
static bool is_cache_name(const char *name)
{
	for (int i = 0; i < 64; i++)
		if (!isdigit((unsigned char)name[i]) && (name[i] < 'a' || name[i] > 'f'))
			return false;
	return !strcmp(name + 64, SUFFIX);
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

		if (!is_cache_name(de->d_name) || !strcmp(de->d_name, keep) ||
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

/* The directory, when it is one that only its owner, the mounting user, may change. */
static int open_dir(const char *dir, int *out)
{
	int err = make_dirs(dir), fd = -1;
	struct stat st;

	if (!err && (fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		err = errno == ENOTDIR || errno == ELOOP ? -ENOTDIR : -errno;
	if (!err && fstat(fd, &st))
		err = -errno;
	if (!err && (st.st_uid != geteuid() || (st.st_mode & 022)))
		err = -EPERM;
	if (err && fd >= 0)
		close(fd);
	*out = err ? -1 : fd;
	return err;
}

/* Whether FD is a file of ours that no one else reaches: regular, owned by the mounting
 * user, mode 0600 (as made), one link (not also a name elsewhere), SIZE bytes (0: any). */
static bool private_file(int fd, uint64_t size)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 07777) == 0600 && st.st_nlink == 1 &&
	       (!size || (uint64_t)st.st_size == size);
}

/* NAME at DIRFD, opened with FLAGS when it is private_file, else removed and made anew
 * (O_EXCL: never someone else's). */
static int open_private(int dirfd, const char *name, int flags, uint64_t size, bool *made)
{
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	*made = false;
	if (fd >= 0 && private_file(fd, size))
		return fd;
	if (fd >= 0 || errno != ENOENT) {
		if (fd >= 0)
			close(fd);
		if (unlinkat(dirfd, name, 0) && errno != ENOENT)
			return -errno;
	}
	fd = openat(dirfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
		    0600);
	if (fd < 0)
		return -errno;
	*made = true;
	return fd;
}

/* The directory's secret, made on first use; the directory's lock is held. */
static int read_secret(int dirfd, uint8_t secret[32])
{
	bool made;
	int fd = open_private(dirfd, SECRET, O_RDWR, 32, &made), err;

	if (fd < 0)
		return fd;
	if (made)
		err = getrandom(secret, 32, 0) != 32 ? -EIO : stp_pwrite_full(fd, secret, 32, 0);
	else
		err = stp_pread_full(fd, secret, 32, 0);
	if (made && (err || fsync(fd))) {
		err = err ? err : -errno;
		unlinkat(dirfd, SECRET, 0);
	}
	close(fd);
	return err;
}

/* The image's file, sized for its bytes and its tags; the directory's lock is held. */
static int open_cache_file(int dirfd, const char *name, const struct stp_diskcache_file *f,
			   int *out)
{
	uint64_t size = stp_diskcache_file_size(f);
	bool made;
	struct stat st;
	int fd = open_private(dirfd, name, O_RDWR, 0, &made), err = 0;

	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_SH) || fstat(fd, &st))
		err = -errno;
	if (!err && (uint64_t)st.st_size != size && ftruncate(fd, (off_t)size))
		err = -errno;
	if (!err)
		futimens(fd, NULL); /* the directory's LRU order */
	if (err)
		close(fd);
	*out = err ? -1 : fd;
	return err;
}

/* Where the tags begin, and room for one per range the image can ask the cache for: the
 * metadata, the dictionary, each metadata page and each block, the blocks bounded by
 * one per 32 bytes of the image (more, claimed by a forged table, are not cached). */
static void size_tags(const struct stp_superblock *sb, struct stp_diskcache_file *f)
{
	uint64_t blocks = sb->block_count < sb->image_size / 32 ? sb->block_count :
			  sb->image_size / 32;

	f->tags_at = (sb->image_size + PAGE - 1) / PAGE * PAGE;
	f->slots = 2 + sb->meta_stored_size / 24 + blocks;
}

static const char *dir_error(int err)
{
	return err == -EPERM ? "not owned by this user, or writable by others (not used)" :
	       err == -ENOTDIR ? "not a directory, or a symbolic link (not used)" :
	       stp_strerror(err);
}

int stp_diskcache_open_file(const char *dir, const struct stp_diskcache_id *id, uint64_t limit,
			    const char *prog, struct stp_diskcache_file *out)
{
	char name[72];
	uint8_t secret[32];
	int dirfd, err = open_dir(dir, &dirfd);

	out->fd = -1;
	if (err) {
		fprintf(stderr, "%s: warning: disk cache %s: %s; going on without it\n", prog, dir,
			dir_error(err));
		return err;
	}
	size_tags(id->sb, out);
	/* files are made and removed under the directory's lock, never half there */
	flock(dirfd, LOCK_EX);
	err = read_secret(dirfd, secret);
	if (!err)
		err = stp_diskcache_key(secret, id, name, out->tag_key);
	explicit_bzero(secret, sizeof(secret));
	if (!err) {
		evict_files(dirfd, name, limit);
		err = open_cache_file(dirfd, name, out, &out->fd);
	}
	flock(dirfd, LOCK_UN);
	close(dirfd);
	if (err)
		fprintf(stderr, "%s: warning: disk cache %s: %s; going on without it\n", prog, dir,
			stp_strerror(err));
	return err;
}

int stp_diskcache_new(const struct stp_diskcache_file *f, uint64_t limit,
		      struct stp_diskcache **out)
{
	struct stp_diskcache *c = calloc(1, sizeof(*c));
	struct stat st;

	if (c)
		c->mac = keyed_mac(f->tag_key);
	if (!c || !c->mac) {
		free(c);
		close(f->fd);
		return -ENOMEM;
	}
	c->fd = f->fd;
	c->limit = limit;
	c->tags_at = f->tags_at;
	c->slots = f->slots;
	c->head = c->tail = NONE;
	c->used = fstat(c->fd, &st) ? 0 : (uint64_t)st.st_blocks * 512;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void stp_diskcache_free(struct stp_diskcache *c)
{
	if (!c)
		return;
	close(c->fd);
	EVP_MAC_CTX_free(c->mac);
	pthread_mutex_destroy(&c->lock);
	free(c->r);
	free(c);
}

int stp_diskcache_expect(struct stp_diskcache *c, uint64_t off, uint64_t len, uint64_t sum)
{
	/* a forged table may name bytes past the image: they would land on the tags */
	if (!len || off > c->tags_at || len > c->tags_at - off || c->added >= c->slots)
		return 0;
	if (c->n == c->cap) {
		uint32_t cap = c->cap ? 2 * c->cap : 64;
		struct range *r = realloc(c->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		c->r = r;
		c->cap = cap;
	}
	c->r[c->n++] = (struct range){ off, len, sum, c->added++, NONE, NONE, false };
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

/* The tag of R holding BUF: HMAC-SHA256 over its offset, length and bytes. */
static int tag_of(struct stp_diskcache *c, const struct range *r, const void *buf,
		  uint8_t tag[STP_DISKCACHE_TAG])
{
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(c->mac);
	uint8_t head[16];
	size_t n = 0;
	int ok;

	stp_put64(head, r->off);
	stp_put64(head + 8, r->len);
	ok = ctx && EVP_MAC_update(ctx, head, sizeof(head)) && EVP_MAC_update(ctx, buf, r->len) &&
	     EVP_MAC_final(ctx, tag, &n, STP_DISKCACHE_TAG) && n == STP_DISKCACHE_TAG;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

static uint64_t tag_offset(const struct stp_diskcache *c, const struct range *r)
{
	return c->tags_at + r->slot * STP_DISKCACHE_TAG;
}

int stp_diskcache_get(struct stp_diskcache *c, void *buf, size_t len, uint64_t off)
{
	struct range *r = find(c, off, len);
	uint8_t want[STP_DISKCACHE_TAG], have[STP_DISKCACHE_TAG];
	off_t data;

	if (!r)
		return -ENOENT;
	/* a hole at OFF (never written, or punched out): a miss without reading zeros */
	data = lseek(c->fd, (off_t)off, SEEK_DATA);
	if (data != (off_t)off || stp_pread_full(c->fd, buf, len, off) ||
	    stp_pread_full(c->fd, have, sizeof(have), tag_offset(c, r)))
		return -ENOENT;
	if (tag_of(c, r, buf, want) || CRYPTO_memcmp(want, have, sizeof(want))) {
		__atomic_add_fetch(&c->rejected, 1, __ATOMIC_RELAXED);
		return -ENOENT;
	}
	pthread_mutex_lock(&c->lock);
	touch(c, r);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

uint64_t stp_diskcache_rejected(struct stp_diskcache *c)
{
	return __atomic_load_n(&c->rejected, __ATOMIC_RELAXED);
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
	uint8_t tag[STP_DISKCACHE_TAG];

	if (!r || len > c->limit || stp_checksum(buf, len) != r->sum || tag_of(c, r, buf, tag))
		return;
	/* the bytes, then their tag: a reader between the two sees a mismatch, a miss */
	if (stp_pwrite_full(c->fd, buf, len, off) ||
	    stp_pwrite_full(c->fd, tag, sizeof(tag), tag_offset(c, r)))
		return;
	pthread_mutex_lock(&c->lock);
	if (!r->held)
		c->used += len;
	touch(c, r);
	trim(c);
	pthread_mutex_unlock(&c->lock);
}

int stp_diskcache_open_dir(const char *dir, int *out)
{
	return open_dir(dir, out);
}

int stp_diskcache_open_private(int dirfd, const char *name, int flags, bool *made)
{
	return open_private(dirfd, name, flags, 0, made);
}

const char *stp_diskcache_dir_error(int err)
{
	return dir_error(err);
}
