/* SPDX-License-Identifier: MIT */
/*
 * The privileged side of a mount (monitor.h): every privileged call of a mount, in the
 * order made, each made here except the disk cache folder's and the block store's, which
 * are all in cachedir.c and store.c (named below). Those are a URL mount's file calls on
 * the caller's own cache folder (root's /var/cache/stipple, a user's ~/.cache/stipple),
 * each beneath a descriptor opened without following links; they run as the caller, not
 * as the sandbox user, because the daemon runs as that user and must not be able to
 * change the cache behind the monitor. They stay in their two modules (500 lines). What needs no privilege runs beside
 * it: the messages (monlog.c), the conversation with the daemon (montalk.c), the
 * signals (monsig.c), the memory bound (budget.c), the fetcher's channels (fetcher.c),
 * the keys' listing and parsing (trustkeys.c, monchecks.c), the priming lookups (prime.c), the watcher's
 * housekeeping (watcher.c).
 *
 *   open(stipple-mountd) O_PATH, vfork,      first: the daemon loads and (told the
 *     execveat                                 sandbox mode) confines its files while
 *                                              the monitor checks; it waits for its setup
 *   open(public key) O_NOFOLLOW, or          verify: trusted configuration, read and
 *     open(keys dir), openat each *.pub        parsed by monchecks.c (a URL or verify=
 *                                              runs in mount.stipple-checked: monitor.h)
 *   open(image)                               the image fd; its superblock read through it
 *                                             (not an image: its first bytes, to say what
 *                                             it is instead of the library, whose line is
 *                                             held until then: cli/foreign.h)
 *   a URL: fork, execve stipple-fetcher       its channels and hello (fetcher.c), the
 *     (proxy variables only, no signal held)   superblock through them
 *     mkdir, open, flock the disk cache        the cache file: every call on its folder
 *     folder; its secret, eviction, file        is in cachedir.c
 *     open, flock, unlinkat in the store        a published image's blocks: every call on
 *                                              the store is in store.c
 *   openat(each component) O_PATH|O_NOFOLLOW  the mount point and its parent, pinned
 *     (mountpoint.c), statx, and only when     a directory, not mounted on (unless stack)
 *     that shows a mount there, mountinfo
 *   open(hot list), ftruncate                 record: created here, emptied only once
 *                                              the mount is live
 *   fuse_session_mount                        libfuse's mount(2) on /dev/fuse, as root on
 *                                              /proc/self/fd/N, the directory checked; a
 *                                              user's through fusermount3; the connection
 *                                              is then handed to the daemon, which
 *                                              confines itself
 *   open_tree(mount point) clone, openat ..,  root: the device of the mount made, for
 *     statx (mountpoint.c)                     priming; the watcher closes the clone
 *   pidfd_send_signal, waitpid                the daemon, killed when it fails or is late
 *   fchdir, umount2 (a user: fusermount3 -u)  after a failure, our own mount only, found
 *                                              beneath the parent opened before the fork;
 *                                              root never runs fusermount3
 *   openat(parent, base) O_PATH, fork,        priming, in a child confined first (the
 *     kill at the deadline, waitpid            lookups: prime.c)
 *   fork; bounding set emptied, securebits    the watcher, forked while the daemon opens
 *     locked, no_new_privs, capset; then       the image, staying once the mount is live
 *     openat, fstatfs, umount2                 with CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH
 *                                              only: when the daemon ends and left its
 *                                              mount dead, it unmounts it
 *
 * Privilege is also dropped elsewhere: by the daemon's sandbox (sandbox.c), in
 * stipple-mountd.
 */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "budget.h"
#include "daemon.h"
#include "diskcache.h"
#include "filters.h"
#include "foreign.h"
#include "fuseapi.h"
#include "image.h"
#include "imgsrc.h"
#include "monlog.h"
#include "monproto.h"
#include "monsig.h"
#include "montalk.h"
#include "mountinfo.h"
#include "mountopts.h"
#include "mountpoint.h"
#include "prime.h"
#include "progpath.h"
#include "sandbox.h"
#include "setup.h"
#include "trustkeys.h"
#include "util.h"
#include "watcher.h"

/* What libfuse runs for a user's mount (its FUSERMOUNT_DIR), not what PATH finds. */
#define STP_FUSERMOUNT "/usr/bin/fusermount3"

struct monitor {
	const struct stp_mount_opts *o;
	const char *prog;
	const struct stp_monitor_checks *checks; /* NULL: no URL, no verify= (monitor.h) */
	struct stp_superblock sb;
	struct stp_handover h; /* what the daemon is handed; closed once it is */
	int mountd_fd;        /* stipple-mountd, opened before the mount (O_PATH) */
	int mp_fd;            /* O_PATH of the mount point, checked: root mounts on it */
	bool mp_mounted;      /* something may be mounted there (else no table is read) */
	int record_fd;        /* the hot list, kept until LIVE: emptied only then */
	int parent_fd;        /* O_PATH of the mount point's parent: unmount beneath it */
	const char *base;     /* the mount point's last component */
	unsigned mounts_before; /* our kind of mount at the mount point, before the fork */
	pid_t pid;            /* the daemon */
	int pidfd;            /* the daemon, for signals that cannot reach a reused pid */
	bool reaped;          /* the daemon was waited for: never signal it again */
	int status;           /* its wait status, once reaped */
	bool mounted;         /* the daemon said the FUSE mount exists */
	dev_t mount_dev;      /* the device of the mount made, when root (0: not known) */
	int clone_fd;         /* the tree cloned to find it, for the watcher to close (-1) */
	pid_t watcher;        /* forked before LIVE, waiting for its word (-1: none) */
	int watcher_go;       /* the watcher's word: a byte, it stays; closed, it goes */
	int64_t deadline;     /* CLOCK_MONOTONIC ns */
	struct stp_sandbox_prog lookup_filter; /* the priming child's, built while the
						* daemon opens the image (empty: none) */
	sigset_t saved_mask;  /* the mask before the ending signals were held */
};

