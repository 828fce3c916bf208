/* SPDX-License-Identifier: MIT */
/* Range requests through libcurl (http.h). */
#include "http.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "format.h"
#include "imgsrc.h"
#include "netrc.h"
#include "util.h"

#define POOL_MAX 32u
#define VALIDATOR_MAX 256u
#define BACKOFF_FIRST_MS 100u
#define BACKOFF_MAX_MS 2000u
#define CONNECT_TIMEOUT_MAX_MS 5000u

struct stp_http {
	char *url;
	struct stp_http_opts o;
	struct curl_slist *resolve;
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t lock;           /* the pool */
	CURL *pool[POOL_MAX];           /* idle easy handles */
	unsigned idle;
	uint64_t size;
	char validator[VALIDATOR_MAX];  /* ETag, else Last-Modified; "" without */
	bool weak;                      /* a weak ETag: If-Range cannot carry it */
	uint8_t head[STP_SB_SIZE];      /* the probe's bytes: the superblock's first read */
	size_t head_len;
	uint64_t fetched;               /* atomic */
};

/* One transfer's state, as the callbacks see it. */
struct xfer {
	uint8_t *buf;
	size_t len, got;
	uint64_t off;
	long status;
	bool have_range;
	uint64_t r_first, r_last, r_total; /* Content-Range; r_total UINT64_MAX for '*' */
	char etag[VALIDATOR_MAX], lastmod[VALIDATOR_MAX];
	const char *refused;               /* why the body was refused, else NULL */
	const char *url;                   /* another URL than the handle's, or NULL */
	bool whole;                        /* a GET of a whole object, no range (a 200) */
	const struct stp_http_tick *tick;  /* or NULL */
	uint64_t ticked_ns;                /* when TICK was last called */
	uint64_t deadline_ns;              /* the whole fetch's end, retries included; 0: none */
	bool no_cache;                     /* a cache on the way must ask the origin */
};

/* libcurl's progress callback: TICK every STP_HTTP_TICK_MS. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = ctx;
	uint64_t now = stp_now_ns();

	if (now - x->ticked_ns >= STP_HTTP_TICK_MS * 1000000ull) {
		x->ticked_ns = now;
		x->tick->fn(x->tick->ctx);
	}
	return 0;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = -ENOMEM;

static void init_run(void)
{
	init_rc = curl_global_init(CURL_GLOBAL_ALL) == CURLE_OK ? 0 : -ENOMEM;
}

int stp_http_global_init(void)
{
	pthread_once(&init_once, init_run);
	return init_rc;
}

char *stp_http_default_ca(void)
{
	const char *path = NULL;
	char *copy = NULL;
	CURL *c;

	if (stp_http_global_init() || !(c = curl_easy_init()))
		return NULL;
	if (!curl_easy_getinfo(c, CURLINFO_CAINFO, &path) && path)
		copy = strdup(path);
	curl_easy_cleanup(c);
	return copy;
}

static void share_lock(CURL *c, curl_lock_data data, curl_lock_access a, void *ctx)
{
	struct stp_http *h = ctx;

	pthread_mutex_lock(&h->share_locks[data]);
}

static void share_unlock(CURL *c, curl_lock_data data, void *ctx)
{
	struct stp_http *h = ctx;

	pthread_mutex_unlock(&h->share_locks[data]);
}

/* "Name: value": VALUE (trimmed) into OUT when the line is header NAME. */
static bool header_value(const char *line, size_t n, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);

	if (n <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return false;
	line += nl + 1;
	n -= nl + 1;
	while (n && isspace((unsigned char)*line))
		line++, n--;
	while (n && isspace((unsigned char)line[n - 1]))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, line, n);
	out[n] = '\0';
	return true;
}

