/* SPDX-License-Identifier: MIT */
/*
 * stipple-fetcher: the fetcher of a URL mount (fetcher.h), a program of its own that the
 * monitor runs, and a reader of a URL (fetchsrc.h), so that libcurl and what it links
 * are mapped in this process alone.
 * It finds its control socket on STP_MONITOR_FD, takes its options and channels from the
 * SETUP message (setup.h), and answers with HELLO. Its argument only names the URL for ps.
 *
 * Exit status: 0 once its channels closed, 1 when it failed (said in HELLO), 2 when run
 * by hand.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetcher.h"
#include "hash.h"
#include "http.h"
#include "log.h"
#include "monproto.h"
#include "mountopts.h"
#include "progpath.h"
#include "published.h"
#include "filters.h"
#include "sandbox.h"
#include "setup.h"
#include "util.h"

#define CA_MAX (16u << 20)
/* The fetcher's RLIMIT_DATA until it knows what it serves: its fixed part
 * (stp_fetcher_data_fixed), the largest index and block buffers; a server that makes
 * libcurl grow past it meets a failed allocation, not the host's OOM killer. Lowered
 * once the index is read (lower_data), which the monitor's budget reads back. */
#define FETCHER_DATA_MAX (stp_fetcher_data_fixed(STP_FETCH_CHANS_MAX) + \
			  stp_fetcher_data_variable_max())
/* Descriptors kept for other uses than store files. */
#define FDS_SPARE 64u
#define RESOLVE_MAX 4u

/* The CA bundle, read while files can still be opened: ca=, else libcurl's default. */
static void *read_ca(const struct stp_mount_opts *o, size_t *len, char *why, size_t whylen)
{
	char *def = o->ca_file ? NULL : stp_http_default_ca();
	const char *path = o->ca_file ? o->ca_file : def;
	void *blob = NULL;
	struct stat st;
	int fd;

	/* a device a link leads to is not opened (util.h) */
	fd = path ? stp_open_if(path, O_RDONLY | O_NOCTTY, stp_node_is_regular) : -1;
	if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size <= CA_MAX &&
	    (blob = malloc((size_t)st.st_size + 1)) &&
	    stp_pread_full(fd, blob, (size_t)st.st_size, 0) == 0) {
		*len = (size_t)st.st_size;
	} else {
		if (o->ca_file)
			snprintf(why, whylen, "ca=%s: %s", o->ca_file,
				 fd < 0 && fd != -EINVAL ? stp_strerror(fd)
							 : "not a readable file of at most 16 MiB");
		free(blob);
		blob = NULL;
	}
	if (fd >= 0)
		close(fd);
	free(def);
	return blob;
}

/* netrc=: the login and password for the URL's host, read while files can still be
 * opened, so that the confined fetcher never needs the path and no secret is ever on a
 * command line. */
static int read_netrc(const struct stp_mount_opts *o, struct stp_http_opts *ho, char *why,
		      size_t whylen)
{
	char *login = NULL, *password = NULL;
	int err;

	if (!o->netrc_file)
		return 0;
	err = stp_http_netrc_read(o->netrc_file, o->image, &login, &password);
	if (err)
		snprintf(why, whylen, "netrc=%s: %s", o->netrc_file, err == -EINVAL ?
			 "not a readable file of at most 64 KiB" : stp_strerror(err));
	ho->user = login;
	ho->password = password;
	return err;
}

/* "host:port:addr,addr" for URL's host, from getaddrinfo now: confined, the fetcher
 * cannot read /etc/hosts or resolv.conf. NULL when it does not resolve (libcurl says so). */