static void init(struct monitor *m, const struct stp_mount_opts *o, const char *prog,
		 const struct stp_monitor_checks *checks)
{
	*m = (struct monitor){ .o = o, .prog = prog, .checks = checks, .mountd_fd = -1, .mp_fd = -1, .parent_fd = -1,
			       .record_fd = -1, .clone_fd = -1,
			       .pidfd = -1, .watcher = -1, .watcher_go = -1,
			       .h = { .image_fd = -1, .record_fd = -1, .fuse_fd = -1,
				      .cache = { .fd = -1 } } };
	/* every descriptor -1: a zero would be closed as the monitor's stdin at the hand-over */
	stp_fetcher_init(&m->h.fetcher);
	stp_monlog_route(prog);
}

/* What the daemon takes over, and stipple-mountd: the monitor keeps none of it. */
static void release(struct monitor *m)
{
	stp_montalk_release(&m->h);
	if (m->mountd_fd >= 0)
		close(m->mountd_fd);
	if (m->mp_fd >= 0)
		close(m->mp_fd);
	m->mountd_fd = m->mp_fd = -1;
}

/* verify without a value: every *.pub of the trusted keys folder, in name order, each
 * opened beneath it. */
static int read_trusted_keys(struct monitor *m)
{
	int dirfd = open(STP_TRUSTED_KEYS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stp_trustkeys_names l;
	char shown[512];
	int err = stp_trustkeys_list(m->prog, dirfd < 0 ? -errno : dirfd, &l);

	if (!err && !(m->h.keys = calloc(l.n, sizeof(*m->h.keys))))
		err = -ENOMEM;
	for (unsigned i = 0; !err && i < l.n; i++) {
		int fd = openat(dirfd, l.names[i]->d_name, STP_TRUSTKEYS_OPEN_FLAGS);

		snprintf(shown, sizeof(shown), "%s/%s", STP_TRUSTED_KEYS_DIR, l.names[i]->d_name);
		err = m->checks->take_key(m->prog, fd < 0 ? -errno : fd, shown, &m->h.keys[i]);
		m->h.nkeys += !err;
	}
	stp_trustkeys_names_free(&l);
	if (dirfd >= 0)
		close(dirfd);
	return err;
}

/* verify's keys, read as the caller's own configuration before the image (trustkeys.h):
 * the file verify=PUBKEY names, or the trusted keys folder's. */
static int read_keys(struct monitor *m)
{
	int fd;

	if (!m->o->verify)
		return 0;
	if (!m->o->verify_key)
		return read_trusted_keys(m);
	m->h.keys = calloc(1, sizeof(*m->h.keys));
	if (!m->h.keys)
		return -ENOMEM;
	m->h.nkeys = 1;
	fd = open(m->o->verify_key, STP_TRUSTKEYS_OPEN_FLAGS);
	return m->checks->take_key(m->prog, fd < 0 ? -errno : fd, m->o->verify_key, m->h.keys);
}

/* The daemon, found before anything is mounted: a missing program is said at once. A
 * URL or verify= needs stipple-mountd-checked, which links libcrypto; the rest
 * stipple-mountd, which starts without it (daemonchecks.h). */
static int open_mountd(struct monitor *m)
{
	const char *name = stp_mountopts_needs_checks(m->o) ? STP_MOUNTD_CHECKED_NAME : STP_MOUNTD_NAME;
	char path[4096];
	int err = stp_progpath(name, STP_LIBEXEC_DIR, path, sizeof(path));

	if (!err && (m->mountd_fd = open(path, O_PATH | O_CLOEXEC)) < 0)
		err = -errno;
	if (err)
		stp_monlog_say(m->prog, "%s: %s", path, stp_strerror(err));
	return err;
}

/* The daemon's process: nothing but the socket on STP_MONITOR_FD and stdio, the mask of
 * before, an empty environment, then stipple-mountd (or -checked). Its arguments only
 * tell ps which mount it serves (the image as messages name it: no query), both as
 * stipple-mountd; it reads none of them.
 * Run in a vfork child (spawn_daemon): system calls only, on memory it shares with the
 * monitor, and nothing written there but its own stack. */
static _Noreturn void exec_daemon(struct monitor *m, int fd)
{
	char *const argv[] = { STP_MOUNTD_NAME, (char *)stp_monlog_image(m->o), m->o->mountpoint, NULL };
	static char *const envp[] = { NULL };
	int prog = fcntl(m->mountd_fd, F_DUPFD_CLOEXEC, STP_MONITOR_FD + 1);

	sigprocmask(SIG_SETMASK, &m->saved_mask, NULL);
	if (prog < 0 || stp_progpath_place_socket(fd))
		_exit(127);
	close_range(STP_MONITOR_FD + 1, (unsigned)prog - 1, 0);
	close_range((unsigned)prog + 1, ~0u, 0);
	syscall(SYS_execveat, prog, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

/* Starts the daemon's process, which execs stipple-mountd at once: its start (the
 * dynamic loader) overlaps the monitor's checks and the mount, and it waits for its
 * setup (hand_over). vfork, not fork: the monitor is suspended only until the exec, and
 * its address space is neither copied nor write-protected, so its own writes after this
 * take no copy-on-write faults (each a page copy and a TLB flush; on this VM they made
 * a good part of a mount's cost). No handler is installed for the signals the child
 * unblocks (stp_monsig_forward comes later), so none runs on the shared memory. */
static int spawn_daemon(struct monitor *m, int sv[2])
{
	fflush(NULL);
	m->pid = vfork();
	if (m->pid == 0) {
		close(sv[0]);
		exec_daemon(m, sv[1]);
	}
	close(sv[1]);
	sv[1] = -1;
	if (m->pid < 0) {
		stp_monlog_say(m->prog, "fork: %s", stp_strerror(-errno));
		return -EAGAIN;
	}
	m->pidfd = (int)syscall(SYS_pidfd_open, m->pid, 0);
	/* the mode first: root's daemon builds its empty root while the monitor works;
	 * then its filter, built while it execs */
	return stp_montalk_send_sandbox(sv[0], m->o, m->prog, m->pid);
}

/* Waits for the daemon, killing it first when asked; once only. */
static void reap(struct monitor *m, bool kill_first)
{
	if (m->reaped)
		return;
	if (kill_first && (m->pidfd < 0 || syscall(SYS_pidfd_send_signal, m->pidfd, SIGKILL, NULL, 0)))
		kill(m->pid, SIGKILL);
	while (waitpid(m->pid, &m->status, 0) < 0 && errno == EINTR)
		;
	m->reaped = true;
}

/* The daemon died or broke the protocol before the mount was live: it is stopped (a
 * daemon that closed its end may still be running) and the reason told. */
static int daemon_lost(struct monitor *m)
{
	bool gone = waitpid(m->pid, &m->status, WNOHANG) == m->pid;

	m->reaped = m->reaped || gone;
	reap(m, true);
	if (!gone)
		stp_monlog_say(m->prog, "the daemon broke off before the mount was live");
	else if (WIFSIGNALED(m->status))
		stp_monlog_say(m->prog, "the daemon died of signal %d before the mount was live",
		    WTERMSIG(m->status));
	else
		stp_monlog_say(m->prog, "the daemon exited before the mount was live");
	return -EIO;
}

/* A published image: its blocks' files in the store are handed to the fetcher
 * (store.h), unless -f or cache_size=0 say no store; the fetcher then serves. */
static void attach_store(struct monitor *m)
{
	const struct stp_mount_opts *o = m->o;
	char *dir = NULL;

	if (o->cache_size && !o->fake)
		dir = o->cache_dir ? strdup(o->cache_dir) : m->checks->cache_default_dir();
	if (dir)
		m->checks->store_attach(dir, o->cache_size, m->prog, m->h.fetcher.ctl[0], &m->sb,
					m->h.fetcher.blocks, stp_fetcher_file_max(&m->h.fetcher),
					m->h.fetcher.pid);
	free(dir);
	stp_fetcher_close_ctl(&m->h.fetcher);
}

/* The fetcher's process: the control socket on STP_MONITOR_FD and stdio, then
 * stipple-fetcher with no signal blocked (the monitor blocks the ones it waits for) and
 * only the proxy variables of the caller's environment. Its argument only names the URL
 * for ps (without query). */
static _Noreturn void exec_fetcher(const struct stp_mount_opts *o, int ctl)
{
	char path[4096], *const argv[] = { STP_FETCHER_NAME, o->image_path, NULL };
	char *env[STP_FETCHER_ENV_MAX];
	sigset_t none;

	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) ||
	    stp_progpath_place_socket(ctl) ||
	    stp_progpath(STP_FETCHER_NAME, STP_LIBEXEC_DIR, path, sizeof(path)))
		_exit(127);
	close_range(STP_MONITOR_FD + 1, ~0u, 0);
	stp_fetcher_env(env);
	execve(path, argv, env);
	fprintf(stderr, "%s: %s\n", path, stp_strerror(-errno));
	_exit(127);
}

/* Forks the fetcher's process, which keeps its end of the control socket alone. 0, or
 * the fork's negative errno. */
static int spawn_fetcher(struct monitor *m)
{
	struct stp_fetcher *f = &m->h.fetcher;
	int err;

	fflush(NULL);
	f->pid = fork();
	if (f->pid == 0)
		exec_fetcher(m->o, f->ctl[1]);
	err = f->pid < 0 ? -errno : 0;
	close(f->ctl[1]);
	f->ctl[1] = -1;
	return err;
}

/* The fetcher, spawned, gets its filter, built here while it execs (without one, it
 * builds its own), then its setup. */
static int greet_fetcher(struct monitor *m)
{
	struct stp_sandbox_prog filter = { 0 };
	int err = spawn_fetcher(m);

	if (!err && m->o->sandbox != STP_SANDBOX_OFF)
		stp_filters_export(STP_FILTER_FETCHER, m->o->sandbox, m->h.fetcher.pid, &filter,
				   NULL, 0);
	err = stp_fetcher_greet(m->o, m->prog, &m->h.fetcher, err, &filter);
	stp_sandbox_prog_free(&filter);
	return err;
}

/* A URL: the fetcher probes it, the superblock comes over its first channel, and the
 * disk cache file is opened (the daemon cannot open it later). */
static int open_url(struct monitor *m)
{
	const struct stp_mount_opts *o = m->o;
	struct stp_imgsrc *src = NULL;
	uint8_t raw[STP_SB_SIZE];
	struct stp_diskcache_id id = { o->image_path, raw, sizeof(raw), &m->sb, 0, "" };
	char *dir;
	int err = stp_fetcher_prepare(o, m->prog, &m->h.fetcher);

	if (!err)
		err = greet_fetcher(m);
	if (err)
		return err;
	err = m->checks->remote_open(m->h.fetcher.chans, 1, m->h.fetcher.size,
				     stp_fetcher_silence_s(o->timeout_s),
				     stp_monlog_image(o), false, &src);
	if (!err)
		err = stp_image_read_superblock_src(src, &m->sb);
	if (!err)
		err = stp_imgsrc_read(src, raw, sizeof(raw), 0);
	stp_imgsrc_close(src);
	stp_monlog_unreadable(m->prog, m->o, err);
	/* -f checks, it leaves nothing behind; a published image has the store instead */
	if (err || !o->cache_size || o->fake || m->h.fetcher.blocks)
		return err;
	dir = o->cache_dir ? strdup(o->cache_dir) : m->checks->cache_default_dir();
	id.size = m->h.fetcher.size;
	id.validator = m->h.fetcher.validator;
	if (dir) /* sized by the checked superblock, not by what the fetcher says */
		m->checks->cache_open_file(dir, &id, o->cache_size, m->prog, &m->h.cache);
	free(dir);
	return 0;
}

static int open_image(struct monitor *m)
{
	const struct stp_mount_opts *o = m->o;
	char what[512];
	bool foreign;
	int err;

	if (o->is_url)
		return open_url(m);
	m->h.image_fd = open(o->image_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (m->h.image_fd < 0) {
		err = -errno;
		stp_monlog_say(m->prog, "%s: %s", stp_monlog_image(o), stp_strerror(-errno));
		return err;
	}
	/* a tar, a squashfs, an empty file: what it is and what to run instead, instead of
	 * the library's "bad magic", which is held until then (an image: read once, 256
	 * bytes at 0) */
	stp_monlog_hold();
	err = stp_image_read_superblock(m->h.image_fd, o->image_path, &m->sb);
	foreign = err == -EUCLEAN &&
		  stp_foreign_describe_fd(m->h.image_fd, stp_monlog_image(o), what, sizeof(what));
	stp_monlog_release(foreign);
	if (foreign)
		stp_monlog_say(m->prog, "%s: %s", stp_monlog_image(o), what);
	else if (err != -EINVAL) /* not a file, already said */
		stp_monlog_unreadable(m->prog, m->o, err);
	return err;
}

/* Whether the directory pinned may be a mount point: not when the kernel says it is no
 * mount's root (statx, Linux 5.8; DONT_SYNC: no request to a FUSE daemon there). Then
 * nothing is mounted on it, and the mount table (libmount's parse of all of it, twice,
 * on every mount's way to live) need not be read. */
static bool may_be_mounted_on(int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &stx) ||
	    !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return true;
	return stx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
}

/* A second mount on a directory hides the first without a word: refused, naming what is
 * there, unless -o stack asks for it. */
static int check_not_mounted(const struct monitor *m)
{
	char source[256], fstype[256];
	int err = m->o->stack || !m->mp_mounted ? -ENOENT :
		  stp_mountinfo_top(m->o->mountpoint, source, fstype, sizeof(source));

	if (err == -ENOENT)
		return 0;
	if (err)
		stp_monlog_say(m->prog, "mount point %s: /proc/self/mountinfo: %s",
			       m->o->mountpoint, stp_strerror(err));
	else
		stp_monlog_say(m->prog, "mount point %s: already a mount point (%s, type %s); "
			       "unmount it first, or mount on top of it with -o stack",
			       m->o->mountpoint, source, fstype);
	return err ? err : -EBUSY;
}

/* The mount point is opened here, once, and pinned: what is checked is what is mounted on
 * (mountpoint.h). */
static int check_mountpoint(struct monitor *m)
{
	const char *mp = m->o->mountpoint;
	int err = stp_mountpoint_open(mp, &m->mp_fd, &m->parent_fd);

	if (err == -ENOTDIR)
		stp_monlog_say(m->prog, "mount point %s: not a directory", mp);
	else if (err == -ELOOP)
		stp_monlog_say(m->prog, "mount point %s: a symlink on its path, where there was "
			       "none when the options were read: refused", mp);
	else if (err)
		stp_monlog_say(m->prog, "mount point %s: %s", mp, stp_strerror(err));
	if (err)
		return err;
	m->mp_mounted = may_be_mounted_on(m->mp_fd);
	return check_not_mounted(m);
}

static int prepare(struct monitor *m)
{
	int err = read_keys(m);

	if (!err)
		err = open_image(m);
	if (!err)
		err = stp_trustkeys_check_signed(m->o, &m->sb, m->prog);
	if (!err)
		err = stp_budget_check(m->o, &m->sb, m->h.fetcher.index_len,
				       m->o->is_url ? stp_fetcher_data_max(&m->h.fetcher) : 0,
				       m->prog, &m->h.mem_limit);
	if (!err && m->h.fetcher.blocks) /* files made for an image that passed, not before */
		attach_store(m);
	if (!err)
		err = check_mountpoint(m);
	return err;
}

/* The hot list, opened as root: through no symbolic link anywhere on its path (a user
 * who owns a directory on it could point it at any file for root to truncate and
 * overwrite), a regular file (opened without waiting: a FIFO would hold the mount until
 * someone opens its other end, and then take whatever is written; a device is no list),
 * with no other hard link. An fd or a negative errno (-ELOOP, -EMLINK, -EINVAL for
 * those). */
static int open_record_file(const char *path)
{
	struct open_how how = { .flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
					 O_NONBLOCK | O_NOCTTY,
				.mode = 0644 };
	struct stat st;
	int fd, err = 0;

	if (geteuid() == 0)
		how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0)
		return errno == ENXIO ? -EINVAL : -errno; /* a FIFO no one reads */
	if (fstat(fd, &st))
		err = -errno;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if (st.st_nlink > 1)
		err = -EMLINK;
	if (err)
		close(fd);
	return err ? err : fd;
}

