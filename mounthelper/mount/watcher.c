/* SPDX-License-Identifier: MIT */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Closes every descriptor but stdio, A and B (either -1: none). */
static void close_all_but(int a, int b)
{
	int keep[2] = { a < b ? a : b, a < b ? b : a };
	unsigned from = 3;

	for (int i = 0; i < 2; i++) {
		if (keep[i] < (int)from)
			continue;
		if (keep[i] > (int)from)
			close_range(from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	close_range(from, ~0u, 0);
}

/* Root keeps the two capabilities an unmount needs, and no way back to the others: uid 0
 * would regain them all at an exec, so the bounding set is emptied, the securebits that
 * give root its capabilities at exec and keep them across setuid are locked off, and
 * no_new_privs is set. -1 when any of it fails: the watcher then does not stay. */
static int keep_only_unmount(void)
{
	cap_value_t keep[] = { CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH };
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
	int err = 0;
	cap_t caps;

	if (geteuid() != 0)
		return 0; /* nothing to drop: fusermount3 unmounts as the user */
	for (cap_value_t c = 0; !err && c <= cap_max_bits() - 1; c++)
		err = cap_drop_bound(c);
	if (!err)
		err = prctl(PR_SET_SECUREBITS, bits, 0, 0, 0);
	if (!err)
		err = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (err || !(caps = cap_init()))
		return -1;
	if (cap_set_flag(caps, CAP_PERMITTED, 2, keep, CAP_SET) ||
	    cap_set_flag(caps, CAP_EFFECTIVE, 2, keep, CAP_SET) || cap_set_proc(caps))
		err = -1;
	cap_free(caps);
	return err;
}

/* Out of the caller's session, terminal and directory. */
static void detach(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	setsid();
	prctl(PR_SET_NAME, "stipple-watch");
	for (int i = 0; null >= 0 && i < 3; i++)
		dup2(null, i);
	if (null > 2)
		close(null);
	if (chdir("/")) {
		/* nothing holds a path: the caller's is an open descriptor */
	}
}

static _Noreturn void watch(int pidfd, int keep_fd, const sigset_t *mask,
			    void (*ended)(void *arg), void *arg)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	detach();
	close_all_but(pidfd, keep_fd);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigprocmask(SIG_SETMASK, mask, NULL);
	if (keep_only_unmount())
		_exit(1);
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	ended(arg);
	_exit(0);
}

int stp_watcher_leave(int pidfd, int keep_fd, const sigset_t *mask,
		      void (*ended)(void *arg), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0)
		watch(pidfd, keep_fd, mask, ended, arg);
	return pid < 0 ? -errno : 0;
}
