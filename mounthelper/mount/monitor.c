/* SPDX-License-Identifier: MIT */
/*
 * Every call the monitor makes with its privilege (monitor.h), and nothing else: as
 * OpenSSH keeps its privileged answers in monitor.c, each function here is one call, or
 * the few that make it safe, on arguments its caller checked. The order of a mount, its
 * checks, messages and protocol are in monmount.c and the mon*.c modules it calls.
 *
 * Each call, why it needs the monitor's privilege, and what bounds it:
 *
 *   open(program) O_PATH                  stipple-mountd, before anything is mounted
 *   vfork, execveat(program)              the daemon, started at once
 *   fork, execve(stipple-fetcher)         a URL's fetcher
 *   execv(our program)                    mount.stipple and `stipple mount`, for a URL
 *                                          or verify=: mount.stipple-checked, the same
 *                                          monitor; `stipple`, for its other commands:
 *                                          stipple-readers (both in the libexec folder,
 *                                          before anything is opened or mounted)
 *   open, setns(mount namespace)          -N: root's, before any path is resolved
 *   open(image), through stp_open_if      the image: no driver's open runs
 *   open(keys dir), openat(key) O_NOFOLLOW  verify's keys, trusted configuration
 *   openat2(hot list's dir) O_PATH,       record=, in a child bounded by the deadline;
 *     RESOLVE_NO_SYMLINKS, then openat     the list made under a new name (O_EXCL), so
 *     O_EXCL|O_NOFOLLOW of a new name      that no existing file is ever written
 *   fsync, renameat or unlinkat (in dir)  the list renamed over record='s name once the
 *                                          daemon said it is whole, else removed: by
 *                                          the watcher (or -f's monitor), at the end
 *   openat(dir, name) O_PATH|O_NOFOLLOW   the mount point, a component at a time
 *                                          (mountpoint.c), the mount's root beneath its
 *                                          parent (priming, the watcher's look)
 *   fuse_session_mount                    mount(2) on /dev/fuse as root, on the pinned
 *                                          directory; a user's through fusermount3
 *   open_tree(mount point) clone          root: the device of the mount made, through
 *                                          openat(clone, "..")
 *   pidfd_send_signal, or kill            the daemon, the fetcher, the record= and
 *                                          priming children; the watcher's SIGKILL of a
 *                                          daemon or fetcher that stays (pidfd only)
 *   fchdir, umount2 MNT_DETACH, or        our own mount after a failure, beneath the
 *     fork, execl(fusermount3 -u)          parent pinned before the mount
 *   prctl(CAPBSET_DROP, SECUREBITS,       the watcher gives up all but CAP_SYS_ADMIN,
 *     NO_NEW_PRIVS), setfsuid, capset       CAP_DAC_READ_SEARCH and CAP_KILL, for good;
 *                                          record='s rename as its directory's owner
 *   open(/proc/PID/stat, limits)          the fetcher's start and limits: read-only
 * In the disk cache's folder and the block store (cachedir.c, store.c: which names,
 * whose, how much, what goes), as the mounting user, in a folder checked to be that
 * user's and writable by no one else, one name beneath a directory descriptor:
 *   mkdirat 0700, openat O_DIRECTORY      the folder, "blocks", its fan-out folders
 *   openat O_NOFOLLOW|O_NONBLOCK, made    the secret, the key, the ledger, cache and
 *     only O_EXCL 0600                      block files: never a link, never a FIFO's
 *                                           wait, never someone else's file taken
 *   open(/proc/self/fd/N) O_RDWR          an empty block file handed writable
 *   unlinkat, renameat (within the dir)   damaged files; the ledger replaced whole
 *   openat, flock(LOCK_EX|LOCK_NB),       eviction: only a file no mount holds
 *     unlinkat
 *   futimens(now), fsetxattr              the LRU order; a block file found sound
 *
 * A fork is no privileged call: each child the monitor forks (the watcher, record='s and
 * priming's) makes its privileged calls through these, or gives privilege up first.
 * Made elsewhere, with the reason: the confinement of the daemon, the fetcher and the
 * priming child (sandbox.c: it gives privilege up) and the priming child's lookups
 * once confined (prime.c). tests/tools/privileged_calls.py (the unit test
 * privileged_calls) checks that no other module of the monitor makes such a call.
 *
 * Called from the monitor's one thread; stp_monitor_signal also from a signal handler.
 */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
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

int stp_monitor_open_record_dir(const char *path)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC };
	int fd;

	if (geteuid() == 0)
		how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

int stp_monitor_record_create(int dir_fd, const char *temp)
{
	int fd = openat(dir_fd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
			O_NOCTTY, 0644);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_record_place(int dir_fd, int fd, const char *temp, const char *name)
{
	int dir;

	if (fsync(fd) || renameat(dir_fd, temp, dir_fd, name))
		return -errno;
	/* the rename outlives a crash once the directory is on disk; an owner who gave the
	 * directory no read right (w+x is all the rename needs) keeps only its atomicity */
	dir = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir >= 0) {
		fsync(dir); /* the list is in place whatever it says */
		close(dir);
	}
	return 0;
}

