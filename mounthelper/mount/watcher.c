/* SPDX-License-Identifier: MIT */
/* The watcher's housekeeping (watcher.h); its fork is monmount.c's, its drop and its
 * signals monitor.c's. */
#include "watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monitor.h"
#include "util.h"

static int compare_fds(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

#define NKEEP_MAX 9

/* Closes every descriptor but stdio and the N of KEEP (any -1: none). */
static void close_all_but(const int *keep, unsigned n)
{
	int sorted[NKEEP_MAX];
	unsigned from = 3;

	memcpy(sorted, keep, n * sizeof(*keep));
	qsort(sorted, n, sizeof(*sorted), compare_fds);
	for (unsigned i = 0; i < n; i++) {
		if (sorted[i] < (int)from)
			continue;
		if (sorted[i] > (int)from)
			close_range(from, (unsigned)sorted[i] - 1, 0);
		from = (unsigned)sorted[i] + 1;
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

void stp_watcher_detach(const struct stp_watched *w, const int *keep, unsigned nkeep,
			const sigset_t *mask)
{
	int all[NKEEP_MAX] = { w->daemon, w->fetcher, w->fuse };
	unsigned n = 3;

	for (unsigned i = 0; i < nkeep && n < NKEEP_MAX; i++)
		all[n++] = keep[i];
	detach();
	close_all_but(all, n);
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

/* W's record word has come (or its end): handed over once, then no longer polled. */
static void take_record(struct stp_watched *w)
{
	w->record_came(w->ctx);
	w->record = -1;
}

bool stp_watcher_wait(struct stp_watched *w, bool (*in_table)(void *), void *ctx)
{
	int table = w->fuse < 0 ? -1 : open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	struct pollfd p[4] = { { .fd = w->daemon, .events = POLLIN },
			       { .fd = table, .events = POLLPRI },
			       { .fd = -1 }, { .events = POLLIN } };
	bool armed = false, ended = false;
	int n;

	for (;;) {
		p[2].fd = armed ? w->fuse : -1; /* events 0: POLLERR only, the connection ended */
		p[3].fd = w->record;
		p[0].revents = p[1].revents = p[2].revents = p[3].revents = 0;
		n = poll(p, 4, w->fuse < 0 ? -1 : armed ? ARMED_MS : CHECK_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[0].revents)
			break;
		if (p[3].revents)
			take_record(w);
		ended = (p[2].revents & POLLERR) || (!n && !armed && connection_ended(w->fuse));
		if (ended)
			break;
		/* a record word alone leaves the arming as it was */
		armed = p[1].revents ? !in_table(ctx) : armed && p[3].revents;
	}
	if (table >= 0)
		close(table);
	return ended;
}

/* Whether PIDFD's process ended within MS (-1: however long); W's record word (W may be
 * NULL) is taken meanwhile. */
static bool ended_within(struct stp_watched *w, int pidfd, int ms)
{
	struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN }, { .events = POLLIN } };
	int64_t end = (int64_t)stp_now_ns() / 1000000 + ms;
	int n, left = ms;

	for (;;) {
		p[1].fd = w ? w->record : -1;
		p[0].revents = p[1].revents = 0;
		n = poll(p, 2, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || p[0].revents)
			return n != 0;
		take_record(w);
		if (ms >= 0 && (left = (int)(end - (int64_t)stp_now_ns() / 1000000)) < 0)
			left = 0;
	}
}

void stp_watcher_end(struct stp_watched *w, int pidfd, unsigned grace_ms)
{
	if (pidfd < 0 || ended_within(w, pidfd, (int)grace_ms))
		return;
	if (!stp_monitor_signal(pidfd, 0, SIGKILL))
		ended_within(w, pidfd, -1);
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
