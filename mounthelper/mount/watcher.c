/* SPDX-License-Identifier: MIT */
/* The watcher's housekeeping (watcher.h); its fork and capset are the monitor's. */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
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

void stp_watcher_detach(int pidfd, int keep_fd, const sigset_t *mask)
{
	detach();
	close_all_but(pidfd < keep_fd ? pidfd : keep_fd, pidfd < keep_fd ? keep_fd : pidfd);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigprocmask(SIG_SETMASK, mask, NULL);
}

void stp_watcher_wait(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}
