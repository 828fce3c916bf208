/* SPDX-License-Identifier: MIT */
/* The priming lookups, run by the monitor once the mount is live (monprime.h). */
#include "monprime.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "filters.h"
#include "monitor.h"
#include "monlog.h"
#include "monstate.h"
#include "mountopts.h"
#include "mountinfo.h"
#include "mountpoint.h"
#include "prime.h"

/* Whether ROOT is the root of the mount made: the device remembered at the mount (root);
 * else (a user's mount) mountinfo's word that it is a fuse.stipple mount of the image
 * made for this user. Another user's FUSE mount, put where the mount point was renamed
 * from, is neither. */
static bool made_here(const struct stp_mon *m, int root)
{
	dev_t dev;

	if (stp_mountpoint_dev(root, &dev))
		return false;
	if (m->mount_dev)
		return dev == m->mount_dev;
	return !stp_mountinfo_made_for(dev, m->o->image_path, getuid());
}

/* The mount's root, beneath the parent pinned before the mount (O_PATH: no request to
 * the mount; held only while priming, it keeps the mount busy), never by the path again:
 * a parent renamed meanwhile and a link in its place would send the lookups elsewhere.
 * The name may lead to another mount by now (the mount point renamed before the mount):
 * only the one made is primed. A descriptor, -EXDEV for another mount (said), or the
 * open's -errno. */
static int open_root(const struct stp_mon *m)
{
	int root = stp_monitor_open_dir(m->parent_fd, m->base);

	if (root < 0)
		return root;
	if (made_here(m, root))
		return root;
	close(root);
	stp_monlog_say(m->prog, "warning: %s: priming skipped: what the mount point's name "
		       "leads to is not the mount made (renamed?)", m->o->mountpoint);
	return -EXDEV;
}

/* Waits for the lookup child PID (DONE_FD: its pipe, stp_prime_wait_done) until
 * DEADLINE_NS, then kills it: stp_prime_status's answer, or -ETIMEDOUT. A child whose
 * request the daemon has read waits for the answer whatever the signal: *STUCK is then
 * its pid, for the caller to reap once the daemon (and with it the connection) is gone. */
static int wait_lookups(pid_t pid, int done_fd, int64_t deadline_ns, pid_t *stuck)
{
	int status;

	if (stp_prime_wait_done(done_fd, deadline_ns)) {
		stp_monitor_signal(-1, pid, SIGKILL);
		usleep(100000);
		if (waitpid(pid, &status, WNOHANG) != pid)
			*stuck = pid;
		return -ETIMEDOUT;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return stp_prime_status(status);
}

/* The child, forked once its filter is built (a failure leaves it empty: the child,
 * unable to confine itself, primes nothing), and waited for until the deadline. */
static int fork_lookups(const struct stp_mon *m, const struct stp_prime_list *list, int root,
			pid_t *stuck)
{
	struct stp_sandbox_prog filter = { 0 };
	int fds[2], err;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	if (m->o->sandbox != STP_SANDBOX_OFF)
		stp_filters_export(STP_FILTER_LOOKUP, m->o->sandbox, getpid(), &filter, NULL, 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		stp_prime_look_up(list, root, fds[1], m->o->sandbox, &filter,
				  stp_prime_stop_ns(m->deadline));
	}
	stp_sandbox_prog_free(&filter);
	close(fds[1]);
	err = pid < 0 ? -errno : wait_lookups(pid, fds[0], m->deadline, stuck);
	close(fds[0]);
	return err;
}

int stp_monprime_look_up(const struct stp_mon *m, const struct stp_prime_list *list,
			 pid_t *stuck)
{
	int root, err;

	if (!stp_prime_list_count(list))
		return 0;
	root = open_root(m);
	if (root < 0)
		return root == -EXDEV ? 0 : root;
	err = fork_lookups(m, list, root, stuck);
	close(root);
	return err;
}

