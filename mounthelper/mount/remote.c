/* SPDX-License-Identifier: MIT */
/* Byte ranges from the fetcher (remote.h). */
#include "remote.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "diskcache.h"
#include "fetcher.h"
#include "http.h"
#include "imgsrc.h"
#include "log.h"
#include "readfail.h"
#include "util.h"

struct remote {
	struct stp_imgsrc src;
	pthread_mutex_t lock;
	pthread_cond_t freed;
	int fds[STP_FETCH_CHANS_MAX];
	bool busy[STP_FETCH_CHANS_MAX];
	uint64_t given[STP_FETCH_CHANS_MAX]; /* when each was last given back: GIVES then */
	uint64_t gives;
	unsigned n, open;
	bool own;
	uint64_t frame_ns; /* the channels' receive timeout: the longest silence (0: none) */
	struct stp_diskcache *cache;
	struct stp_imgsrc_stats st; /* under LOCK */
	bool no_deltas;    /* the fetcher said the image has none: not asked again (LOCK) */
};

/* The free channel given back longest ago, waiting for one; -1 when none is left. The
 * fetcher's end of a channel may still be at work after its answer (a rebuilt content
 * is written into the store once sent: published.h), so the next read goes to another
 * channel where there is one. */
static int take(struct remote *r)
{
	int i = -1;

	pthread_mutex_lock(&r->lock);
	while (r->open) {
		for (unsigned k = 0; k < r->n; k++)
			if (r->fds[k] >= 0 && !r->busy[k] && (i < 0 || r->given[k] < r->given[i]))
				i = (int)k;
		if (i >= 0)
			break;
		pthread_cond_wait(&r->freed, &r->lock);
	}
	if (i >= 0)
		r->busy[i] = true;
	pthread_mutex_unlock(&r->lock);
	return i;
}

/* What one read cost the network, as the fetcher tells it (it is believed: these are
 * counts for the status, nothing more). */
struct tally {
	uint64_t requests, retries, bytes;
	uint64_t stored; /* bytes a published image's store gave (fetcher.h) */
};

/* Gives channel I back after a read that FAILED or not, for which the fetcher sent
 * C->bytes from the network in C->requests; BROKEN: its stream is out of step, close it. */
static void give(struct remote *r, int i, bool broken, bool failed, const struct tally *c)
{
	pthread_mutex_lock(&r->lock);
	r->busy[i] = false;
	r->given[i] = ++r->gives;
	r->st.bytes += failed ? 0 : c->bytes;
	if (c->stored && !failed) { /* a published image's store: its disk cache */
		r->st.disk_cache = 1;
		r->st.cache_hits++;
		r->st.cache_bytes += c->stored;
	}
	r->st.failures += failed;
	r->st.requests += c->requests;
	r->st.retries += c->retries;
	if (broken) {
		close(r->fds[i]);
		r->fds[i] = -1;
		r->open--;
	}
	pthread_cond_broadcast(&r->freed);
	pthread_mutex_unlock(&r->lock);
}

/* Waits until FD has bytes or DEADLINE (0: none, the channel's receive timeout alone)
 * has passed: 0 or -ETIMEDOUT. */
static int wait_readable(int fd, uint64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t now;
	int ready;

	do {
		if (!deadline)
			return 0;
		now = stp_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		ready = poll(&pfd, 1, (int)((deadline - now + 999999) / 1000000));
	} while (ready < 0 && errno == EINTR);
	return ready == 0 ? -ETIMEDOUT : 0;
}

/* LEN bytes from FD, each read(2) started before DEADLINE: a frame trickled a byte at a
 * time stops there, not at the end of its bytes. */
static int read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		int err = wait_readable(fd, deadline);
		ssize_t n;

		if (err)
			return err;
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* When a request of LEN bytes made now must be answered (0: never), whatever frames the
 * fetcher sends meanwhile: a fetcher turned hostile could otherwise hold the read for
 * good with keepalive frames, or with one byte per frame (fetcher.h). The bound is the
 * channel's silence bound plus four times the longest a fetcher of its own gives one
 * block of LEN bytes (STP_HTTP_WHOLE_FLOOR): twice for the fetch past the caches, twice
 * for a read that waited for another's fetch of the same block. */
