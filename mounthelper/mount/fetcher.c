/* SPDX-License-Identifier: MIT */
/* The monitor's half of a URL mount's fetcher (fetcher.h): the channels, the hand-over
 * and the hello. The exec of stipple-fetcher (fetcherd.c) is a privileged call, made in
 * monitor.c. */
#include "fetcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monproto.h"
#include "mountopts.h"
#include "progpath.h"
#include "published.h"
#include "setup.h"
#include "util.h"

unsigned stp_fetcher_channels(const struct stp_mount_opts *o)
{
	unsigned n = o->warm_workers + 4;

	return n > STP_FETCH_CHANS_MAX ? STP_FETCH_CHANS_MAX : n;
}

/* Waits for the fetcher's HELLO until DEADLINE_MS have passed. */
static int wait_hello(int ctl, unsigned deadline_ms, struct stp_fetch_hello *hi)
{
	uint32_t type;
	size_t len;
	int err = stp_msg_recv(ctl, (int64_t)stp_now_ns() + deadline_ms * 1000000ll, &type, hi,
			       sizeof(*hi), &len);

	if (!err && (type != STP_MSG_HELLO || len != sizeof(*hi)))
		err = -EPROTO;
	if (err)
		return err;
	hi->why[sizeof(hi->why) - 1] = '\0';
	hi->validator[sizeof(hi->validator) - 1] = '\0';
	return 0;
}

/* The variables libcurl reads a proxy from: all the fetcher is given of the caller's
 * environment (root's, for a mount through mount(8)). */
static const char *const proxy_vars[] = {
	"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
	"no_proxy", "NO_PROXY",
};
#define NPROXY_VARS (sizeof(proxy_vars) / sizeof(proxy_vars[0]))
_Static_assert(NPROXY_VARS < STP_FETCHER_ENV_MAX, "room for the proxy variables and NULL");

static bool is_proxy_var(const char *entry)
{
	for (size_t i = 0; i < NPROXY_VARS; i++) {
		size_t n = strlen(proxy_vars[i]);

		if (!strncmp(entry, proxy_vars[i], n) && entry[n] == '=')
			return true;
	}
	return false;
}

void stp_fetcher_env(char **env)
{
	size_t n = 0;

	for (char **e = environ; *e && n < NPROXY_VARS; e++)
		if (is_proxy_var(*e))
			env[n++] = *e;
	env[n] = NULL;
}

/* What the fetcher is told, with THEIRS, its ends of the N channels, after FILTER when
 * there is one. */
static int send_setup(const struct stp_mount_opts *o, const char *prog, int ctl,
		      const int *theirs, unsigned n, const struct stp_sandbox_prog *filter)
{
	struct stp_setup *s = stp_setup_new(o, prog);
	int fds[STP_SETUP_FDS_MAX], err;

	if (!s)
		return -ENOMEM;
	if (filter && filter->n && (err = stp_setup_send_filter(ctl, filter))) {
		stp_setup_discard(s);
		return err;
	}
	for (unsigned i = 0; i < n; i++)
		stp_setup_add_fd(s, fds, theirs[i], STP_FD_CHAN);
	err = stp_setup_send(ctl, s, fds);
	stp_setup_discard(s);
	return err;
}

/* The hard limit of line LINE of /proc/PID/limits into *MAX when LINE names it (NAME). */
static void hard_limit(const char *line, const char *name, uint64_t *max)
{
	size_t n = strlen(name);
	unsigned long long soft, hard;

	if (!strncmp(line, name, n) && line[n] == ' ' &&
	    sscanf(line + n, "%llu %llu", &soft, &hard) == 2)
		*max = hard;
}

/* The fetcher's hard limits on file size and memory, read from /proc/PID/limits on first
 * use (both lowered before HELLO, never raised again): UINT64_MAX when unlimited or
 * unknown. */
static void read_limits(struct stp_fetcher *f)
{
	char line[256];
	FILE *fp = NULL;
	int fd;

	if (f->limits_read)
		return;
	f->limits_read = true;
	f->file_max = f->data_max = UINT64_MAX;
	fd = f->limits_fd >= 0 ? fcntl(f->limits_fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd >= 0 && !(fp = fdopen(fd, "r")))
		close(fd);
	while (fp && fgets(line, sizeof(line), fp)) {
		hard_limit(line, "Max file size", &f->file_max);
		hard_limit(line, "Max data size", &f->data_max);
	}
	if (fp)
		fclose(fp);
}

uint64_t stp_fetcher_file_max(struct stp_fetcher *f)
{
	read_limits(f);
	return f->file_max;
}

uint64_t stp_fetcher_data_max(struct stp_fetcher *f)
{
	read_limits(f);
	return f->data_max;
}

uint64_t stp_fetcher_data_fixed(unsigned nchans)
{
	return (uint64_t)nchans * STP_FETCH_PIECE + (256ull << 20);
}

uint64_t stp_fetcher_data_variable_max(void)
{
	return STP_PUBLISHED_INDEX_MAX + STP_PUBLISHED_BUFFERS_MAX;
}

unsigned stp_fetcher_silence_s(unsigned timeout_s)
{
	return 3 * timeout_s + 30;
}

/* A safety net: the daemon's ends give up on a fetcher that sends nothing for much
 * longer than its own stall bound (a piece that trickles in still arrives). */
