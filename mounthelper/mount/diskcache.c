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

#define SUFFIX STP_DISKCACHE_SUFFIX

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
	c->used = stp_fd_stat(c->fd, &st) ? 0 : (uint64_t)st.st_blocks * 512;
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

	if (!stp_fd_stat(c->fd, &st)) /* confined (util.h) */
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