int stp_monitor_record_drop(int dir_fd, const char *temp)
{
	return unlinkat(dir_fd, temp, 0) ? -errno : 0;
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

/* By the pidfd when there is one: once its process is reaped it says ESRCH, where a
 * kill(2) by number would reach whatever process took the number since. The number only
 * without a pidfd, or on a kernel without pidfd_send_signal. Async-signal-safe. */
int stp_monitor_signal(int pidfd, pid_t pid, int sig)
{
	if (pidfd >= 0) {
		if (!syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0))
			return 0;
		if (errno != ENOSYS)
			return -errno;
	}
	if (pid <= 0) /* never a process group */
		return -ESRCH;
	return kill(pid, sig) ? -errno : 0;
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

int stp_monitor_exec_own(const char *path, char *const argv[])
{
	execv(path, argv);
	return -errno;
}

int stp_monitor_enter_namespace(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0 || setns(fd, CLONE_NEWNS))
		err = -errno;
	if (fd >= 0)
		close(fd);
	return err;
}

/* Root's watcher keeps the two capabilities an unmount needs, CAP_KILL to end what the
 * mount leaves (the sandbox's user: kill(2)'s rule holds for pidfds too), and no way
 * back to the others: uid 0 would regain them all at an exec, so the bounding set is
 * emptied, the securebits that give root its capabilities at exec and keep them across
 * setuid are locked off, and no_new_privs is set. With record=, the rename of the
 * finished list is made as the owner of its directory (its file-system uid, set while
 * CAP_SETUID is still held: it moves nothing but who the file system sees, not who may
 * signal the watcher), so no capability over other users' files is kept for it. The
 * calls are made directly, as the sandbox's are: libcap's loading and its
 * constructor's probe of the kernel cost every mount's start. */
int stp_monitor_drop_to_watcher(int record_dir)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	static const int kept[] = { CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH, CAP_KILL };
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
	struct stat dir;
	int c;

	if (geteuid() != 0)
		return 0; /* nothing to drop: fusermount3 unmounts as the user */
	/* every capability the kernel knows: until PR_CAPBSET_READ says EINVAL */
	for (c = 0; prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0))
			return -errno;
	if (errno != EINVAL || prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (record_dir >= 0) {
		if (fstat(record_dir, &dir))
			return -errno;
		setfsuid(dir.st_uid);
		if ((uid_t)setfsuid((uid_t)-1) != dir.st_uid) /* it says the uid it has */
			return -EPERM;
	}
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		int cap = kept[i];

		caps[CAP_TO_INDEX(cap)].permitted |= CAP_TO_MASK(cap);
		caps[CAP_TO_INDEX(cap)].effective |= CAP_TO_MASK(cap);
	}
	return syscall(SYS_capset, &head, caps) ? -errno : 0;
}

int stp_monitor_open_proc(pid_t pid, const char *name)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int stp_monitor_cache_mkdir(int at, const char *name)
{
	return mkdirat(at, name, 0700) && errno != EEXIST ? -errno : 0;
}

int stp_monitor_cache_open_dir(int at, const char *name)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_cache_open(int at, const char *name, int flags)
{
	int how = (flags & (O_ACCMODE | O_CREAT)) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
	int fd = openat(at, name, flags & O_CREAT ? how | O_EXCL : how, 0600);

	return fd < 0 ? -errno : fd;
}

int stp_monitor_cache_reopen_rw(int fd)
{
	char path[32];
	int rw;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rw = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	return rw < 0 ? -errno : rw;
}

int stp_monitor_cache_remove(int at, const char *name)
{
	return unlinkat(at, name, 0) ? -errno : 0;
}

int stp_monitor_cache_rename(int at, const char *from, const char *to)
{
	return renameat(at, from, at, to) ? -errno : 0;
}

/* Whether NAME in AT is still the file FD has open: another mount of the store may have
 * replaced a damaged file under that name since FD was opened. */
static bool still_named(int at, const char *name, int fd)
{
	struct stat a, b;

	return !fstat(fd, &a) && !fstatat(at, name, &b, AT_SYMLINK_NOFOLLOW) &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int stp_monitor_cache_remove_unused(int at, const char *name)
{
	int fd = stp_monitor_cache_open(at, name, O_RDONLY), err;

	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB))
		err = -errno;
	else
		err = still_named(at, name, fd) ? stp_monitor_cache_remove(at, name) : -EAGAIN;
	close(fd); /* the lock goes with it */
	return err;
}

int stp_monitor_cache_touch(int fd)
{
	return futimens(fd, NULL) ? -errno : 0;
}

int stp_monitor_cache_mark(int fd, const char *xattr)
{
	return fsetxattr(fd, xattr, "1", 1, 0) ? -errno : 0;
}
