/* SPDX-License-Identifier: MIT */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Closes every descriptor but A and B (A < B). */
static void close_all_but(int a, int b)
{
	if (a > 0)
		close_range(0, (unsigned)a - 1, 0);
	if (b > a + 1)
		close_range((unsigned)a + 1, (unsigned)b - 1, 0);
	close_range((unsigned)b + 1, ~0u, 0);
}

static void keep_only_unmount(void)
{
	cap_value_t keep[] = { CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH };
	cap_t caps;

	if (geteuid() != 0 || !(caps = cap_init()))
		return;
	if (!cap_set_flag(caps, CAP_PERMITTED, 2, keep, CAP_SET) &&
	    !cap_set_flag(caps, CAP_EFFECTIVE, 2, keep, CAP_SET))
		cap_set_proc(caps);
	cap_free(caps);
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
	close_all_but(pidfd < keep_fd ? pidfd : keep_fd, pidfd < keep_fd ? keep_fd : pidfd);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigprocmask(SIG_SETMASK, mask, NULL);
	keep_only_unmount();
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