/* "bytes FIRST-LAST/TOTAL" */
static void parse_range(struct xfer *x, const char *v)
{
	unsigned long long a, b, t;
	char star;

	if (sscanf(v, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
		x->r_total = t;
	} else if (sscanf(v, "bytes %llu-%llu/%c", &a, &b, &star) == 3 && star == '*') {
		x->r_total = UINT64_MAX;
	} else {
		return;
	}
	x->have_range = a <= b;
	x->r_first = a;
	x->r_last = b;
}

/* Every header line of every answer (redirects, 100 Continue): a status line starts a new
 * answer, so only the final one's headers count. */
static size_t on_header(char *line, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	char v[VALIDATOR_MAX];

	n *= size;
	if (n > 5 && !strncmp(line, "HTTP/", 5)) {
		const char *sp = memchr(line, ' ', n);

		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		x->have_range = false;
		x->etag[0] = x->lastmod[0] = '\0';
	} else if (header_value(line, n, "Content-Range", v, sizeof(v))) {
		parse_range(x, v);
	} else if (!header_value(line, n, "ETag", x->etag, sizeof(x->etag))) {
		header_value(line, n, "Last-Modified", x->lastmod, sizeof(x->lastmod));
	}
	return n;
}

/* The body goes straight into the caller's buffer, and only a 206 for the start asked. */
static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;

	n *= size;
	if (x->whole && x->status != 200)
		return n; /* an error page: the status says it all */
	if (x->status == 200 && !x->whole) {
		x->refused = "answered 200 (the whole file) to a range request: the server or a "
			     "proxy ignores ranges";
		return 0;
	}
	if (x->status != 206 && !x->whole)
		return n; /* an error page: the status says it all */
	if (!x->whole && (!x->have_range || x->r_first != x->off)) {
		x->refused = "answered with another range than the one asked";
		return 0;
	}
	if (n > x->len - x->got) {
		x->refused = "sent more bytes than asked";
		return 0;
	}
	memcpy(x->buf + x->got, p, n);
	x->got += n;
	return n;
}

/* No CURLOPT_PIPEWAIT: with the shared connection cache, a transfer parked waiting for a
 * connection to multiplex on is never timed out nor ticked, and against a server that
 * closes after each answer (HTTP/1.0) it waits for good (review 6 #5). */
static CURL *new_handle(struct stp_http *h)
{
	CURL *c = curl_easy_init();
	bool ok = c;

	if (!c)
		return NULL;
	ok = !curl_easy_setopt(c, CURLOPT_URL, h->url) &&
	     !curl_easy_setopt(c, CURLOPT_SHARE, h->share) &&
	     !curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") &&
	     !curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") &&
	     !curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L) &&
	     !curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L) &&
	     !curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) &&
	     !curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS) &&
	     !curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L) &&
	     !curl_easy_setopt(c, CURLOPT_USERAGENT, "stipple/" STP_VERSION) &&
	     !curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L) &&
	     !curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L) &&
	     !curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) &&
	     !curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	if (ok && h->o.ca_blob) {
		struct curl_blob blob = { (void *)h->o.ca_blob, h->o.ca_len, CURL_BLOB_COPY };

		ok = !curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob) &&
		     !curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
	} else if (ok && h->o.ca_file) {
		ok = !curl_easy_setopt(c, CURLOPT_CAINFO, h->o.ca_file) &&
		     !curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
	}
	if (ok && h->o.proxy)
		ok = !curl_easy_setopt(c, CURLOPT_PROXY, h->o.proxy);
	if (ok && h->resolve)
		ok = !curl_easy_setopt(c, CURLOPT_RESOLVE, h->resolve);
	/* libcurl keeps them for the URL's host: CURLOPT_UNRESTRICTED_AUTH stays off */
	if (ok && h->o.user)
		ok = !curl_easy_setopt(c, CURLOPT_USERNAME, h->o.user) &&
		     !curl_easy_setopt(c, CURLOPT_PASSWORD, h->o.password ? h->o.password : "");
	if (!ok) {
		curl_easy_cleanup(c);
		return NULL;
	}
	return c;
}

static CURL *take_handle(struct stp_http *h)
{
	CURL *c = NULL;

	pthread_mutex_lock(&h->lock);
	if (h->idle)
		c = h->pool[--h->idle];
	pthread_mutex_unlock(&h->lock);
	return c ? c : new_handle(h);
}