/* The standard descriptors onto /dev/null (an open that cannot wait). */
static void keep_no_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	for (int i = 0; null >= 0 && i <= 2; i++)
		dup2(null, i);
}

/* open_record_file in a child: the path walk may wait on a file system that never
 * answers (a user's FUSE mount with allow_other on a directory of the path), which no
 * flag of open(2) bounds. The descriptor comes back over a socket; past DEADLINE the
 * child is killed and left (init reaps it once its file system lets it go): -ETIMEDOUT. */
static int open_record_bounded(const char *path, int64_t deadline)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int sv[2], fd = -1, err;
	unsigned nfds = 0;
	uint32_t type;
	int32_t rc;
	size_t len;
	pid_t pid;

	if (!buf || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		free(buf);
		return -ENOMEM;
	}
	pid = fork();
	if (pid == 0) {
		keep_no_stdio(); /* a child left stuck must not hold its caller's pipes open */
		fd = open_record_file(path);
		rc = fd < 0 ? fd : 0;
		stp_msg_send_fds(sv[1], STP_MSG_RECORD, &rc, sizeof(rc), &fd, fd >= 0);
		_exit(0);
	}
	close(sv[1]);
	err = pid < 0 ? -errno : stp_msg_recv_fds(sv[0], deadline, &type, buf, STP_MSG_MAX,
						   &len, &fd, 1, &nfds);
	if (!err && (type != STP_MSG_RECORD || len != sizeof(rc)))
		err = -EPROTO;
	if (!err) {
		memcpy(&rc, buf, sizeof(rc));
		err = rc < 0 ? rc : nfds == 1 ? 0 : -EPROTO;
	}
	if (err && nfds)
		close(fd);
	close(sv[0]);
	free(buf);
	if (pid > 0 && err == -ETIMEDOUT) {
		/* not waited for: a request the file system has read ignores even SIGKILL */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, WNOHANG);
	} else if (pid > 0) {
		waitpid(pid, NULL, 0);
	}
	return err ? err : fd;
}

