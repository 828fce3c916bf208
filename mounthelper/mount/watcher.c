/* SPDX-License-Identifier: MIT */
/* The watcher's housekeeping (watcher.h); its fork and capset are the monitor's. */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
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
	close_all_but(pidfd, keep_fd);
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