static void give_handle(struct stp_http *h, CURL *c, uint64_t got)
{
	__atomic_add_fetch(&h->fetched, got, __ATOMIC_RELAXED);
	pthread_mutex_lock(&h->lock);
	if (h->idle < POOL_MAX) {
		h->pool[h->idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	if (c)
		curl_easy_cleanup(c);
}

static int why_set(char *why, size_t whylen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int why_set(char *why, size_t whylen, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* What a failed transfer means: its errno, and whether trying again may help. */
static int transfer_error(CURLcode rc, const char *errbuf, const struct xfer *x, bool *retry,
			  char *why, size_t whylen)
{
	const char *text = errbuf[0] ? errbuf : curl_easy_strerror(rc);

	*retry = false;
	if (rc == CURLE_WRITE_ERROR && x->refused)
		return why_set(why, whylen, -EPROTO, "%s", x->refused);
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
		*retry = true;
		return why_set(why, whylen, -EHOSTUNREACH, "cannot connect: %s", text);
	case CURLE_OPERATION_TIMEDOUT:
		*retry = true;
		return why_set(why, whylen, -ETIMEDOUT, "timed out: %s", text);
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CONNECT_ERROR:
		return why_set(why, whylen, -EACCES, "TLS: %s", text);
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_TOO_MANY_REDIRECTS:
		return why_set(why, whylen, -EINVAL, "%s", text);
	default:
		*retry = true; /* resets, short bodies, HTTP/2 stream errors */
		return why_set(why, whylen, -EIO, "%s", text);
	}
}

/* A whole object's answer: a 200 of exactly the length asked (its hash is the caller's
 * to check). */
static int whole_error(const struct xfer *x, bool *retry, char *why, size_t whylen)
{
	if (x->status != 200)
		return why_set(why, whylen, -EPROTO, "HTTP status %ld", x->status);
	if (x->got != x->len) {
		*retry = true;
		return why_set(why, whylen, -EIO, "short answer: %zu bytes of %zu", x->got, x->len);
	}
	return 0;
}

/* What a complete answer means: 0 when it is exactly what was asked. */
static int answer_error(const struct stp_http *h, const struct xfer *x, bool probe, bool *retry,
			char *why, size_t whylen)
{
	const char *v = x->etag[0] ? x->etag : x->lastmod;
	size_t want;

	*retry = false;
	if (x->status >= 500 || x->status == 429 || x->status == 408) {
		*retry = true;
		return why_set(why, whylen, -EIO, "HTTP status %ld", x->status);
	}
	if (x->status == 404 || x->status == 410)
		return why_set(why, whylen, -ENOENT, "HTTP status %ld: not found", x->status);
	if (x->status == 401 || x->status == 403 || x->status == 407)
		return why_set(why, whylen, -EACCES, "HTTP status %ld: refused", x->status);
	if (x->whole)
		return whole_error(x, retry, why, whylen);
	if (x->status == 200 && !x->len)
		return 0; /* nothing asked */
	if (x->status == 200)
		return why_set(why, whylen, -EPROTO, "answered 200 (the whole file) to a range "
			       "request: the server or a proxy ignores ranges");
	if (x->status != 206)
		return why_set(why, whylen, -EPROTO, "HTTP status %ld to a range request", x->status);
	if (!x->have_range || x->r_total == UINT64_MAX)
		return why_set(why, whylen, -EPROTO, "a 206 without the range and size it holds");
	if (!probe && x->r_total != h->size)
		return why_set(why, whylen, -ESTALE, "the file changed: %llu bytes, was %llu",
			       (unsigned long long)x->r_total, (unsigned long long)h->size);
	if (!probe && h->validator[0] && strcmp(v, h->validator))
		return why_set(why, whylen, -ESTALE, "the file changed: validator %s, was %s",
			       v[0] ? v : "(none)", h->validator);
	/* the probe asks for the superblock of a file that may be shorter */
	want = probe && x->r_total < x->len ? (size_t)x->r_total : x->len;
	if (x->r_first != x->off || x->r_last != x->off + want - 1)
		return why_set(why, whylen, -EPROTO, "answered with bytes %llu-%llu, not %llu-%llu",
			       (unsigned long long)x->r_first, (unsigned long long)x->r_last,
			       (unsigned long long)x->off, (unsigned long long)(x->off + want - 1));
	if (x->got != want) {
		*retry = true;
		return why_set(why, whylen, -EIO, "short answer: %zu bytes of %zu", x->got, want);
	}
	return 0;
}

/* What is left of X's deadline in milliseconds (at least 1), or 0 without one: libcurl
 * aborts a transfer that trickles on past it, which its low-speed check does not. */
static long deadline_ms(const struct xfer *x)
{
	uint64_t now = stp_now_ns();

	if (!x->deadline_ns)
		return 0;
	return now >= x->deadline_ns ? 1 : (long)((x->deadline_ns - now) / 1000000u) + 1;
}

/* One request for LEN bytes at OFF: connecting may take at most MS milliseconds (and 5
 * s), and the answer may stall (no byte) for at most the timeout. */
static int get_once(struct stp_http *h, struct xfer *x, bool probe, long ms, bool *retry,
		    char *why, size_t whylen)
{
	char range[64], errbuf[CURL_ERROR_SIZE] = "", ifrange[VALIDATOR_MAX + 16];
	struct curl_slist *hdrs = NULL;
	CURL *c = take_handle(h);
	CURLcode rc;
	int err;

	*retry = false;
	if (!c)
		return why_set(why, whylen, -ENOMEM, "out of memory");
	snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, x->off, x->off + x->len - 1);
	if (!probe && !x->whole && h->validator[0] && !h->weak) {
		snprintf(ifrange, sizeof(ifrange), "If-Range: %s", h->validator);
		hdrs = curl_slist_append(NULL, ifrange);
	}
	if (x->no_cache) {
		hdrs = curl_slist_append(hdrs, "Cache-Control: no-cache");
		hdrs = curl_slist_append(hdrs, "Pragma: no-cache");
	}
	curl_easy_setopt(c, CURLOPT_URL, x->url ? x->url : h->url);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, x->tick ? 0L : 1L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, x->tick ? on_progress : NULL);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(c, CURLOPT_RANGE, x->whole ? NULL : range);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)(h->o.timeout_ms + 999) / 1000);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, deadline_ms(x));
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 ms < CONNECT_TIMEOUT_MAX_MS ? ms : (long)CONNECT_TIMEOUT_MAX_MS);
	rc = curl_easy_perform(c);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK)
		err = transfer_error(rc, errbuf, x, retry, why, whylen);
	else
		err = answer_error(h, x, probe, retry, why, whylen);
	give_handle(h, c, x->got);
	return err;
}