/* The hot list file is opened here: the confined daemon can open nothing. It is emptied
 * once the mount is live (empty_record), not before: a mount that fails leaves the list
 * of an earlier run as it was. */
static int open_record(struct monitor *m)
{
	m->h.record_fd = -1;
	if (!m->o->record)
		return 0;
	m->h.record_fd = open_record_bounded(m->o->record, (int64_t)stp_now_ns() +
					     STP_MOUNT_DEADLINE_MS * 1000000ll);
	if (m->h.record_fd == -ETIMEDOUT)
		stp_monlog_say(m->prog, "record=%s: its path did not answer within %d s: refused",
			       m->o->record, STP_MOUNT_DEADLINE_MS / 1000);
	else if (m->h.record_fd == -ELOOP)
		stp_monlog_say(m->prog, "record=%s: a symbolic link on its path: refused (name the "
			       "file by its resolved path)", m->o->record);
	else if (m->h.record_fd == -EMLINK)
		stp_monlog_say(m->prog, "record=%s: the file has another hard link: refused",
			       m->o->record);
	else if (m->h.record_fd == -EINVAL)
		stp_monlog_say(m->prog, "record=%s: not a regular file: refused", m->o->record);
	else if (m->h.record_fd < 0)
		stp_monlog_say(m->prog, "%s: %s", m->o->record, stp_strerror(m->h.record_fd));
	if (m->h.record_fd < 0) {
		int err = m->h.record_fd;

		m->h.record_fd = -1;
		return err;
	}
	m->record_fd = fcntl(m->h.record_fd, F_DUPFD_CLOEXEC, 3);
	return m->record_fd < 0 ? -errno : 0;
}

