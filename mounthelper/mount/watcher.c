/* SPDX-License-Identifier: MIT */
/* The watcher's housekeeping (watcher.h); its fork is monmount.c's, its drop and its
 * signals monitor.c's. */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monitor.h"

static int compare_fds(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

#define NKEEP 6

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

void stp_watcher_detach(const struct stp_watched *w, int keep_fd, int word_fd, int later_fd,
			const sigset_t *mask)
{
	int keep[NKEEP] = { w->daemon, w->fetcher, w->fuse, keep_fd, word_fd, later_fd };

	detach();
	close_all_but(keep);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigprocmask(SIG_SETMASK, mask, NULL);
}

/* umount2 ends the connection as it returns, just after the table changes: a change
 * that took the mount out of the table arms the look at the connection this long (only
 * while armed does every FUSE request also wake the watcher: tables change many times a
 * second on a busy host). A mount detached lazily while in use ends later, unseen:
 * hence the look every CHECK_MS. */
#define ARMED_MS 1000
#define CHECK_MS (60 * 1000)

/* Whether FUSE_FD's connection has ended, now. */
static bool connection_ended(int fuse_fd)
{
	struct pollfd p = { .fd = fuse_fd, .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

bool stp_watcher_wait(const struct stp_watched *w, bool (*in_table)(void *), void *ctx)
{
	int table = w->fuse < 0 ? -1 : open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	struct pollfd p[3] = { { .fd = w->daemon, .events = POLLIN },
			       { .fd = table, .events = POLLPRI },
			       { .fd = -1 } };
	bool armed = false, ended = false;
	int n;

	for (;;) {
		p[2].fd = armed ? w->fuse : -1; /* events 0: POLLERR only, the connection ended */
		p[0].revents = p[1].revents = p[2].revents = 0;
		n = poll(p, 3, w->fuse < 0 ? -1 : armed ? ARMED_MS : CHECK_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[0].revents)
			break;
		ended = (p[2].revents & POLLERR) || (!n && !armed && connection_ended(w->fuse));
		if (ended)
			break;
		armed = p[1].revents && !in_table(ctx);
	}
	if (table >= 0)
		close(table);
	return ended;
}

/* Whether PIDFD's process ended within MS (-1: however long). */
static bool ended_within(int pidfd, int ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return n != 0;
}

void stp_watcher_end(int pidfd, unsigned grace_ms)
{
	if (pidfd < 0 || ended_within(pidfd, (int)grace_ms))
		return;
	if (!stp_monitor_signal(pidfd, 0, SIGKILL))
		ended_within(pidfd, -1);
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

void stp_watcher_release(int *go, pid_t pid, bool live)
{
	if (*go < 0)
		return;
	if (live && stp_watcher_word_came(*go))
		stp_watcher_send_word(*go);
	close(*go);
	*go = -1;
	if (!live)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
}