/* Retries what may pass, with doubling pauses, while the timeout since the first try
 * has not passed. */
static int get_retrying(struct stp_http *h, struct xfer *x, bool probe, unsigned *tries,
			char *why, size_t whylen)
{
	uint64_t start = stp_now_ns(), limit = (uint64_t)h->o.timeout_ms * 1000000u;
	unsigned pause = BACKOFF_FIRST_MS;

	for (;;) {
		uint64_t spent = stp_now_ns() - start;
		long ms = spent >= limit ? 1 : (long)((limit - spent) / 1000000u) + 1;
		bool retry;
		int err;

		x->got = 0;
		x->status = 0;
		x->have_range = false;
		x->refused = NULL;
		err = get_once(h, x, probe, ms, &retry, why, whylen);
		if (tries)
			++*tries;
		spent = stp_now_ns() - start;
		if (!err || !retry || spent + (uint64_t)pause * 1000000u >= limit ||
		    (x->deadline_ns && stp_now_ns() + (uint64_t)pause * 1000000u >= x->deadline_ns))
			return err;
		nanosleep(&(struct timespec){ pause / 1000, (long)(pause % 1000) * 1000000L }, NULL);
		pause = pause * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : pause * 2;
	}
}

int stp_http_get(struct stp_http *h, void *buf, size_t len, uint64_t off, unsigned *tries,
		 char *why, size_t whylen)
{
	struct xfer x = { .buf = buf, .len = len, .off = off };

	if (tries)
		*tries = 0;
	if (!len)
		return 0;
	if (off > h->size || len > h->size - off)
		return why_set(why, whylen, STP_IMGSRC_END, "bytes %llu to %llu lie past the end (%llu)",
			       (unsigned long long)off, (unsigned long long)(off + len),
			       (unsigned long long)h->size);
	if (off + len <= h->head_len) {
		memcpy(buf, h->head + off, len);
		return 0;
	}
	return get_retrying(h, &x, false, tries, why, whylen);
}

uint64_t stp_http_whole_deadline(const struct stp_http *h, size_t len)
{
	return stp_now_ns() + (uint64_t)h->o.timeout_ms * 1000000u + stp_http_floor_ns(len);
}

int stp_http_get_whole(struct stp_http *h, const char *url, void *buf, size_t len,
		       uint64_t deadline_ns, const struct stp_http_tick *tick, bool no_cache,
		       unsigned *tries, char *why, size_t whylen)
{
	struct xfer x = { .buf = buf, .len = len, .url = url, .whole = true, .tick = tick,
			  .ticked_ns = stp_now_ns(), .no_cache = no_cache,
			  .deadline_ns = deadline_ns };

	if (tries)
		*tries = 0;
	return get_retrying(h, &x, false, tries, why, whylen);
}