/* The mount is live: the hot list is emptied for the daemon to write at its end (it
 * writes from the start, and cannot truncate). */
static void empty_record(struct monitor *m)
{
	if (m->record_fd < 0)
		return;
	if (ftruncate(m->record_fd, 0))
		stp_monlog_say(m->prog, "warning: %s: %s", m->o->record, stp_strerror(-errno));
	close(m->record_fd);
	m->record_fd = -1;
}

/* Where an unmount will look: beneath the parent pinned with the mount point (a path
 * swapped later for a symlink cannot redirect root's umount2), and what is mounted there
 * already. */
static int remember_mountpoint(struct monitor *m)
{
	const char *mp = m->o->mountpoint, *slash = strrchr(mp, '/');
	int top;

	m->base = slash ? slash + 1 : mp;
	if (m->mp_mounted)
		stp_mountinfo_ours(mp, m->o->image_path, &m->mounts_before, &top);
	return 0;
}

/* The mount itself, with libfuse's rules (as root mount(2) on /dev/fuse, else through
 * fusermount3): the session is only the means, the connection goes to the daemon. Root
 * mounts on the directory checked, through /proc/self/fd (mount(2) follows that link and
 * no other); fusermount3 is a program of its own, with its own checks, that resolves
 * /proc/self in itself: a user's mount is made on the path. */