static uint64_t request_deadline(const struct remote *r, size_t len)
{
	if (!r->frame_ns)
		return 0;
	return stp_now_ns() + r->frame_ns + 4 * stp_http_floor_ns(len);
}

/* One request on FD: 0, a negative errno with WHY set (the fetcher's answer, the stream
 * still in step), or *BROKEN; *C counts what it cost. */
static int ask(struct remote *r, int fd, uint8_t *buf, size_t len, uint64_t off, bool *broken,
	       struct tally *c, char *why, size_t whylen)
{
	struct stp_fetch_req req = { off, len };
	uint64_t deadline = request_deadline(r, len);
	struct stp_fetch_frame fr;
	size_t got = 0;
	int err = stp_write_full(fd, &req, sizeof(req));

	*broken = true;
	if (err) {
		snprintf(why, whylen, "the fetcher is gone: %s", stp_strerror(err));
		return err;
	}
	while (got < len) {
		err = read_full(fd, &fr, sizeof(fr), deadline);
		if (!err && deadline && stp_now_ns() > deadline)
			err = -ETIMEDOUT; /* the stream is dropped: out of step from here */
		if (!err && !fr.err && !fr.len && !fr.tries)
			continue; /* the fetcher is still at it (fetcher.h) */
		if (!err && (fr.tries & STP_FETCH_STORE)) {
			c->stored += fr.err ? 0 : fr.len;
		} else if (!err && fr.tries) {
			uint32_t sent = fr.tries & ~STP_FETCH_NETWORK;

			c->requests += sent;
			c->retries += sent ? sent - 1 : 0;
			c->bytes += fr.err ? 0 : fr.len; /* 0 tries: the probe's bytes, kept */
		}
		if (!err && fr.err == 0 && (!fr.len || fr.len > len - got))
			err = -EPROTO;
		if (!err && fr.err) {
			size_t n = fr.len < whylen - 1 ? fr.len : whylen - 1;
			char rest[STP_FETCH_WHY_MAX];

			err = fr.len < STP_FETCH_WHY_MAX ? read_full(fd, why, n, deadline) : -EPROTO;
			if (!err && fr.len > n)
				err = read_full(fd, rest, fr.len - n, deadline);
			if (!err) {
				why[n] = '\0';
				*broken = false;
				return fr.err < 0 && fr.err > -4096 ? fr.err : -EIO;
			}
		}
		if (!err)
			err = read_full(fd, buf + got, fr.len, deadline);
		if (err) {
			snprintf(why, whylen, "the fetcher did not answer: %s",
				 err == -EAGAIN ? "timed out" :
				 err == -ETIMEDOUT ? "past the read's deadline" : stp_strerror(err));
			return err;
		}
		got += fr.len;
	}
	*broken = false;
	return 0;
}