static char *resolve_entry(const char *url)
{
	char host[256], addr[INET6_ADDRSTRLEN + 2], *out = NULL;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *a;
	unsigned port;
	size_t len;

	if (!url || !*url || stp_http_url_host(url, host, sizeof(host), &port) ||
	    getaddrinfo(host, NULL, &hints, &res))
		return NULL;
	if (asprintf(&out, "%s:%u:", host, port) < 0)
		out = NULL;
	for (a = res; out && a; a = a->ai_next) {
		const void *ip = a->ai_family == AF_INET6 ?
			(const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr :
			(const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr;
		char *more;

		if (!inet_ntop(a->ai_family, ip, addr + 1, sizeof(addr) - 2))
			continue;
		len = strlen(out);
		if (a->ai_family == AF_INET6) {
			addr[0] = '[';
			strcat(addr, "]");
		}
		if (asprintf(&more, "%s%s%s", out, out[len - 1] == ':' ? "" : ",",
			     a->ai_family == AF_INET6 ? addr : addr + 1) < 0)
			more = NULL;
		free(out);
		out = more;
	}
	freeaddrinfo(res);
	return out;
}

/* The proxy libcurl would use for URL, as far as a name to resolve goes. */
static const char *proxy_for(const struct stp_mount_opts *o)
{
	const char *p;

	if (o->proxy)
		return o->proxy;
	if (!strncasecmp(o->image, "https:", 6) &&
	    ((p = getenv("https_proxy")) || (p = getenv("HTTPS_PROXY"))))
		return p;
	if (!strncasecmp(o->image, "http:", 5) && (p = getenv("http_proxy")))
		return p;
	return (p = getenv("all_proxy")) ? p : getenv("ALL_PROXY");
}

struct server {
	struct stp_http *h;
	struct stp_published *pub; /* a published image, or NULL */
	int fd;
};

static int send_frame(int fd, int32_t err, const void *p, uint32_t len, unsigned tries)
{
	struct stp_fetch_frame fr = { err, len, tries };
	int rc = stp_write_full(fd, &fr, sizeof(fr));

	return rc ? rc : stp_write_full(fd, p, len);
}

/* While a block is fetched or waited for: an empty frame, so that the daemon's receive
 * timeout does not take a slow block for a dead fetcher (fetcher.h). */
static void keepalive(void *ctx)
{
	struct server *s = ctx;

	send_frame(s->fd, 0, NULL, 0, 0);
}

/* A content in frames to the daemon (a sink's DELIVER, published.h), counted for the
 * status as what it cost: its first NET bytes as the network's (its requests on the
 * first frame), the rest as the store's (a kept content, or bases read from there). */
static int send_content(void *ctx, const void *content, uint64_t len, unsigned tries,
			uint64_t net)
{
	const struct server *s = ctx;
	const uint8_t *buf = content;
	uint64_t n;
	int rc = 0;

	if (net > len)
		net = len;
	for (uint64_t at = 0; !rc && at < len; at += n) {
		uint64_t end = at < net ? net : len; /* no frame holds bytes of both kinds */

		n = end - at < STP_FETCH_PIECE ? end - at : STP_FETCH_PIECE;
		rc = send_frame(s->fd, 0, buf + at, (uint32_t)n,
				at >= net ? STP_FETCH_STORE : at ? STP_FETCH_NETWORK : tries);
	}
	return rc;
}

/* The content of a block, rebuilt from its delta (fetcher.h), in frames; -ENOENT when
 * it cannot be: the daemon then asks for the block. */
static int serve_content(struct server *s, const struct stp_fetch_req *req)
{
	struct stp_http_tick tick = { keepalive, s };
	struct stp_published_sink sink = { send_content, s, 0 };
	uint64_t block = req->off & ~STP_FETCH_CONTENT;
	char why[STP_FETCH_WHY_MAX];
	uint8_t *buf = NULL;
	unsigned tries = 0;
	int err = -ENOENT;

	snprintf(why, sizeof(why), "no delta");
	if (!s->pub || !stp_published_has_deltas(s->pub))
		err = -ENOSYS; /* none for any block: the daemon asks no more */
	else if ((buf = stp_published_content_buffer(s->pub, req->len)))
		err = stp_published_content(s->pub, block, buf, req->len, &tick, &sink, &tries,
					    why, sizeof(why));
	if (buf)
		stp_published_content_done(s->pub, buf);
	if (err)
		return send_frame(s->fd, err, why, (uint32_t)strlen(why), tries);
	return sink.rc;
}

/* One request of a published image: part by part (a block fetched whole once, however
 * many frames it takes). */
static int serve_published(struct server *s, const struct stp_fetch_req *req)
{
	struct stp_http_tick tick = { keepalive, s };
	char why[STP_FETCH_WHY_MAX];

	if (req->off & STP_FETCH_CONTENT)
		return serve_content(s, req);
	for (uint64_t done = 0; done < req->len;) {
		struct stp_published_part part;
		int err = stp_published_get(s->pub, req->off + done, req->len - done, &tick, &part,
					    why, sizeof(why)), rc = 0;

		if (err)
			return send_frame(s->fd, err, why, (uint32_t)strlen(why), part.tries ? part.tries : 1);
		for (uint64_t at = 0; !rc && at < part.len; at += STP_FETCH_PIECE) {
			uint64_t n = part.len - at < STP_FETCH_PIECE ? part.len - at : STP_FETCH_PIECE;

			/* a block's requests count once, its bytes in every frame */
			uint32_t tries = part.stored ? STP_FETCH_STORE :
					 !part.tries ? 0 : at ? STP_FETCH_NETWORK : part.tries;

			rc = send_frame(s->fd, 0, part.ptr + at, (uint32_t)n, tries);
		}
		stp_published_put(s->pub, &part);
		if (rc)
			return rc;
		done += part.len;
	}
	return 0;
}

/* Serves one channel until the daemon closes it (or the stream breaks). */
static void serve_channel(struct server *s)
{
	uint8_t *buf = s->pub ? NULL : malloc(STP_FETCH_PIECE);

	if (s->pub) {
		struct stp_fetch_req req;

		while (recv(s->fd, &req, sizeof(req), MSG_WAITALL) == (ssize_t)sizeof(req) &&
		       !serve_published(s, &req))
			;
		return;
	}
	struct stp_fetch_req req;
	char why[STP_FETCH_WHY_MAX];

	while (buf) {
		ssize_t n = recv(s->fd, &req, sizeof(req), MSG_WAITALL);
		int rc = 0;

		if (n != (ssize_t)sizeof(req))
			break;
		if (req.off & STP_FETCH_CONTENT) { /* a one-file image has no delta */
			if (serve_content(s, &req))
				break;
			continue;
		}
		for (uint64_t done = 0; !rc && done < req.len;) {
			size_t piece = req.len - done < STP_FETCH_PIECE ? req.len - done : STP_FETCH_PIECE;
			unsigned tries;
			int err = stp_http_get(s->h, buf, piece, req.off + done, &tries, why,
					       sizeof(why));

			if (err) {
				rc = send_frame(s->fd, err, why, (uint32_t)strlen(why), tries);
				break;
			}
			rc = send_frame(s->fd, 0, buf, (uint32_t)piece, tries);
			done += piece;
		}
		if (rc)
			break;
	}
	free(buf);
}

/* A channel's thread. When it stops serving, for whatever reason (no memory for its
 * buffer, a broken stream), it shuts the channel both ways: a read the daemon waits for
 * on it fails at once rather than at its deadline, and the main thread
 * (wait_daemon_gone) counts it closed. The descriptor itself stays until _exit. */
static void *serve(void *arg)
{
	struct server *s = arg;

	serve_channel(s);
	shutdown(s->fd, SHUT_RDWR);
	return NULL;
}

/* Returns once the daemon has closed every one of the N channels (those not STARTED
 * count as closed): the fetcher ends with its daemon, whatever a
 * transfer stuck in libcurl still waits for, and its store's locks and room with it. */
static void wait_daemon_gone(const int *chans, const bool *started, unsigned n)
{
	struct pollfd pfd[STP_FETCH_CHANS_MAX];
	unsigned open = 0;

	for (unsigned i = 0; i < n; i++) {
		pfd[i] = (struct pollfd){ .fd = started[i] ? chans[i] : -1, .events = POLLRDHUP };
		open += started[i];
	}
	while (open) {
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (unsigned i = 0; i < n; i++)
			if (pfd[i].fd >= 0 && (pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
				pfd[i].fd = -1;
				open--;
			}
	}
}

static void quiet(enum stp_log_level level, const char *msg)
{
}

/* The bytes it may write into the store, once the monitor trimmed it (fetcher.h). */
static void take_room(struct stp_published *pub, int ctl, int64_t deadline)
{
	struct stp_fetch_room room;
	uint8_t buf[STP_MSG_MAX];
	uint32_t type;
	size_t len;

	shutdown(ctl, SHUT_WR); /* no more batches */
	if (!stp_msg_recv(ctl, deadline, &type, buf, sizeof(buf), &len) &&
	    type == STP_MSG_ROOM && len == sizeof(room)) {
		memcpy(&room, buf, sizeof(room));
		stp_published_set_store_room(pub, room.bytes);
	}
}

/* The store (fetcher.h): each batch of hashes offered, the descriptors taken, until the
 * monitor says stop or closes the socket, or AT_MOST blocks were offered. The monitor
 * first checks the image: the wait for its answer is the mount's, not the batch's. */
static void take_store(struct stp_published *pub, int ctl, uint64_t at_most)
{
	uint64_t n = stp_published_slots(pub), bases = stp_published_base_slots(pub);
	int64_t deadline = (int64_t)stp_now_ns() + 3 * STP_MOUNT_DEADLINE_MS * 1000000ll;

	if (n > at_most)
		n = at_most;
	for (uint64_t first = 0; first < n;) {
		struct stp_fetch_blocks b = { .first = first };
		struct stp_fetch_store st;
		uint8_t buf[STP_MSG_MAX];
		int fds[STP_FETCH_BATCH];
		unsigned nfds = 0;
		uint32_t type;
		size_t len;
		int err;

		if (first == bases) { /* the bases known: what they make useful, first */
			stp_published_order_slots(pub);
			n = stp_published_slots(pub) < at_most ? stp_published_slots(pub) : at_most;
			if (first >= n)
				break;
		}

		/* a batch of bases only, or of none (fetcher.h) */
		uint64_t end = first < bases ? bases : n;

		b.bases = first < bases;
		b.count = (uint32_t)(end - first < STP_FETCH_BATCH ? end - first : STP_FETCH_BATCH);
		for (uint32_t k = 0; k < b.count; k++)
			memcpy(b.sha[k], stp_published_hash(pub, first + k), 32);
		if (stp_msg_send(ctl, STP_MSG_BLOCKS, &b, sizeof(b)))
			return;
		err = stp_msg_recv_fds(ctl, deadline, &type, buf, sizeof(buf), &len, fds,
				       STP_FETCH_BATCH, &nfds);
		if (!err && (type != STP_MSG_STORE ||
			     stp_fetch_store_check(buf, len, &b, nfds, &st)))
			err = -EPROTO;
		for (unsigned k = 0; k < nfds; k++)
			if (err)
				close(fds[k]);
			else
				stp_published_set_store(pub, first + st.which[k], fds[k]);
		if (err)
			return;
		if (st.stop)
			break; /* files for no more blocks: the room still comes */
		first += b.count;
	}
	take_room(pub, ctl, deadline);
}

/* Room for store files: the soft limit of descriptors raised to the hard one. */
static uint64_t store_room(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 1u << 20;
	return rl.rlim_cur > FDS_SPARE ? rl.rlim_cur - FDS_SPARE : 0;
}

/* RLIMIT_DATA, hard limit too, lowered to what serving N channels takes: the fixed part,
 * and a published image's index, a block buffer per channel and the rebuilds from
 * deltas of N channels (stp_published_delta_memory) (it cannot be raised again: the
 * monitor counts it in the mount's budget, fetcher.h); RLIMIT_AS with it (sandbox.h). */
static void lower_data(unsigned n, const struct stp_published *pub)
{
	uint64_t max = stp_fetcher_data_fixed(n);

	if (pub)
		max += stp_published_index_len(pub) + n * stp_published_block_max(pub) +
		       stp_published_delta_memory(pub, n);
	setrlimit(RLIMIT_DATA, &(struct rlimit){ max, max });
	max += STP_SANDBOX_AS_RESERVE;
	setrlimit(RLIMIT_AS, &(struct rlimit){ max, max });
}

/* The filter, when the monitor sent none (a reader's fetcher: `stipple` links no
 * libseccomp): built here. */
static int own_filter(const struct stp_mount_opts *o, struct stp_sandbox_prog *filter,
		      char *why, size_t whylen)
{
	if (filter->n || o->sandbox == STP_SANDBOX_OFF)
		return 0;
	return stp_filters_export(STP_FILTER_FETCHER, o->sandbox, getpid(), filter, why, whylen);
}

/* libcurl, the CA file and the netrc read, OpenSSL's digest loaded and the names
 * resolved beforehand: what the sandbox would forbid later. RESOLVE (3 slots) gets the
 * entries, for the caller to keep. */
static void prepare_http(const struct stp_mount_opts *o, struct stp_http_opts *ho,
			 char **resolve, struct stp_fetch_hello *hi)
{
	uint8_t warm[STP_SIG_HASH_SIZE];
	unsigned nres = 0;

	hi->err = stp_http_global_init();
	if (hi->err)
		snprintf(hi->why, sizeof(hi->why), "cannot set up libcurl");
	if (!hi->err) {
		ho->ca_blob = read_ca(o, &ho->ca_len, hi->why, sizeof(hi->why));
		if (o->ca_file && !ho->ca_blob)
			hi->err = -EINVAL;
	}
	if (!hi->err)
		hi->err = read_netrc(o, ho, hi->why, sizeof(hi->why));
	stp_sign_hash("", 0, warm); /* OpenSSL loads its digest while it still may */
	if ((resolve[nres] = resolve_entry(o->image)))
		nres++;
	if ((resolve[nres] = resolve_entry(proxy_for(o))))
		nres++;
	ho->resolve = (const char *const *)resolve;
}

/* The data limit, then the sandbox, keeping CTL and the N CHANS alone. */
static int confine(const struct stp_mount_opts *o, int ctl, const int *chans, unsigned n,
		   struct stp_sandbox_prog *filter, char *why, size_t whylen)
{
	int keep[STP_FETCH_CHANS_MAX + 1];
	struct stp_sandbox_opts so = { .mode = o->sandbox, .user = o->sandbox_user,
				       .filter = filter, .keep_fds = keep, .nkeep = n + 1,
				       .keep_stderr = o->foreground,
				       /* a store file holds one block: a fetcher turned hostile
					* may not grow one past the largest a block can be */
				       .file_size_max = STP_PUBLISHED_BUFFERS_MAX };
	int err = 0;

	keep[0] = ctl;
	memcpy(keep + 1, chans, n * sizeof(*chans));
	if (setrlimit(RLIMIT_DATA, &(struct rlimit){ FETCHER_DATA_MAX, FETCHER_DATA_MAX }))
		return -errno;
	err = own_filter(o, filter, why, whylen);
	if (!err && (err = stp_sandbox_enter(&so, why, whylen)))
		err = err < 0 ? err : -EPERM;
	return err;
}

/* Confined: the URL probed (a published image's index read), the limits lowered to what
 * its N channels serve, and HI filled. */
static void probe(const struct stp_mount_opts *o, const struct stp_http_opts *ho, unsigned n,
		  struct stp_http **h, struct stp_published **pub, struct stp_fetch_hello *hi)
{
	hi->err = stp_http_open(o->image, ho, h, hi->why, sizeof(hi->why));
	if (!hi->err)
		hi->err = stp_published_open(*h, o->image, o->image_path ? o->image_path : o->image,
					     o->no_deltas, pub, hi->why, sizeof(hi->why));
	if (hi->err)
		return;
	/* a store file holds one block, delta or content: none may grow past the largest
	 * of the index; and the blocks fetched at once are those of its channels, as the
	 * budget counted */
	if (*pub) {
		setrlimit(RLIMIT_FSIZE, &(struct rlimit){ stp_published_file_max(*pub),
							  stp_published_file_max(*pub) });
		stp_published_set_buffers(*pub, n * stp_published_block_max(*pub));
	}
	lower_data(n, *pub);
	hi->size = *pub ? stp_published_size(*pub) : stp_http_size(*h);
	hi->blocks = *pub ? stp_published_slots(*pub) : 0;
	hi->index_len = *pub ? stp_published_index_len(*pub) : 0;
	snprintf(hi->validator, sizeof(hi->validator), "%s", stp_http_validator(*h));
}

/* Each channel served by a thread of its own, at once: the monitor reads the superblock
 * and checks the image before it answers with the store, if it does (fetcher.h). */
static _Noreturn void serve_all(struct stp_http *h, struct stp_published *pub, int ctl,
				const int *chans, unsigned n, uint64_t room)
{
	struct server srv[STP_FETCH_CHANS_MAX];
	pthread_t tids[STP_FETCH_CHANS_MAX];
	bool started[STP_FETCH_CHANS_MAX];

	for (unsigned i = 0; i < n; i++) {
		srv[i] = (struct server){ h, pub, chans[i] };
		started[i] = !pthread_create(&tids[i], NULL, serve, &srv[i]);
		if (!started[i])
			close(chans[i]); /* one channel fewer: the daemon sees it closed */
	}
	if (pub && stp_published_blocks(pub))
		take_store(pub, ctl, room < STP_FETCH_STORE_MAX ? room : STP_FETCH_STORE_MAX);
	close(ctl);
	wait_daemon_gone(chans, started, n);
	_exit(0); /* a store file cut short by it is refused by its hash when read */
}

/* The fetcher's process: set up, confine, probe, say so (HELLO), serve. */
static _Noreturn void run(const struct stp_mount_opts *o, int ctl, const int *chans, unsigned n,
			  struct stp_sandbox_prog *filter)
{
	struct stp_http_opts ho = { .ca_file = NULL, .proxy = o->proxy,
				    .timeout_ms = o->timeout_s * 1000u };
	struct stp_fetch_hello hi = { 0 };
	char *resolve[3] = { NULL, NULL, NULL };
	struct stp_http *h = NULL;
	struct stp_published *pub = NULL;
	uint64_t room = store_room();

	signal(SIGPIPE, SIG_IGN);
	stp_log_set_handler(quiet); /* the daemon gives the sandbox's warnings, once */
	if (!o->foreground)
		setsid();
	prepare_http(o, &ho, resolve, &hi);
	if (!hi.err)
		hi.err = confine(o, ctl, chans, n, filter, hi.why, sizeof(hi.why));
	if (!hi.err)
		probe(o, &ho, n, &h, &pub, &hi);
	stp_msg_send(ctl, STP_MSG_HELLO, &hi, sizeof(hi));
	if (hi.err) {
		close(ctl);
		_exit(1);
	}
	serve_all(h, pub, ctl, chans, n, room);
}


static int usage(const char *arg)
{
	if (arg && (!strcmp(arg, "-V") || !strcmp(arg, "--version"))) {
		printf(STP_FETCHER_NAME " " STP_VERSION "\n");
		return 0;
	}
	fprintf(stderr, STP_FETCHER_NAME ": the fetcher of a stipple URL, run by mount.stipple, "
		"`stipple mount` and the readers only; see mount.stipple(8)\n");
	return 2;
}

/* The monitor's FILTER, which comes before the SETUP; a reader sends none. */
static int take_filter(int64_t deadline, struct stp_sandbox_prog *filter)
{
	uint32_t type;
	int err = stp_msg_peek_type(STP_MONITOR_FD, deadline, &type);

	if (err || type != STP_MSG_FILTER)
		return err;
	return stp_setup_recv_filter(STP_MONITOR_FD, deadline, filter);
}

int main(int argc, char **argv)
{
	static struct stp_setup s;
	static struct stp_sandbox_prog filter;
	int64_t deadline = (int64_t)stp_now_ns() + STP_MOUNT_DEADLINE_MS * 1000000ll;
	int fds[STP_SETUP_FDS_MAX], err;
	struct stp_fetch_hello hi = { 0 };

	if (stp_fill_stdio())
		return 1;
	if ((argc == 2 && argv[1][0] == '-') || !stp_setup_is_socket(STP_MONITOR_FD))
		return usage(argc > 1 ? argv[1] : NULL);
	err = take_filter(deadline, &filter);
	if (!err)
		err = stp_setup_recv(STP_MONITOR_FD, deadline, &s, fds);
	for (uint32_t i = 0; !err && i < s.nroles; i++)
		if (s.roles[i] != STP_FD_CHAN)
			err = -EPROTO;
	if (!err && (!s.opts.image || !s.nroles || s.nroles > STP_FETCH_CHANS_MAX))
		err = -EPROTO;
	if (err) {
		hi.err = err;
		snprintf(hi.why, sizeof(hi.why), "no setup from the monitor: %s", stp_strerror(err));
		stp_msg_send(STP_MONITOR_FD, STP_MSG_HELLO, &hi, sizeof(hi));
		return 1;
	}
	run(&s.opts, STP_MONITOR_FD, fds, s.nroles, &filter);
}