static int mount_fuse(struct monitor *m)
{
	static const struct fuse_lowlevel_ops none;
	char *argv[] = { (char *)m->prog, "-o", m->o->fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se = fuse_session_new(&args, &none, sizeof(none), NULL);
	char pinned[64];
	const char *target = geteuid() == 0 ?
		stp_mountpoint_fd_path(m->mp_fd, pinned, sizeof(pinned)) : m->o->mountpoint;

	if (!se) {
		stp_monlog_say(m->prog, "libfuse refused the options '%s'", m->o->fuse_opts);
		return -EINVAL;
	}
	if (!fuse_session_mount(se, target)) {
		m->h.fuse_fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 3);
		m->mounted = true;
	}
	fuse_session_destroy(se); /* closes its descriptor, leaves the mount */
	if (m->h.fuse_fd >= 0)
		return 0;
	stp_monlog_say(m->prog, "cannot mount %s on %s", stp_monlog_image(m->o), m->o->mountpoint);
	return -EIO;
}

/* Root's mount is the one on top of the directory it mounted on: its device, for priming
 * to know it again (look_up), whatever the user who owns the parent renames meanwhile.
 * Unknown (0) for a user's mount (fusermount3 mounted the path) or without open_tree:
 * priming then goes by mountinfo alone. The clone looked through is closed by the
 * watcher once the monitor has gone (its close waits for an RCU grace period), or here
 * when there will be none. */
static bool will_have_watcher(const struct monitor *m)
{
	return !m->o->foreground && m->pidfd >= 0;
}

static void remember_mount(struct monitor *m)
{
	if (geteuid() == 0 && stp_mountpoint_top_dev(m->mp_fd, &m->mount_dev,
						     will_have_watcher(m) ? &m->clone_fd : NULL))
		m->mount_dev = 0;
}

/* Root's daemon runs as the sandbox user: looked up here, while the daemon starts, so
 * that it makes no lookup of its own (the name service loads modules and reads files). */
static int look_up_sandbox_user(struct monitor *m)
{
	char err[256];
	int rc;

	if (geteuid() != 0 || m->o->sandbox == STP_SANDBOX_OFF)
		return 0;
	rc = stp_sandbox_resolve_user(m->o->sandbox_user, &m->h.sandbox_uid, &m->h.sandbox_gid,
				      err, sizeof(err));
	m->h.sandbox_ids = !rc;
	if (rc)
		stp_monlog_say(m->prog, "sandbox: %s", err);
	return rc;
}

/* The daemon gets the mount; the monitor keeps none of what it hands over. The mount is
 * remembered after the SETUP is sent, not before: the clone it looks through is
 * dissolved as it closes, which waits for an RCU grace period (1.6 ms here), now while
 * the daemon takes the mount instead of before it may start to. */
static int hand_over(struct monitor *m, int fd)
{
	int err;

	m->deadline = (int64_t)stp_now_ns() + stp_montalk_deadline_s(m->o) * 1000000000ll;
	err = stp_montalk_send_setup(fd, m->o, m->prog, &m->h);
	if (err)
		stp_monlog_say(m->prog, "cannot hand the mount to the daemon: %s",
			       stp_strerror(err));
	else
		remember_mount(m);
	release(m);
	return err;
}

/* Whether there is a mount of ours to undo: the daemon said so, or (killed between
 * mount(2) and its message) mountinfo shows one more than before. Either way only when
 * the top mount at the mount point is ours. */
static bool ours_to_unmount(const struct monitor *m)
{
	unsigned count;
	int top;

	if (stp_mountinfo_ours(m->o->mountpoint, m->o->image_path, &count, &top) || !top)
		return false;
	return m->mounted || count > m->mounts_before;
}

/* Root unmounts beneath the parent opened before the fork, and never runs a program (the
 * watcher's uid 0 could regain its capabilities by an exec); a user's mount goes through
 * fusermount3, as libfuse made it: the one libfuse runs, not one found in PATH. */
