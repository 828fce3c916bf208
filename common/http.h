/* SPDX-License-Identifier: MIT */
/*
 * Byte ranges of an image served over HTTP(S), through libcurl: the only HTTP code
 * stipple has. Only stipple-fetcher (mounthelper/mount/fetcher.h) links it: the mount
 * and the readers (mounthelper/mount/fetchsrc.h) both read a URL through that process.
 *
 * stp_http_open asks for the first STP_SB_SIZE bytes and learns the size (Content-Range)
 * and the validator (ETag, else Last-Modified). Every later answer must be a 206 for
 * exactly the range asked, of the same total size, with the same validator (sent as
 * If-Range too, so that a server whose image changed answers 200 and is refused), and
 * carry exactly the bytes asked: a 200 to a range, another range, a short or long body, a
 * changed validator never give bytes. A request fails when it cannot connect within
 * TIMEOUT_MS (5 s at most) or its answer stalls (no byte) for TIMEOUT_MS; failures that
 * may pass (no connection, a reset, a stall, a short body, 5xx, 429, 408) are retried
 * with backoff while TIMEOUT_MS have not passed since the first try; the others fail at
 * once. Connections are kept alive and shared between the
 * threads; HTTP/2 is used where the server offers it over TLS. TLS is verified against
 * the system store, or CA_FILE / CA_BLOB. Proxies come from http_proxy, https_proxy,
 * no_proxy (libcurl's reading of the environment) unless PROXY is set.
 *
 * Returns 0 or a negative errno: -EHOSTUNREACH (no connection), -ETIMEDOUT, -ESTALE (the
 * image at the URL changed), -EPROTO (an answer that breaks the rules above), -ENOENT,
 * -EACCES (404, 401/403), -ENOMEM; WHY (WHYLEN bytes) then says it in words, without the
 * URL. All functions but open and close are thread-safe.
 */
#ifndef STP_HTTP_H
#define STP_HTTP_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "httpurl.h"

struct stp_http_opts {
	const char *ca_file;    /* another CA bundle than the system's, or NULL */
	const void *ca_blob;    /* the CA bundle's bytes (read before confinement), or NULL */
	size_t ca_len;
	const char *proxy;      /* proxy URL ("" for none), or NULL: from the environment */
	unsigned timeout_ms;    /* stall and retry bound of one read (above); 0: the default */
	const char *const *resolve; /* CURLOPT_RESOLVE entries (host:port:addr), NULL-ended */
	const char *user;       /* the server's login and password (netrc), or NULL: sent */
	const char *password;   /* only to the URL's host, never after a redirect elsewhere */
};

#define STP_HTTP_TIMEOUT_DEFAULT_MS 20000u

struct stp_http;

/* Runs libcurl's and OpenSSL's global set-up, once; call it before confinement, and
 * before any other function here. 0 or -ENOMEM. Thread-safe. */
int stp_http_global_init(void);

/* libcurl's built-in CA bundle path (Debian: /etc/ssl/certs/ca-certificates.crt), a new
 * string, or NULL. */
char *stp_http_default_ca(void);

/* Probes URL as said above. *out is the caller's (stp_http_close). */
int stp_http_open(const char *url, const struct stp_http_opts *o, struct stp_http **out,
		  char *why, size_t whylen);
void stp_http_close(struct stp_http *h);

uint64_t stp_http_size(const struct stp_http *h);
/* The validator as the server sent it ("" when it sends none); lives as long as H. */
const char *stp_http_validator(const struct stp_http *h);
const char *stp_http_url(const struct stp_http *h);
/* Body bytes received from the network so far (all threads). */
uint64_t stp_http_fetched(const struct stp_http *h);

/* LEN bytes at OFF into BUF (OFF + LEN within the size, else STP_IMGSRC_END). *TRIES
 * (unless NULL) is set to the requests it sent, retries included: 0 when it sent none. */
int stp_http_get(struct stp_http *h, void *buf, size_t len, uint64_t off, unsigned *tries,
		 char *why, size_t whylen);

/* Called about every STP_HTTP_TICK_MS while a transfer runs (or its caller waits), from
 * the thread that asked: so that it can tell whoever waits on it that it is alive. */
struct stp_http_tick {
	void (*fn)(void *ctx);
	void *ctx;
};
#define STP_HTTP_TICK_MS 5000u

/* A whole object may take the timeout plus its length at this rate (bytes a second), in
 * all, retries included: a server that trickles it slower gets -ETIMEDOUT. */
#define STP_HTTP_WHOLE_FLOOR (16u << 10)

/* The longest LEN bytes may take at STP_HTTP_WHOLE_FLOOR, in nanoseconds (inline: the
 * daemon bounds its fetcher's answers by it without linking libcurl). */
static inline uint64_t stp_http_floor_ns(size_t len)
{
	return (uint64_t)len * 1000000000u / STP_HTTP_WHOLE_FLOOR;
}

/* When a whole object of LEN bytes asked now must have come (stp_now_ns's clock): H's
 * timeout plus LEN at STP_HTTP_WHOLE_FLOOR. */
uint64_t stp_http_whole_deadline(const struct stp_http *h, size_t len);

/* The whole object at URL (on H's server, through H's connections, proxy and
 * credentials rules) into BUF, which it must fill exactly: a 200 of LEN bytes. No range,
 * no validator: for immutable objects named by their hash (a published image's blocks),
 * which the caller checks. Retried as stp_http_get, until DEADLINE_NS
 * (stp_http_whole_deadline; one deadline for every ask of the same object); -ENOENT for
 * a 404, -EPROTO for another status, -EIO for another length, -ETIMEDOUT past it. TICK (NULL: none) is called as said above. NO_CACHE: sent with
 * Cache-Control and Pragma no-cache, so that a proxy asks the origin again (a copy it
 * kept did not match its hash). */
int stp_http_get_whole(struct stp_http *h, const char *url, void *buf, size_t len,
		       uint64_t deadline_ns, const struct stp_http_tick *tick, bool no_cache,
		       unsigned *tries, char *why, size_t whylen);

/* Host and port of URL (the host without IPv6 brackets), for resolving it before
 * confinement. HOST holds HOSTLEN bytes. -EINVAL when URL has none. */
int stp_http_url_host(const char *url, char *host, size_t hostlen, unsigned *port);

/* The login and password netrc file PATH gives URL's host (netrc.h: stp_netrc_find),
 * both NULL when it has no entry for it. 0, -EINVAL (not a regular file of at most
 * STP_NETRC_MAX bytes, or URL has no host), -ENOMEM, or open's -errno. The text read is
 * cleared before it is freed. */
int stp_http_netrc_read(const char *path, const char *url, char **login, char **password);

#endif
