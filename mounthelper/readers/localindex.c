/* SPDX-License-Identifier: MIT */
/* A published index and its block files read as an image (localindex.h). */
#include "localindex.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "destnodes.h"
#include "hash.h"
#include "imgsrc.h"
#include "log.h"
#include "pubindex.h"
#include "published.h" /* STP_PUBLISHED_INDEX_MAX alone: no libcurl here */
#include "util.h"

struct local {
	struct stp_imgsrc src;
	uint8_t *idx;
	size_t len;
	struct stp_pubindex_header h;
	int blocks;          /* DIR/blocks */
	uint8_t *buf;        /* the block held, its stored bytes */
	uint64_t held;       /* its number, or UINT64_MAX */
	pthread_mutex_t lock; /* over BUF and HELD: pread is thread-safe (imgsrc.h) */
};

bool stp_localindex_is(const char *path)
{
	char head[STP_PUBINDEX_MAGIC_LEN];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool is = fd >= 0 && read(fd, head, sizeof(head)) == (ssize_t)sizeof(head) &&
		  !memcmp(head, STP_PUBINDEX_MAGIC, STP_PUBINDEX_MAGIC_LEN);

	if (fd >= 0)
		close(fd);
	return is;
}

/* The block holding OFF (within [256, tail_offset)): entries ascend by offset. */
static uint64_t block_at(const struct local *l, uint64_t off)
{
	uint64_t lo = 0, hi = l->h.block_count;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct stp_pubindex_entry e;

		stp_pubindex_entry_at(l->idx, mid, &e);
		if (e.offset <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Block I's file read whole into l->buf and checked against its hash; a file that is
 * missing, of another size or with other bytes is logged, naming it, and reads as -EIO. */
static int hold(struct local *l, uint64_t i, struct stp_pubindex_entry *e)
{
	char name[STP_PUBINDEX_NAME_MAX];
	uint8_t sha[STP_SIG_HASH_SIZE];
	struct stat st;
	int fd, err;

	stp_pubindex_entry_at(l->idx, i, e);
	if (l->held == i)
		return 0;
	/* the old release's directory is untrusted: no link followed on the way (a linked
	 * HH would lead anywhere), nothing but a regular file opened */
	err = stp_beneath_open_file(l->blocks, stp_pubindex_block_name(e->sha256, name), &fd, &st);
	if (err) {
		stp_log(STP_LOG_ERR, "%s: blocks/%s: %s", l->src.name, name,
			err == -EINVAL ? "not a regular file" : stp_strerror(err));
		return -EIO;
	}
	err = (uint64_t)st.st_size != e->stored_size ||
	      stp_pread_full(fd, l->buf, e->stored_size, 0) ? -EIO : 0;
	close(fd);
	if (!err)
		stp_sign_hash(l->buf, e->stored_size, sha);
	if (err || memcmp(sha, e->sha256, sizeof(sha))) {
		stp_log(STP_LOG_ERR, "%s: blocks/%s: not the block its name says (size or "
			"SHA-256)", l->src.name, name);
		return -EIO;
	}
	l->held = i;
	return 0;
}

static int local_pread_locked(struct stp_imgsrc *s, void *buf, size_t len, uint64_t off)
{
	struct local *l = (struct local *)s;
	uint8_t *out = buf;

	if (off > s->size || len > s->size - off)
		return STP_IMGSRC_END;
	while (len) {
		const uint8_t *from;
		uint64_t avail;
		size_t n;

		if (off < STP_SB_SIZE) {
			from = l->idx + stp_pubindex_sb_offset(l->h.block_count) + off;
			avail = STP_SB_SIZE - off;
		} else if (off >= l->h.tail_offset) {
			from = l->idx + stp_pubindex_tail_file_offset(l->h.block_count) +
			       (off - l->h.tail_offset);
			avail = l->h.image_size - off;
		} else {
			struct stp_pubindex_entry e;
			int err = hold(l, block_at(l, off), &e);

			if (err)
				return err;
			from = l->buf + (off - e.offset);
			avail = e.offset + e.stored_size - off;
		}
		n = len < avail ? len : (size_t)avail;
		memcpy(out, from, n);
		out += n;
		off += n;
		len -= n;
	}
	return 0;
}

static int local_pread(struct stp_imgsrc *s, void *buf, size_t len, uint64_t off)
{
	struct local *l = (struct local *)s;
	int err;

	pthread_mutex_lock(&l->lock);
	err = local_pread_locked(s, buf, len, off);
	pthread_mutex_unlock(&l->lock);
	return err;
}

static void local_close(struct stp_imgsrc *s)
{
	struct local *l = (struct local *)s;

	if (l->blocks >= 0)
		close(l->blocks);
	free(l->idx);
	free(l->buf);
	free(s->name);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* The index file read whole (bounded as a mount bounds it) and checked. */
static int load(struct local *l, const char *path, const char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	struct stat st;

	if (fd < 0) {
		*why = "cannot open it";
		return -errno;
	}
	err = fstat(fd, &st) ? -errno : 0;
	if (!err && (uint64_t)st.st_size > STP_PUBLISHED_INDEX_MAX) {
		*why = "an index larger than a mount takes";
		err = -EFBIG;
	}
	l->len = err ? 0 : (size_t)st.st_size;
	if (!err && !(l->idx = malloc(l->len ? l->len : 1)))
		err = -ENOMEM;
	if (!err)
		err = stp_pread_full(fd, l->idx, l->len, 0);
	close(fd);
	if (!err)
		err = stp_pubindex_check(l->idx, l->len, &l->h, NULL, why);
	return err;
}

/* DIR/blocks beside the index at PATH. */
static int open_blocks(const char *path)
{
	char *copy = strdup(path);
	int dir, fd = -1;

	if (!copy)
		return -1;
	dir = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (dir >= 0) {
		fd = openat(dir, "blocks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dir);
	}
	return fd;
}

int stp_localindex_open(const char *path, struct stp_imgsrc **out, const char **why)
{
	struct local *l = calloc(1, sizeof(*l));
	uint64_t max = 1;
	int err;

	*why = "out of memory";
	if (!l)
		return -ENOMEM;
	l->blocks = -1;
	l->held = UINT64_MAX;
	pthread_mutex_init(&l->lock, NULL);
	err = load(l, path, why);
	for (uint64_t i = 0; !err && i < l->h.block_count; i++) {
		struct stp_pubindex_entry e;

		stp_pubindex_entry_at(l->idx, i, &e);
		max = e.stored_size > max ? e.stored_size : max;
	}
	if (!err && (l->blocks = open_blocks(path)) < 0) {
		*why = "no blocks directory beside it";
		err = -ENOENT;
	}
	if (!err && (!(l->buf = malloc(max)) || !(l->src.name = strdup(path))))
		err = -ENOMEM;
	if (err) {
		local_close(&l->src);
		return err;
	}
	l->src.pread = local_pread;
	l->src.close = local_close;
	l->src.size = l->h.image_size;
	l->src.fd = -1;
	*out = &l->src;
	return 0;
}