static void unmount_ours(const struct monitor *m)
{
	pid_t pid;
	int cwd;

	if (geteuid() == 0) {
		if ((cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return;
		if (!fchdir(m->parent_fd))
			umount2(m->base, MNT_DETACH | UMOUNT_NOFOLLOW);
		if (fchdir(cwd)) {
			/* the monitor's directory is only where it started; nothing holds it */
		}
		close(cwd);
		return;
	}
	pid = fork();
	if (pid == 0) {
		execl(STP_FUSERMOUNT, "fusermount3", "-u", "-q", "-z", m->o->mountpoint, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
}

/* The daemon is done for: stop it, then undo the mount if one of ours is there. */
static void abandon(struct monitor *m)
{
	reap(m, true);
	if (ours_to_unmount(m))
		unmount_ours(m);
}

/* A mount that failed before the daemon took it: undone, and the socket to the daemon
 * (SV, either end -1 once closed) closed. */
static void undo(struct monitor *m, int sv[2])
{
	release(m);
	stp_fetcher_stop(&m->h.fetcher);
	if (m->pid > 0)
		reap(m, true);
	if (m->mounted && ours_to_unmount(m))
		unmount_ours(m);
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
}

/* The daemon did not answer the priming lookups in time: the mount is undone; the
 * connection goes with it, and frees the lookup child STUCK (0: none). */
static int primed_late(struct monitor *m, pid_t stuck)
{
	stp_montalk_say_late(m->prog, m->o);
	abandon(m);
	if (stuck)
		while (waitpid(stuck, NULL, 0) < 0 && errno == EINTR)
			;
	return -ETIMEDOUT;
}

/* Whether ROOT is the root of the mount made: the device remembered at the mount (root);
 * else (a user's mount) mountinfo's word that it is a fuse.stipple mount of the image
 * made for this user. Another user's FUSE mount, put where the mount point was renamed
 * from, is neither. */
static bool made_here(const struct monitor *m, int root)
{
	dev_t dev;

	if (stp_mountpoint_dev(root, &dev))
		return false;
	if (m->mount_dev)
		return dev == m->mount_dev;
	return !stp_mountinfo_made_for(dev, m->o->image_path, getuid());
}

/* The lookups of LIST in a child confined first (prime.h), killed at the deadline. */
static int look_up(const struct monitor *m, const struct stp_prime_list *list, pid_t *stuck)
{
	int root, fds[2], err;
	pid_t pid;

	if (!stp_prime_list_count(list))
		return 0;
	/* O_PATH: no request to the mount; held only while priming (it keeps the mount busy).
	 * Beneath the parent pinned before the mount, never by the path again: a parent
	 * renamed meanwhile and a link in its place would send the lookups elsewhere. The
	 * name may lead to another mount by now (the mount point renamed before the mount):
	 * only the one made is primed. */
	root = openat(m->parent_fd, m->base, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	if (!made_here(m, root)) {
		close(root);
		stp_monlog_say(m->prog, "warning: %s: priming skipped: what the mount point's name "
			       "leads to is not the mount made (renamed?)", m->o->mountpoint);
		return 0;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		err = -errno;
		close(root);
		return err;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		stp_prime_look_up(list, root, fds[1], m->o->sandbox, &m->lookup_filter,
				  stp_prime_stop_ns(m->deadline));
	}
	close(fds[1]);
	close(root);
	err = pid < 0 ? -errno : stp_prime_wait(pid, fds[0], m->deadline, stuck);
	close(fds[0]);
	return err;
}

/* The plan, then the lookups. Priming only saves time: what goes wrong is a warning,
 * unless it shows the daemon gone or not answering: then the mount is undone. */
static int prime(struct monitor *m, int fd, uint8_t *buf)
{
	struct stp_prime_list *list = NULL;
	pid_t stuck = 0;
	int err = stp_montalk_receive_plan(fd, m->deadline, buf, &list);

	if (!err)
		err = look_up(m, list, &stuck);
	stp_prime_list_free(list);
	if (err == -ETIMEDOUT)
		return primed_late(m, stuck);
	if (waitpid(m->pid, &m->status, WNOHANG) == m->pid) {
		m->reaped = true;
		stp_monlog_say(m->prog, "the daemon ended as the mount went live");
		abandon(m);
		return -EIO;
	}
	if (err)
		stp_monlog_say(m->prog, "warning: %s: priming the hot files: %s", m->o->mountpoint,
		    stp_strerror(err));
	return 0;
}

/* -f: the monitor stays until the daemon ends, passing it the signals that end a mount,
 * and unmounts unless the host already did. */
static int stay(struct monitor *m)
{
	stp_monsig_forward(m->pid, m->pidfd, &m->saved_mask);
	reap(m, false);
	if (WIFEXITED(m->status) && WEXITSTATUS(m->status) == STP_DAEMON_UNMOUNTED)
		return 0;
	if (ours_to_unmount(m))
		unmount_ours(m);
	return stp_monsig_forwarded() && WIFEXITED(m->status) ? 0 : -EIO;
}

/* Whether the mount at the mount point is dead: the top mount there is ours, and its
 * connection answers nothing (ENOTCONN: the daemon and its /dev/fuse are gone). A live
 * mount made there since, of the same image, answers statfs and is left alone. */
static bool mount_dead(const struct monitor *m)
{
	struct statfs st;
	bool dead;
	int fd;

	if (!ours_to_unmount(m))
		return false;
	fd = openat(m->parent_fd, m->base, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTCONN;
	dead = fstatfs(fd, &st) < 0 && errno == ENOTCONN;
	close(fd);
	return dead;
}

/* Root's watcher keeps the two capabilities an unmount needs, and no way back to the
 * others: uid 0 would regain them all at an exec, so the bounding set is emptied, the
 * securebits that give root its capabilities at exec and keep them across setuid are
 * locked off, and no_new_privs is set. -1 when any of it fails: the watcher then does not
 * stay. The calls are made directly, as the sandbox's are: libcap's loading and its
 * constructor's probe of the kernel cost every mount's start, before the daemon's. */
static int keep_only_unmount(void)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
	int err = 0;

	if (geteuid() != 0)
		return 0; /* nothing to drop: fusermount3 unmounts as the user */
	/* every capability the kernel knows: until PR_CAPBSET_READ says EINVAL */
	for (int c = 0; !err && prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		err = prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	if (!err && errno != EINVAL)
		err = -1;
	if (!err)
		err = prctl(PR_SET_SECUREBITS, bits, 0, 0, 0);
	if (!err)
		err = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	for (int i = 0; i < 2; i++) {
		int cap = i ? CAP_DAC_READ_SEARCH : CAP_SYS_ADMIN;

		caps[CAP_TO_INDEX(cap)].permitted |= CAP_TO_MASK(cap);
		caps[CAP_TO_INDEX(cap)].effective |= CAP_TO_MASK(cap);
	}
	return err || syscall(SYS_capset, &head, caps) ? -1 : 0;
}

static void close_clone(struct monitor *m)
{
	if (m->clone_fd >= 0)
		close(m->clone_fd);
	m->clone_fd = -1;
}

/* The watcher's process (watcher.h): it drops privilege at once, says so on WORD, and
 * stays once told the mount is live (the socket closed: it was not); when the daemon then
 * ends and left its mount dead, it unmounts it. */
static _Noreturn void watch(struct monitor *m, int word)
{
	stp_watcher_detach(m->pidfd, m->parent_fd, word, m->clone_fd, &m->saved_mask);
	if (keep_only_unmount() || !stp_watcher_send_word(word) || !stp_watcher_word_came(word))
		_exit(0);
	close(word);
	close_clone(m); /* the monitor has gone: the grace period holds up no one */
	stp_watcher_wait(m->pidfd);
	if (mount_dead(m))
		unmount_ours(m);
	_exit(0);
}

/* A live mount outlives the monitor: its watcher stays. It is forked while the daemon
 * opens the image, when the monitor only waits: its fork (the monitor's page tables
 * copied) no longer holds up the return after LIVE. Without pidfds (Linux < 5.3), or in
 * the foreground (the monitor stays), there is none. */
static void say_no_watcher(const struct monitor *m, int err)
{
	stp_monlog_say(m->prog, "warning: %s: no watcher (%s): if the daemon dies, umount -l the "
		       "mount", m->o->mountpoint, stp_strerror(err));
}

static void start_watcher(struct monitor *m)
{
	int go[2];

	if (!will_have_watcher(m))
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go)) {
		say_no_watcher(m, -errno);
		return;
	}
	fflush(NULL);
	m->watcher = fork();
	if (m->watcher == 0) {
		close(go[1]);
		watch(m, go[0]);
	}
	close(go[0]);
	close_clone(m); /* the watcher's copy is the last */
	if (m->watcher < 0) {
		say_no_watcher(m, -errno);
		close(go[1]);
		return;
	}
	m->watcher_go = go[1];
}

/* The watcher stays when the mount is LIVE, once it has said it dropped privilege (so
 * that it has when mount.stipple returns; one that could not has exited, silently, as
 * before); else it exits, and is reaped. */
static void release_watcher(struct monitor *m, bool live)
{
	if (m->watcher_go < 0)
		return;
	if (live && stp_watcher_word_came(m->watcher_go))
		stp_watcher_send_word(m->watcher_go);
	close(m->watcher_go);
	m->watcher_go = -1;
	if (!live)
		while (waitpid(m->watcher, NULL, 0) < 0 && errno == EINTR)
			;
}

/* The priming child's filter, built while the daemon works: a failure leaves it empty,
 * and the child, unable to confine itself, primes nothing (a warning). */
static void build_lookup_filter(struct monitor *m)
{
	if (stp_prime_wanted(m->o) && m->o->sandbox != STP_SANDBOX_OFF)
		stp_filters_export(STP_FILTER_LOOKUP, m->o->sandbox, getpid(), &m->lookup_filter,
				   NULL, 0);
}

/* The daemon's word that the mount is live, then the priming; then the monitor stays
 * (-f) or leaves its watcher. */
static int supervise(struct monitor *m, int fd)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int err;

	start_watcher(m);
	build_lookup_filter(m);
	err = buf ? stp_montalk_wait_live(fd, m->deadline, m->prog, m->o, buf) : -ENOMEM;
	if (err == STP_MONTALK_LOST)
		err = daemon_lost(m);
	if (!err)
		empty_record(m);
	if (err)
		abandon(m);
	else if (stp_prime_wanted(m->o))
		err = prime(m, fd, buf);
	free(buf);
	close(fd);
	release_watcher(m, !err);
	if (err)
		return err;
	return m->o->foreground ? stay(m) : 0;
}

/* Live or undone: what the monitor still holds goes, and the signals come back. */
static void finish(struct monitor *m)
{
	if (m->pidfd >= 0)
		close(m->pidfd);
	if (m->parent_fd >= 0)
		close(m->parent_fd);
	if (m->record_fd >= 0)
		close(m->record_fd);
	close_clone(m);
	stp_sandbox_prog_free(&m->lookup_filter);
	sigprocmask(SIG_SETMASK, &m->saved_mask, NULL);
}

/* A URL or verify= without the modules that need libcrypto (mount.stipple, which execs
 * mount.stipple-checked for them first): refused, not run without. */
static int require_checks(const struct monitor *m)
{
	if (m->checks || !stp_mountopts_needs_checks(m->o))
		return 0;
	stp_monlog_say(m->prog, "%s: a URL or verify= is mounted by %s only",
		       stp_monlog_image(m->o), STP_HELPER_CHECKED_NAME);
	return -EPROTONOSUPPORT;
}

int stp_monitor_check(const struct stp_mount_opts *o, const char *prog,
		      const struct stp_monitor_checks *checks)
{
	struct monitor m;
	int err;

	init(&m, o, prog, checks);
	err = require_checks(&m);
	if (!err)
		err = prepare(&m);
	release(&m);
	stp_fetcher_stop(&m.h.fetcher);
	return err;
}

int stp_monitor_mount(const struct stp_mount_opts *o, const char *prog,
		      const struct stp_monitor_checks *checks)
{
	struct monitor m;
	int err, sv[2] = { -1, -1 };

	init(&m, o, prog, checks);
	stp_monsig_hold(&m.saved_mask);
	err = require_checks(&m);
	if (!err)
		err = open_mountd(&m);
	if (!err && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		err = -errno;
	if (!err)
		err = spawn_daemon(&m, sv);
	if (!err)
		err = prepare(&m);
	if (!err)
		err = open_record(&m);
	if (!err)
		err = remember_mountpoint(&m);
	if (!err)
		err = mount_fuse(&m);
	if (!err)
		err = look_up_sandbox_user(&m);
	if (!err)
		err = hand_over(&m, sv[0]);
	if (!err)
		err = supervise(&m, sv[0]);
	else
		undo(&m, sv);
	finish(&m);
	return err;
}
