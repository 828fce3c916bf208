/* SPDX-License-Identifier: MIT */
#include "monsig.h"

#include <errno.h>
#include <stddef.h>

#include "monitor.h"

static volatile sig_atomic_t forwarded;
static int forward_pidfd = -1;
static pid_t forward_pid;

static void forward_signal(int sig)
{
	int saved = errno; /* the interrupted code may be about to read its own */

	forwarded = 1;
	stp_monitor_signal(forward_pidfd, forward_pid, sig);
	errno = saved;
}

void stp_monsig_hold(sigset_t *saved)
{
	sigset_t ending;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&ending);
	sigaddset(&ending, SIGINT);
	sigaddset(&ending, SIGTERM);
	sigaddset(&ending, SIGHUP);
	sigprocmask(SIG_BLOCK, &ending, saved);
}

void stp_monsig_forward(pid_t pid, int pidfd, const sigset_t *saved)
{
	struct sigaction sa = { .sa_handler = forward_signal };

	forward_pid = pid;
	forward_pidfd = pidfd;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigprocmask(SIG_SETMASK, saved, NULL);
}

bool stp_monsig_forwarded(void)
{
	return forwarded;
}