static int remote_pread(struct stp_imgsrc *s, void *buf, size_t len, uint64_t off)
{
	struct remote *r = (struct remote *)s;
	char why[STP_FETCH_WHY_MAX] = "";
	struct tally c = { 0, 0, 0, 0 };
	bool broken;
	int i, err;

	if (off > s->size || len > s->size - off)
		return STP_IMGSRC_END; /* the image reader says what lies past it */
	stp_readfail_set_cause(NULL); /* a failure's cause is this read's, not an earlier one's */
	if (r->cache && !stp_diskcache_get(r->cache, buf, len, off)) {
		pthread_mutex_lock(&r->lock);
		r->st.cache_hits++;
		r->st.cache_bytes += len;
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	i = take(r);
	if (i < 0) {
		pthread_mutex_lock(&r->lock);
		r->st.failures++;
		pthread_mutex_unlock(&r->lock);
		stp_log(STP_LOG_ERR, "%s: the fetcher is gone", s->name);
		return -EIO;
	}
	err = ask(r, r->fds[i], buf, len, off, &broken, &c, why, sizeof(why));
	give(r, i, broken, err != 0, &c);
	if (err) {
		stp_log(STP_LOG_ERR, "%s: %s", s->name, why);
		stp_readfail_set_cause(why); /* syslog's line of the failed read says why */
		return -EIO;
	}
	if (r->cache)
		stp_diskcache_put(r->cache, buf, len, off);
	return 0;
}

/* A block's content rebuilt by the fetcher (fetcher.h): -ENOENT when it has none. */
static int remote_content(struct stp_imgsrc *s, uint64_t block, void *buf, size_t len)
{
	struct remote *r = (struct remote *)s;
	char why[STP_FETCH_WHY_MAX] = "";
	struct tally c = { 0, 0, 0, 0 };
	bool broken, none;
	int i, err;

	pthread_mutex_lock(&r->lock);
	none = r->no_deltas;
	pthread_mutex_unlock(&r->lock);
	if (none || (i = take(r)) < 0)
		return -ENOENT; /* the read of the block says if the fetcher is gone */
	err = ask(r, r->fds[i], buf, len, STP_FETCH_CONTENT | block, &broken, &c, why,
		  sizeof(why));
	give(r, i, broken, false, &c);
	if (err == -ENOSYS) {
		pthread_mutex_lock(&r->lock);
		r->no_deltas = true;
		pthread_mutex_unlock(&r->lock);
	} else if (err && err != -ENOENT)
		stp_log(STP_LOG_WARN, "%s: %s; reading the block instead", s->name, why);
	return err ? -ENOENT : 0;
}

static void remote_stats(struct stp_imgsrc *s, struct stp_imgsrc_stats *st)
{
	struct remote *r = (struct remote *)s;

	pthread_mutex_lock(&r->lock);
	*st = r->st;
	pthread_mutex_unlock(&r->lock);
	st->cache_rejected = r->cache ? stp_diskcache_rejected(r->cache) : 0;
}

static void remote_close(struct stp_imgsrc *s)
{
	struct remote *r = (struct remote *)s;

	for (unsigned k = 0; r->own && k < r->n; k++)
		if (r->fds[k] >= 0)
			close(r->fds[k]);
	stp_diskcache_free(r->cache);
	pthread_cond_destroy(&r->freed);
	pthread_mutex_destroy(&r->lock);
	free(s->name);
	free(r);
}

int stp_remote_open(const int *fds, unsigned n, uint64_t size, unsigned silence_s,
		    const char *name, bool own, struct stp_imgsrc **out)
{
	struct remote *r = calloc(1, sizeof(*r));

	if (!r || !(r->src.name = strdup(name))) {
		free(r);
		return -ENOMEM;
	}
	if (n > STP_FETCH_CHANS_MAX)
		n = STP_FETCH_CHANS_MAX;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->freed, NULL);
	for (unsigned k = 0; k < n; k++) {
		r->fds[k] = fds[k];
		r->open += fds[k] >= 0;
	}
	r->frame_ns = silence_s * 1000000000ull;
	r->n = n;
	r->own = own;
	r->src.pread = remote_pread;
	r->src.content = remote_content;
	r->src.close = remote_close;
	r->src.stats = remote_stats;
	r->src.size = size;
	r->src.fd = -1;
	*out = &r->src;
	return 0;
}

void stp_remote_halt(struct stp_imgsrc *s)
{
	struct remote *r = (struct remote *)s;

	pthread_mutex_lock(&r->lock); /* give() closes a broken channel under it */
	for (unsigned k = 0; k < r->n; k++)
		if (r->fds[k] >= 0)
			shutdown(r->fds[k], SHUT_RDWR);
	pthread_mutex_unlock(&r->lock);
}

void stp_remote_set_cache(struct stp_imgsrc *s, struct stp_diskcache *cache)
{
	struct remote *r = (struct remote *)s;

	r->cache = cache;
	r->st.disk_cache = cache != NULL;
}
