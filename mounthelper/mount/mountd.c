/* SPDX-License-Identifier: MIT */
/*
 * stipple-mountd: the confined daemon of a mount, a program of its own that only the
 * monitor runs (monitor.h), as OpenSSH's sshd runs sshd-session. It starts from a fresh
 * address space with only the libraries it links, finds its socket to the monitor on
 * STP_MONITOR_FD, is told the sandbox mode first (SANDBOX: root's daemon then enters its
 * empty root while the monitor checks and mounts, sandbox.h), takes its options and
 * descriptors from the one SETUP message (setup.h), takes over the FUSE connection the
 * monitor mounted, then the seccomp filter the monitor built meanwhile (FILTER), and
 * serves (daemon.h), confining itself before it reads a byte of the
 * image past the superblock.
 *
 * Built twice: stipple-mountd serves a local image without verify= and links no
 * libcrypto; stipple-mountd-checked (STP_MOUNTD_CHECKS) serves every mount, a URL's and
 * a signed image's too (daemonchecks.h). The monitor runs the one the options need.
 *
 * Its arguments (IMAGE DIR) only name the mount for ps; it reads none of them.
 *
 * Exit status: daemon.h's, or 2 when run by hand.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "fuseapi.h"
#include "monproto.h"
#include "progpath.h"
#include "readfail.h"
#include "sandbox.h"
#include "setup.h"
#include "util.h"

#ifdef STP_MOUNTD_CHECKS
/* stipple-mountd-checked: URLs and verify= too, with libcrypto (daemonchecks.h) */
#include "daemonchecks.h"
#define PROG STP_MOUNTD_CHECKED_NAME
#define CHECKS (&stp_daemon_checks)
#define CHECKS_INIT() stp_daemon_checks.init()
#else
#define PROG STP_MOUNTD_NAME
#define CHECKS NULL
#define CHECKS_INIT() 0
#endif
/* The monitor starts the daemon before it checks the image (and, for a URL, starts the
 * fetcher): the setup comes once that is done, or the monitor goes and the socket says
 * so. The bound is only a last resort. */
#define SETUP_WAIT_MS (3600 * 1000)
#define EXIT_USAGE 2

static int usage(const char *arg)
{
	if (arg && (!strcmp(arg, "-V") || !strcmp(arg, "--version"))) {
		printf(PROG " " STP_VERSION "\n");
		return 0;
	}
	fprintf(stderr, PROG ": the daemon of a stipple mount, run by mount.stipple and "
		"`stipple mount` only; see mount.stipple(8)\n");
	return EXIT_USAGE;
}

/* The daemon's descriptors, by role. */
static void pick_fds(const struct stp_setup *s, const int *fds, struct stp_daemon_fds *out)
{
	static int chans[STP_SETUP_FDS_MAX];

	*out = (struct stp_daemon_fds){
		.image = stp_setup_fd(s, fds, STP_FD_IMAGE),
		.record = stp_setup_fd(s, fds, STP_FD_RECORD),
		.record_done = stp_setup_fd(s, fds, STP_FD_RECORD_DONE),
		.monitor = STP_MONITOR_FD,
		.keys = s->keys,
		.nkeys = s->nkeys,
		.chans = chans,
		.url_size = s->url_size,
		.cache = s->cache,
		.has_ids = s->sandbox_ids,
		.uid = s->sandbox_uid,
		.gid = s->sandbox_gid,
	};
	out->cache.fd = stp_setup_fd(s, fds, STP_FD_CACHE);
	for (uint32_t i = 0; i < s->nroles; i++)
		if (s->roles[i] == STP_FD_CHAN)
			chans[out->nchans++] = fds[i];
}

/* What is done before the SETUP comes (the SANDBOX message says the mode): OpenSSL's
 * set-up, the failed-read outlet's socket, then root's empty root (sandbox.h), all while
 * the monitor checks the image and mounts. A failure is kept in WHY, for the monitor
 * once the setup names the front end. */
struct ahead {
	int err;
	char why[300];
	enum stp_sandbox_mode mode;
	struct stp_readfail *readfail;
};

/* The seccomp program the monitor builds after the SETUP, while the daemon takes the
 * mount over (empty with the sandbox off): without it the daemon cannot confine itself,
 * and then it does not serve. 0, or a failure told to the monitor. */
