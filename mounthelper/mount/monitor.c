/* SPDX-License-Identifier: MIT */
/*
 * Every call the monitor makes with its privilege (monitor.h), and nothing else: as
 * OpenSSH keeps its privileged answers in monitor.c, each function here is one call, or
 * the few that make it safe, on arguments its caller checked. The order of a mount, its
 * checks, messages and protocol are in monmount.c and the mon*.c modules it calls.
 *
 *   open(program) O_PATH                  stipple-mountd, before anything is mounted
 *   vfork, execveat(program)              the daemon, started at once
 *   fork, execve(stipple-fetcher)         a URL's fetcher
 *   open(image), through stp_open_if      the image: no driver's open runs
 *   open(keys dir), openat(key) O_NOFOLLOW  verify's keys, trusted configuration
 *   openat2(hot list) RESOLVE_NO_SYMLINKS record=, in a child bounded by the deadline
 *   openat(dir, name) O_PATH|O_NOFOLLOW   the mount point, a component at a time
 *                                          (mountpoint.c), the mount's root beneath its
 *                                          parent (priming, the watcher's look)
 *   fuse_session_mount                    mount(2) on /dev/fuse as root, on the pinned
 *                                          directory; a user's through fusermount3
 *   open_tree(mount point) clone          root: the device of the mount made, through
 *                                          openat(clone, "..")
 *   pidfd_send_signal, or kill            the daemon, the record= child
 *   fchdir, umount2 MNT_DETACH, or        our own mount after a failure, beneath the
 *     fork, execl(fusermount3 -u)          parent pinned before the mount
 *
 * A fork is no privileged call: each child the monitor forks (the watcher, record='s and
 * priming's) makes its privileged calls through these, or gives privilege up first.
 * Made elsewhere, with the reason: the watcher's drop (watcher.c: bounding set, securebits,
 * no_new_privs, capset: it gives privilege up) and its SIGKILL, through a pidfd, of a
 * daemon or fetcher that stays after its mount (watcher.c, with the CAP_KILL it keeps),
 * a URL's disk cache and store (cachedir.c,
 * store.c: mkdir, open, flock, unlinkat in root's cache folder), the fetcher's kill
 * (fetcher.c), the priming child's kill (prime.c, a confined child of the monitor), and
 * the daemon's confinement in stipple-mountd (sandbox.c: it gives privilege up).
 *
 * Called from the monitor's one thread; stp_monitor_signal also from a signal handler.
 */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuseapi.h"
#include "mountopts.h"
#include "progpath.h"
#include "trustkeys.h"
#include "util.h"

/* What libfuse runs for a user's mount (its FUSERMOUNT_DIR), not what PATH finds. */
#define STP_FUSERMOUNT "/usr/bin/fusermount3"

int stp_monitor_open_program(const char *path)
{
	int fd = open(path, O_PATH | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* The vfork child: system calls only, on memory it shares with the monitor. */
static _Noreturn void exec_daemon(int prog_fd, int sock, char *const argv[], const sigset_t *mask)
{
	static char *const envp[] = { NULL };
	int prog = fcntl(prog_fd, F_DUPFD_CLOEXEC, STP_MONITOR_FD + 1);

	sigprocmask(SIG_SETMASK, mask, NULL);
	if (prog < 0 || stp_progpath_place_socket(sock))
		_exit(127);
	close_range(STP_MONITOR_FD + 1, (unsigned)prog - 1, 0);
	close_range((unsigned)prog + 1, ~0u, 0);
	syscall(SYS_execveat, prog, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

pid_t stp_monitor_spawn_daemon(int prog_fd, int sock, int other, char *const argv[],
			       const sigset_t *mask)
{
	pid_t pid;

	fflush(NULL);
	pid = vfork();
	if (pid == 0) {
		close(other);
		exec_daemon(prog_fd, sock, argv, mask);
	}
	return pid < 0 ? -errno : pid;
}

pid_t stp_monitor_spawn_fetcher(const char *path, int ctl, char *const argv[], char *const env[])
{
	sigset_t none;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid != 0)
		return pid < 0 ? -errno : pid;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) || stp_progpath_place_socket(ctl))
		_exit(127);
	close_range(STP_MONITOR_FD + 1, ~0u, 0);
	execve(path, argv, env);
	fprintf(stderr, "%s: %s\n", path, stp_strerror(-errno));
	_exit(127);
}

int stp_monitor_open_image(const char *path)
{
	/* a device a link leads to is not opened, its driver not run (util.h) */
	return stp_open_if(path, O_RDONLY | O_NOCTTY, stp_node_is_image);
}

int stp_monitor_open_keys_dir(void)
{
	int fd = open(STP_TRUSTED_KEYS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_open_key(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, STP_TRUSTKEYS_OPEN_FLAGS);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_open_record(const char *path)
{
	struct open_how how = { .flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
					 O_NONBLOCK | O_NOCTTY,
				.mode = 0644 };
	int fd;

	if (geteuid() == 0)
		how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0)
		return errno == ENXIO ? -EINVAL : -errno; /* a FIFO no one reads */
	return fd;
}

int stp_monitor_open_node(int at, const char *name)
{
	int fd = openat(at, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_open_dir(int at, const char *name)
{
	int fd = openat(at, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_fuse_mount(struct fuse_session *se, const char *target, bool *mounted)
{
	int fd;

	*mounted = !fuse_session_mount(se, target);
	if (!*mounted)
		return -EIO;
	fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? -errno : fd;
}

int stp_monitor_clone_tree(int dir_fd)
{
	int tree = (int)syscall(SYS_open_tree, dir_fd, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);

	return tree < 0 ? -errno : tree;
}

void stp_monitor_signal(int pidfd, pid_t pid, int sig)
{
	if (pidfd < 0 || syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0))
		kill(pid, sig);
}

/* Root never runs a program here (the watcher's uid 0 could regain its capabilities by
 * an exec): it unmounts beneath the parent, not by a path that may have changed. */
static void unmount_beneath(int parent_fd, const char *base)
{
	int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (cwd < 0)
		return;
	if (!fchdir(parent_fd))
		umount2(base, MNT_DETACH | UMOUNT_NOFOLLOW);
	if (fchdir(cwd)) {
		/* the monitor's directory is only where it started; nothing holds it */
	}
	close(cwd);
}

void stp_monitor_unmount(int parent_fd, const char *base, const char *mountpoint)
{
	pid_t pid;

	if (geteuid() == 0) {
		unmount_beneath(parent_fd, base);
		return;
	}
	pid = fork();
	if (pid == 0) {
		execl(STP_FUSERMOUNT, "fusermount3", "-u", "-q", "-z", mountpoint, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
}
