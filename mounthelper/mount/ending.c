/* SPDX-License-Identifier: MIT */
#include "ending.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "fuseapi.h"
#include "fill.h"
#include "serveloop.h"
#include "util.h"
#include "warm.h"

static int pipe_fds[2] = { -1, -1 };
static struct fuse_session *session;
static struct stp_warmer *warmer;
static struct stp_filler *filler;
static struct stp_serveloop *loop;
static pthread_t thread;
static bool started;
static atomic_int no_thread; /* it could not start: the handlers stop the loop, until finish */
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
	/* after the write: end_without_thread sets the flag before it looks in the pipe, so
	 * one of the two sees the signal */
	if (atomic_load(&no_thread)) {
		signalled = 1;
		stp_serveloop_stop_async(loop);
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
	char c;

	(void)arg;
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
	stp_serveloop_stop(loop);
	return NULL;
}

void stp_ending_on_unmount(void (*fn)(void *), void *arg)
{
	unmounted_fn = fn;
	unmounted_arg = arg;
}

/* No thread: from now on the handlers end the loop themselves, without halting warming
 * and filling first (a store stuck then is left to the daemon's exit). A signal that came
 * before is in the pipe. */
static void end_without_thread(void)
{
	char c;

	atomic_store(&no_thread, 1);
	if (read(pipe_fds[0], &c, 1) == 1) {
		signalled = 1;
		stp_serveloop_stop(loop);
	}
}

int stp_ending_start(struct fuse_session *se, struct stp_warmer *w, struct stp_filler *f,
		     struct stp_serveloop *l)
{
	int rc;

	session = se;
	warmer = w;
	filler = f;
	loop = l;
	rc = stp_thread_create_blocked(&thread, 0, ending_main, NULL);
	started = rc == 0;
	if (!started)
		end_without_thread();
	return rc;
}

/* Whether the host unmounted: the kernel ended the FUSE connection. */
static bool host_unmounted(void)
{
	struct pollfd p = { .fd = fuse_session_fd(session), .events = 0 };

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP));
}

bool stp_ending_finish(void)
{
	char c = 0;

	loop_over = 1;
	/* the loop is about to go: a later signal only writes to the pipe; one that came
	 * once the host had unmounted did not end the mount */
	if (atomic_exchange(&no_thread, 0) && signalled && host_unmounted())
		signalled = 0;
	if (started) {
		if (write(pipe_fds[1], &c, 1) < 0) {
			/* full: the thread is awake already */
		}
		pthread_join(thread, NULL);
		started = false;
	}
	return signalled;
}
