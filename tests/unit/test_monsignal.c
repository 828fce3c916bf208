/* SPDX-License-Identifier: MIT */
/* The monitor's signals (mounthelper/mount/monitor.c, stp_monitor_signal): once the
 * process of a pidfd is reaped, its number may be another process's, and a signal meant
 * for the old one must not reach it (review 11 #1: -f forwards a Ctrl-C after the reap). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monitor.h"

#include "check.h"

/* A child that waits to be killed: its pid. */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	CHECK(pid > 0);
	return pid;
}

/* A child that has ended and been reaped, and a pidfd of it opened before the reap. */
static int reaped_pidfd(void)
{
	int pipefd[2], fd;
	pid_t pid;
	char c;

	CHECK(!pipe(pipefd));
	pid = fork();
	if (pid == 0) {
		/* ends once the parent holds its pidfd */
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	CHECK(pid > 0);
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	CHECK(fd >= 0, "pidfd_open: %s", strerror(errno));
	close(pipefd[0]);
	close(pipefd[1]);
	CHECK(waitpid(pid, NULL, 0) == pid);
	return fd;
}

static void test_a_reaped_pidfd_never_falls_back_to_the_number(void)
{
	int fd = reaped_pidfd(), status;
	pid_t other = sleeper();
	int rc = stp_monitor_signal(fd, other, SIGTERM);

	CHECK(rc == -ESRCH, "%d", rc);
	usleep(100 * 1000);
	CHECK(waitpid(other, &status, WNOHANG) == 0, "the number's new owner was signalled");
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	close(fd);
}

static void test_without_a_pidfd_the_number_is_used(void)
{
	pid_t other = sleeper();
	int status;

	CHECK(stp_monitor_signal(-1, other, SIGTERM) == 0);
	CHECK(waitpid(other, &status, 0) == other && WIFSIGNALED(status) &&
	      WTERMSIG(status) == SIGTERM);
	CHECK(stp_monitor_signal(-1, 0, SIGTERM) == -ESRCH, "never a process group");
}

int main(void)
{
	RUN(test_a_reaped_pidfd_never_falls_back_to_the_number);
	RUN(test_without_a_pidfd_the_number_is_used);
	return tap_done();
}