static void set_timeout(int fd, unsigned timeout_s)
{
	struct timeval tv = { (time_t)stp_fetcher_silence_s(timeout_s), 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int make_channels(struct stp_fetcher *f, int theirs[], unsigned n, unsigned timeout_s)
{
	for (unsigned i = 0; i < n; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return -errno;
		f->chans[i] = sv[0];
		theirs[i] = sv[1];
		f->nchans = i + 1;
		set_timeout(sv[0], timeout_s);
	}
	return 0;
}

static void print_failure(const struct stp_mount_opts *o, const char *prog, int err,
			  const char *why)
{
	fprintf(stderr, "%s: %s: %s\n", prog, o->image_path, why[0] ? why : stp_strerror(err));
}

/* Closes the fetcher's ends of the channels (WITH_CTL: and both ends of the control socket). */
static void close_theirs(struct stp_fetcher *f, bool with_ctl)
{
	for (unsigned i = 0; i < STP_FETCH_CHANS_MAX; i++)
		if (f->theirs[i] >= 0)
			close(f->theirs[i]);
	for (unsigned i = 0; i < STP_FETCH_CHANS_MAX; i++)
		f->theirs[i] = -1;
	for (unsigned i = 0; with_ctl && i < 2; i++)
		if (f->ctl[i] >= 0)
			close(f->ctl[i]);
	if (with_ctl)
		f->ctl[0] = f->ctl[1] = -1;
}

void stp_fetcher_init(struct stp_fetcher *f)
{
	memset(f, 0, sizeof(*f));
	f->pid = f->pidfd = f->limits_fd = -1;
	f->ctl[0] = f->ctl[1] = -1;
	for (unsigned i = 0; i < STP_FETCH_CHANS_MAX; i++)
		f->chans[i] = f->theirs[i] = -1;
}

int stp_fetcher_prepare(const struct stp_mount_opts *o, const char *prog, struct stp_fetcher *f)
{
	int err;

	stp_fetcher_init(f);
	err = make_channels(f, f->theirs, stp_fetcher_channels(o), o->timeout_s);
	if (!err && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->ctl))
		err = -errno;
	if (err) {
		fprintf(stderr, "%s: %s: socketpair: %s\n", prog, o->image_path, stp_strerror(err));
		close_theirs(f, true);
		stp_fetcher_release(f);
	}
	return err;
}

int stp_fetcher_greet(const struct stp_mount_opts *o, const char *prog, struct stp_fetcher *f,
		      int fork_err, const struct stp_sandbox_prog *filter)
{
	struct stp_fetch_hello hi = { 0 };
	int err = fork_err ? fork_err
			   : send_setup(o, prog, f->ctl[0], f->theirs, f->nchans, filter);

	close_theirs(f, false);
	if (!err)
		err = wait_hello(f->ctl[0], o->timeout_s * 1000u + 5000u, &hi);
	if (fork_err)
		snprintf(hi.why, sizeof(hi.why), "cannot start " STP_FETCHER_NAME ": %s",
			 stp_strerror(fork_err));
	if (err || hi.err || !hi.blocks)
		close_theirs(f, true); /* else the store's batches come next on ctl[0] */
	if (!err && hi.err)
		err = hi.err;
	if (err) {
		if (err == -ETIMEDOUT && !hi.why[0])
			snprintf(hi.why, sizeof(hi.why), "no answer within %u s", o->timeout_s + 5);
		else if (err == -EPIPE && !hi.why[0])
			snprintf(hi.why, sizeof(hi.why), "the fetcher died before it answered");
		print_failure(o, prog, err, hi.why);
		stp_fetcher_stop(f);
		return err;
	}
	f->size = hi.size;
	f->blocks = hi.blocks;
	f->index_len = hi.index_len;
	memcpy(f->validator, hi.validator, sizeof(f->validator));
	return 0;
}

void stp_fetcher_close_ctl(struct stp_fetcher *f)
{
	close_theirs(f, true);
}

int stp_fetch_blocks_check(const void *buf, size_t len, uint64_t first, uint64_t blocks,
			   struct stp_fetch_blocks *out)
{
	if (len != sizeof(*out))
		return -EPROTO;
	memcpy(out, buf, sizeof(*out));
	if (out->first != first || first >= blocks || !out->count ||
	    out->count > STP_FETCH_BATCH || out->count > blocks - first || out->bases > 1)
		return -EPROTO;
	return 0;
}

int stp_fetch_store_check(const void *buf, size_t len, const struct stp_fetch_blocks *asked,
			  unsigned nfds, struct stp_fetch_store *out)
{
	if (len != sizeof(*out))
		return -EPROTO;
	memcpy(out, buf, sizeof(*out));
	if (out->first != asked->first || out->nfds != nfds || nfds > asked->count ||
	    out->stop > 1)
		return -EPROTO;
	for (unsigned k = 0; k < nfds; k++)
		if (out->which[k] >= asked->count)
			return -EPROTO;
	return 0;
}

void stp_fetcher_release(struct stp_fetcher *f)
{
	stp_fetcher_close_ctl(f);
	for (unsigned i = 0; i < f->nchans; i++)
		if (f->chans[i] >= 0)
			close(f->chans[i]);
	for (unsigned i = 0; i < f->nchans; i++)
		f->chans[i] = -1;
}

void stp_fetcher_stop(struct stp_fetcher *f)
{
	stp_fetcher_release(f);
	if (f->pid > 0) {
		if (f->signal)
			f->signal(f->pidfd, f->pid, SIGKILL);
		while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (f->pidfd >= 0)
		close(f->pidfd);
	if (f->limits_fd >= 0)
		close(f->limits_fd);
	f->pid = f->pidfd = f->limits_fd = -1;
}