static int take_filter(const struct stp_setup *s, struct stp_sandbox_prog *filter)
{
	int64_t deadline = (int64_t)stp_now_ns() + STP_MOUNT_DEADLINE_MS * 1000000ll;
	char text[256];
	int err;

	if (s->opts.sandbox == STP_SANDBOX_OFF)
		return 0;
	err = stp_setup_recv_filter(STP_MONITOR_FD, deadline, filter);
	if (err) {
		snprintf(text, sizeof(text), "%s: sandbox: no seccomp filter from the monitor: %s",
			 s->prog, stp_strerror(err));
		stp_msg_send_failed(STP_MONITOR_FD, err, text);
	}
	return err;
}
static void take_ahead(int64_t deadline_ns, struct ahead *a)
{
	char err[256];

	a->err = stp_setup_recv_sandbox(STP_MONITOR_FD, deadline_ns, &a->mode);
	if (a->err) {
		snprintf(a->why, sizeof(a->why), "no sandbox mode from the monitor: %s",
			 stp_strerror(a->err));
		return;
	}
	if ((a->err = CHECKS_INIT()))
		snprintf(a->why, sizeof(a->why), "cannot set up OpenSSL: %s", stp_strerror(a->err));
	else if ((a->err = stp_readfail_open(STP_READFAIL_SOCKET, &a->readfail)))
		snprintf(a->why, sizeof(a->why), "failed-read log: %s", stp_strerror(a->err));
	else if ((a->err = stp_sandbox_enter_empty_root(a->mode, err, sizeof(err))))
		snprintf(a->why, sizeof(a->why), "sandbox: %s", err);
}

/* The SANDBOX and what it lets be done ahead, then the SETUP into S and FDS, checked
 * (the same sandbox mode, a connection to serve): 0, or a failure told to the monitor. */
static int take_setup(struct stp_setup *s, int *fds, struct ahead *a, int *fuse_fd)
{
	int64_t deadline = (int64_t)stp_now_ns() + SETUP_WAIT_MS * 1000000ll;
	char text[512];
	int err;

	take_ahead(deadline, a);
	err = a->err == -EPIPE ? a->err : stp_setup_recv(STP_MONITOR_FD, deadline, s, fds);
	*fuse_fd = err ? -1 : stp_setup_fd(s, fds, STP_FD_FUSE);
	if (!err && (*fuse_fd < 0 || s->opts.sandbox != a->mode || !s->prog ||
		     !s->opts.fuse_opts || !s->opts.image || !s->opts.image_path))
		err = -EPROTO;
	if (err)
		snprintf(text, sizeof(text), PROG ": no setup from the monitor: %s", stp_strerror(err));
	else if (a->err)
		snprintf(text, sizeof(text), "%s: %s", s->prog, a->why);
	if (err || a->err)
		stp_msg_send_failed(STP_MONITOR_FD, err ? err : a->err, text);
	return err ? err : a->err;
}

/* The session over the connection the monitor made: libfuse takes /dev/fd/N as a
 * descriptor already mounted. */
static int take_mount(struct stp_daemon *d, int fuse_fd)
{
	char path[32];

	snprintf(path, sizeof(path), "/dev/fd/%d", fuse_fd);
	return fuse_session_mount(stp_daemon_session(d), path) ? -EIO : 0;
}

int main(int argc, char **argv)
{
	static struct stp_setup s;
	static struct stp_sandbox_prog filter;
	int fds[STP_SETUP_FDS_MAX], fuse_fd;
	struct stp_daemon_fds dfds;
	struct stp_daemon *d;
	struct ahead a = { 0 };
	char text[256];

	if (stp_fill_stdio())
		return STP_DAEMON_FAILED;
	if ((argc == 2 && argv[1][0] == '-') || !stp_setup_is_socket(STP_MONITOR_FD))
		return usage(argc > 1 ? argv[1] : NULL);
	signal(SIGPIPE, SIG_IGN); /* the monitor may be gone when this writes to it */
	if (take_setup(&s, fds, &a, &fuse_fd))
		return STP_DAEMON_FAILED;
	if (!s.opts.foreground)
		setsid();
	if (stp_daemon_new(&s.opts, s.prog, CHECKS, &d)) {
		snprintf(text, sizeof(text), "%s: libfuse refused the options", s.prog);
		stp_msg_send_failed(STP_MONITOR_FD, -EINVAL, text);
		return STP_DAEMON_FAILED;
	}
	if (take_mount(d, fuse_fd)) {
		snprintf(text, sizeof(text), "%s: cannot take over the FUSE connection", s.prog);
		stp_msg_send_failed(STP_MONITOR_FD, -EIO, text);
		return STP_DAEMON_FAILED;
	}
	if (take_filter(&s, &filter))
		return STP_DAEMON_FAILED;
	pick_fds(&s, fds, &dfds);
	dfds.readfail = a.readfail;
	dfds.filter = &filter;
	return stp_daemon_serve(d, &dfds, s.mem_limit);
}
