/* SPDX-License-Identifier: MIT */
/* The watcher's housekeeping (watcher.h); its fork and capset are the monitor's. */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int compare_fds(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

#define NKEEP 4

/* Closes every descriptor but stdio and the NKEEP of KEEP (any -1: none). */
static void close_all_but(int keep[NKEEP])
{
	unsigned from = 3;

	qsort(keep, NKEEP, sizeof(*keep), compare_fds);
	for (int i = 0; i < NKEEP; i++) {
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

void stp_watcher_detach(int pidfd, int keep_fd, int word_fd, int later_fd, const sigset_t *mask)
{
	int keep[NKEEP] = { pidfd, keep_fd, word_fd, later_fd };

	detach();
	close_all_but(keep);
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

bool stp_watcher_send_word(int fd)
{
	return send(fd, "w", 1, MSG_NOSIGNAL) == 1;
}

bool stp_watcher_word_came(int fd)
{
	ssize_t n;
	char c;

	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1;
}
