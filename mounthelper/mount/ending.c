/* SPDX-License-Identifier: MIT */
#include "ending.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fuseapi.h"
#include "fill.h"
#include "warm.h"

static int pipe_fds[2] = { -1, -1 };
static struct fuse_session *session;
static struct stp_warmer *warmer;
static struct stp_filler *filler;
static pthread_t thread;
static bool started;
static pid_t loop_tid;                 /* the thread that runs the loop */
static volatile sig_atomic_t loop_over; /* set before the thread is woken for the end */
static volatile sig_atomic_t signalled;
static void (*unmounted_fn)(void *);
static void *unmounted_arg;

static void on_ending_signal(int sig)
{
	char c = (char)sig;
	int saved = errno;

	if (write(pipe_fds[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

/* Interrupts the loop's wait, so that it looks at the exit flag. */
static void on_wake(int sig)
{
	(void)sig;
}

int stp_ending_install(int fds[2])
{
	struct sigaction sa = { .sa_handler = on_ending_signal };
	struct sigaction wake = { .sa_handler = on_wake }; /* no SA_RESTART: the wait ends */
	sigset_t handled;

	if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK))
		return -errno;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&wake.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ||
	    sigaction(SIGHUP, &sa, NULL) || sigaction(SIGUSR1, &wake, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	/* whatever mask the daemon inherited: these end it, or wake the loop */
	sigemptyset(&handled);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGUSR1);
	if (pthread_sigmask(SIG_UNBLOCK, &handled, NULL))
		return -EINVAL;
	fds[0] = pipe_fds[0];
	fds[1] = pipe_fds[1];
	return 0;
}

static void *ending_main(void *arg)
{
	sigset_t all;
	char c;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* the handlers run on the loop's threads */
	for (;;) {
		/* /dev/fuse polls as an error once the host unmounted (the kernel aborts the
		 * connection): asked for nothing else, it wakes the thread for that alone */
		struct pollfd p[2] = { { .fd = pipe_fds[0], .events = POLLIN },
				       { .fd = fuse_session_fd(session), .events = 0 } };

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[1].revents & (POLLERR | POLLHUP)) {
			if (unmounted_fn)
				unmounted_fn(unmounted_arg);
			return NULL;
		}
		if (read(pipe_fds[0], &c, 1) == 1 || loop_over)
			break;
	}
	if (loop_over)
		return NULL;
	signalled = 1;
	/* first: a read waiting on a fetcher that does not answer fails at once, and with it
	 * a warming store that waits for that read */
	if (unmounted_fn)
		unmounted_fn(unmounted_arg);
	stp_warm_halt(warmer); /* the loop still answers the reads its stores wait for */
	stp_fill_halt(filler);
	fuse_session_exit(session);
	/* again until the loop is over: a wake-up just before it waits would be lost */
	while (!loop_over) {
		syscall(SYS_tgkill, getpid(), loop_tid, SIGUSR1);
		poll(NULL, 0, 100);
	}
	return NULL;
}

void stp_ending_on_unmount(void (*fn)(void *), void *arg)
{
	unmounted_fn = fn;
	unmounted_arg = arg;
}

int stp_ending_start(struct fuse_session *se, struct stp_warmer *w, struct stp_filler *f,
		     pid_t loop)
{
	int rc;

	session = se;
	warmer = w;
	filler = f;
	loop_tid = loop;
	rc = pthread_create(&thread, NULL, ending_main, NULL);
	started = rc == 0;
	return -rc;
}

bool stp_ending_finish(void)
{
	char c = 0;

	loop_over = 1;
	if (started) {
		if (write(pipe_fds[1], &c, 1) < 0) {
			/* full: the thread is awake already */
		}
		pthread_join(thread, NULL);
		started = false;
	}
	return signalled;
}