static int probe(struct stp_http *h, char *why, size_t whylen)
{
	struct xfer x = { .buf = h->head, .len = sizeof(h->head), .off = 0 };
	int err = get_retrying(h, &x, true, NULL, why, whylen);

	if (err)
		return err;
	h->size = x.r_total;
	h->head_len = x.got;
	h->weak = !strncmp(x.etag, "W/", 2);
	snprintf(h->validator, sizeof(h->validator), "%s", x.etag[0] ? x.etag : x.lastmod);
	return 0;
}

static int build_resolve(struct stp_http *h)
{
	for (const char *const *r = h->o.resolve; r && *r; r++) {
		struct curl_slist *l = curl_slist_append(h->resolve, *r);

		if (!l)
			return -ENOMEM;
		h->resolve = l;
	}
	h->o.resolve = NULL;
	return 0;
}

static int make_share(struct stp_http *h)
{
	h->share = curl_share_init();
	if (!h->share)
		return -ENOMEM;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&h->share_locks[i], NULL);
	if (curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock) ||
	    curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
	    curl_share_setopt(h->share, CURLSHOPT_USERDATA, h) ||
	    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
	    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) ||
	    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT))
		return -ENOMEM;
	return 0;
}

int stp_http_open(const char *url, const struct stp_http_opts *o, struct stp_http **out,
		  char *why, size_t whylen)
{
	struct stp_http *h = calloc(1, sizeof(*h));
	int err = h ? 0 : -ENOMEM;

	if (!err) {
		pthread_mutex_init(&h->lock, NULL);
		h->o = *o;
		if (!h->o.timeout_ms)
			h->o.timeout_ms = STP_HTTP_TIMEOUT_DEFAULT_MS;
		h->url = strdup(url);
		err = h->url ? build_resolve(h) : -ENOMEM;
	}
	if (!err)
		err = make_share(h);
	if (err) {
		stp_http_close(h);
		return why_set(why, whylen, err, "out of memory");
	}
	err = probe(h, why, whylen);
	if (err) {
		stp_http_close(h);
		return err;
	}
	*out = h;
	return 0;
}

void stp_http_close(struct stp_http *h)
{
	if (!h)
		return;
	while (h->idle)
		curl_easy_cleanup(h->pool[--h->idle]);
	if (h->share) {
		curl_share_cleanup(h->share);
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_destroy(&h->share_locks[i]);
	}
	curl_slist_free_all(h->resolve);
	pthread_mutex_destroy(&h->lock);
	free(h->url);
	free(h);
}

uint64_t stp_http_size(const struct stp_http *h) { return h->size; }
const char *stp_http_validator(const struct stp_http *h) { return h->validator; }
const char *stp_http_url(const struct stp_http *h) { return h->url; }

uint64_t stp_http_fetched(const struct stp_http *h)
{
	return __atomic_load_n(&h->fetched, __ATOMIC_RELAXED);
}

int stp_http_url_host(const char *url, char *host, size_t hostlen, unsigned *port)
{
	char *h = NULL, *p = NULL;
	int err = -EINVAL;
	CURLU *u;

	if (stp_http_global_init())
		return -ENOMEM;
	if (!(u = curl_url()))
		return -ENOMEM;
	if (!curl_url_set(u, CURLUPART_URL, url, 0) &&
	    !curl_url_get(u, CURLUPART_HOST, &h, 0) &&
	    !curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT)) {
		size_t n = strlen(h);
		const char *s = h;

		if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
			s++, n -= 2;
		if (n < hostlen) {
			memcpy(host, s, n);
			host[n] = '\0';
			*port = (unsigned)strtoul(p, NULL, 10);
			err = 0;
		}
	}
	curl_free(h);
	curl_free(p);
	curl_url_cleanup(u);
	return err;
}

int stp_http_netrc_read(const char *path, const char *url, char **login, char **password)
{
	char host[256], *text;
	unsigned port;
	size_t len;
	int err = stp_netrc_load(path, &text, &len);

	*login = *password = NULL;
	if (err)
		return err;
	err = stp_http_url_host(url, host, sizeof(host), &port) ? -EINVAL :
	      stp_netrc_find(text, len, host, login, password);
	stp_netrc_discard(text, len);
	/* a file with no entry for the host leaves them unset, as with curl */
	return err == -ENOENT ? 0 : err;
}
