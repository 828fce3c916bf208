/* SPDX-License-Identifier: MIT */
/*
 * The privileged side of a mount (monitor.h): every privileged call of a mount, in the
 * order made, each made here unless a file is named beside it. What needs no privilege
 * runs beside it: the messages (monlog.c), the conversation with the daemon (montalk.c),
 * the signals (monsig.c), the memory bound (budget.c).
 *
 *   open(stipple-mountd) O_PATH, fork,       first: the daemon loads while the monitor
 *     execveat                                 checks; it waits for its setup
 *   open(public keys), scandir(keys dir)      verify: trusted configuration (trustkeys.c)
 *   open(image)                               the image fd; its superblock read through it
 *                                             (not an image: its first bytes, to say what
 *                                             it is: cli/foreign.h)
 *   a URL: fork+exec stipple-fetcher,         its channels (fetcher.c), the superblock
 *     open(disk cache dir, secret, file)       through them, the cache file (diskcache.c)
 *     open(store dir, block files), flock      a published image's blocks (store.c)
 *   stat(mount point), /proc/self/mountinfo   a directory, not mounted on (unless stack)
 *   open(hot list)                            record: created and truncated here
 *   open(mount point's parent) O_PATH         where an unmount will look
 *   fuse_session_mount                        libfuse's mount(2) on /dev/fuse, or
 *                                              fusermount3; the connection is then handed
 *                                              to the daemon, which confines itself
 *   pidfd_send_signal, waitpid                the daemon, killed when it fails or is late
 *   fchdir, umount2 (or fusermount3 -u)       after a failure, our own mount only, found
 *                                              beneath the parent opened before the fork
 *   open(mount point), fork                   priming, in a child confined first (prime.c)
 *   fork, capset (watcher.c), then here       the watcher, left once the mount is live
 *     openat, fstatfs, umount2                 with CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH
 *                                              only: when the daemon ends and left its
 *                                              mount dead, it unmounts it
 *
 * Privilege is dropped elsewhere: by the daemon's sandbox (sandbox.c) and the watcher's
 * capset (watcher.c).
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
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "budget.h"
#include "daemon.h"
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
#include "prime.h"
#include "progpath.h"
#include "remote.h"
#include "setup.h"
#include "store.h"
#include "trustkeys.h"
#include "util.h"
#include "watcher.h"

struct monitor {
	const struct stp_mount_opts *o;
	const char *prog;
	struct stp_superblock sb;
	struct stp_handover h; /* what the daemon is handed; closed once it is */
	int mountd_fd;        /* stipple-mountd, opened before the mount (O_PATH) */
	int parent_fd;        /* O_PATH of the mount point's parent: unmount beneath it */
	const char *base;     /* the mount point's last component */
	unsigned mounts_before; /* our kind of mount at the mount point, before the fork */
	pid_t pid;            /* the daemon */
	int pidfd;            /* the daemon, for signals that cannot reach a reused pid */
	bool reaped;          /* the daemon was waited for: never signal it again */
	int status;           /* its wait status, once reaped */
	bool mounted;         /* the daemon said the FUSE mount exists */
	int64_t deadline;     /* CLOCK_MONOTONIC ns */
	sigset_t saved_mask;  /* the mask before the ending signals were held */
};

static void init(struct monitor *m, const struct stp_mount_opts *o, const char *prog)
{
	*m = (struct monitor){ .o = o, .prog = prog, .mountd_fd = -1, .parent_fd = -1,
			       .pidfd = -1,
			       .h = { .image_fd = -1, .record_fd = -1, .fuse_fd = -1,
				      .cache = { .fd = -1 }, .fetcher = { .pid = -1, .ctl = -1 } } };
	stp_monlog_route(prog);
}

/* What the daemon takes over, and stipple-mountd: the monitor keeps none of it. */
static void release(struct monitor *m)
{
	stp_montalk_release(&m->h);
	if (m->mountd_fd >= 0)
		close(m->mountd_fd);
	m->mountd_fd = -1;
}

/* stipple-mountd, found before anything is mounted: a missing program is said at once. */
static int open_mountd(struct monitor *m)
{
	char path[4096];
	int err = stp_progpath(STP_MOUNTD_NAME, STP_LIBEXEC_DIR, path, sizeof(path));

	if (!err && (m->mountd_fd = open(path, O_PATH | O_CLOEXEC)) < 0)
		err = -errno;
	if (err)
		stp_monlog_say(m->prog, "%s: %s", path, stp_strerror(err));
	return err;
}

/* The daemon's process: nothing but the socket on STP_MONITOR_FD and stdio, the mask of
 * before, an empty environment, then stipple-mountd. Its arguments only tell ps which
 * mount it serves (the image as messages name it: no query); it reads none of them. */
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

/* Forks the daemon's process, which execs stipple-mountd at once: its start (the exec,
 * the dynamic loader) overlaps the monitor's checks and the mount, and it waits for its
 * setup (hand_over). */
static int spawn_daemon(struct monitor *m, int sv[2])
{
	fflush(NULL);
	m->pid = fork();
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
	return 0;
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
		dir = o->cache_dir ? strdup(o->cache_dir) : stp_diskcache_default_dir();
	if (dir)
		stp_store_attach(dir, o->cache_size, m->prog, m->h.fetcher.ctl, m->h.fetcher.blocks);
	free(dir);
	stp_fetcher_close_ctl(&m->h.fetcher);
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
	int err = stp_fetcher_start(o, m->prog, &m->h.fetcher);

	if (err)
		return err;
	if (m->h.fetcher.blocks)
		attach_store(m);
	err = stp_remote_open(m->h.fetcher.chans, 1, m->h.fetcher.size, stp_monlog_image(o), false, &src);
	if (!err)
		err = stp_image_read_superblock_src(src, &m->sb);
	if (!err)
		err = stp_imgsrc_read(src, raw, sizeof(raw), 0);
	stp_imgsrc_close(src);
	stp_monlog_unreadable(m->prog, m->o, err);
	/* -f checks, it leaves nothing behind; a published image has the store instead */
	if (err || !o->cache_size || o->fake || m->h.fetcher.blocks)
		return err;
	dir = o->cache_dir ? strdup(o->cache_dir) : stp_diskcache_default_dir();
	id.size = m->h.fetcher.size;
	id.validator = m->h.fetcher.validator;
	if (dir) /* sized by the checked superblock, not by what the fetcher says */
		stp_diskcache_open_file(dir, &id, o->cache_size, m->prog, &m->h.cache);
	free(dir);
	return 0;
}

static int open_image(struct monitor *m)
{
	const struct stp_mount_opts *o = m->o;
	char what[512];
	int err;

	if (o->is_url)
		return open_url(m);
	m->h.image_fd = open(o->image_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (m->h.image_fd < 0) {
		err = -errno;
		stp_monlog_say(m->prog, "%s: %s", stp_monlog_image(o), stp_strerror(-errno));
		return err;
	}
	err = stp_image_read_superblock(m->h.image_fd, o->image_path, &m->sb);
	/* a tar, a squashfs, an empty file: what it is and what to run instead */
	if (err == -EUCLEAN && stp_foreign_describe_fd(m->h.image_fd, stp_monlog_image(o), what,
						       sizeof(what)))
		stp_monlog_say(m->prog, "%s: %s", stp_monlog_image(o), what);
	else if (err != -EINVAL) /* not a file, already said */
		stp_monlog_unreadable(m->prog, m->o, err);
	return err;
}

/* A second mount on a directory hides the first without a word: refused, naming what is
 * there, unless -o stack asks for it. */
static int check_not_mounted(const struct monitor *m)
{
	char source[256], fstype[256];
	int err = m->o->stack ? -ENOENT :
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

static int check_mountpoint(const struct monitor *m)
{
	struct stat st;

	if (stat(m->o->mountpoint, &st)) {
		stp_monlog_say(m->prog, "mount point %s: %s", m->o->mountpoint,
			stp_strerror(-errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		stp_monlog_say(m->prog, "mount point %s: not a directory", m->o->mountpoint);
		return -ENOTDIR;
	}
	return check_not_mounted(m);
}

static int prepare(struct monitor *m)
{
	int err = stp_trustkeys_read(m->o, m->prog, &m->h.keys, &m->h.nkeys);

	if (!err)
		err = open_image(m);
	if (!err)
		err = stp_trustkeys_check_signed(m->o, &m->sb, m->prog);
	if (!err)
		err = stp_budget_check(m->o, &m->sb, m->prog, &m->h.mem_limit);
	if (!err)
		err = check_mountpoint(m);
	return err;
}

/* The hot list file is opened here: the confined daemon can open nothing. */
static int open_record(struct monitor *m)
{
	m->h.record_fd = -1;
	if (!m->o->record)
		return 0;
	m->h.record_fd = open(m->o->record, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (m->h.record_fd < 0) {
		stp_monlog_say(m->prog, "%s: %s", m->o->record, stp_strerror(-errno));
		return -errno;
	}
	return 0;
}

/* Where an unmount will look: the parent directory as it is now (a path swapped later
 * for a symlink cannot redirect root's umount2), and what is mounted there already. */
static int remember_mountpoint(struct monitor *m)
{
	const char *mp = m->o->mountpoint, *slash = strrchr(mp, '/');
	char *parent = slash && slash != mp ? strndup(mp, (size_t)(slash - mp)) : strdup("/");
	int top;

	if (!parent)
		return -ENOMEM;
	m->base = slash ? slash + 1 : mp;
	m->parent_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	free(parent);
	if (m->parent_fd < 0) {
		stp_monlog_say(m->prog, "mount point %s: %s", mp, stp_strerror(-errno));
		return -errno;
	}
	stp_mountinfo_ours(mp, m->o->image_path, &m->mounts_before, &top);
	return 0;
}

/* The mount itself, with libfuse's rules (as root mount(2) on /dev/fuse, else through
 * fusermount3): the session is only the means, the connection goes to the daemon. */
static int mount_fuse(struct monitor *m)
{
	static const struct fuse_lowlevel_ops none;
	char *argv[] = { (char *)m->prog, "-o", m->o->fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se = fuse_session_new(&args, &none, sizeof(none), NULL);

	if (!se) {
		stp_monlog_say(m->prog, "libfuse refused the options '%s'", m->o->fuse_opts);
		return -EINVAL;
	}
	if (!fuse_session_mount(se, m->o->mountpoint)) {
		m->h.fuse_fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 3);
		m->mounted = true;
	}
	fuse_session_destroy(se); /* closes its descriptor, leaves the mount */
	if (m->h.fuse_fd >= 0)
		return 0;
	stp_monlog_say(m->prog, "cannot mount %s on %s", stp_monlog_image(m->o), m->o->mountpoint);
	return -EIO;
}

/* The daemon gets the mount; the monitor keeps none of what it hands over. */
static int hand_over(struct monitor *m, int fd)
{
	int err;

	m->deadline = (int64_t)stp_now_ns() + STP_MOUNT_DEADLINE_MS * 1000000ll;
	if (m->o->is_url) /* the metadata comes over the network, within timeout= a read */
		m->deadline += 2ll * m->o->timeout_s * 1000000000ll;
	err = stp_montalk_send_setup(fd, m->o, m->prog, &m->h);
	if (err)
		stp_monlog_say(m->prog, "cannot hand the mount to the daemon: %s",
			       stp_strerror(err));
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

/* Root unmounts beneath the parent opened before the fork; a user's mount goes through
 * fusermount3, as it was made (it does the same). */
static void unmount_ours(const struct monitor *m)
{
	pid_t pid;
	int cwd;

	if (geteuid() == 0 && (cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		int done = !fchdir(m->parent_fd) && !umount2(m->base, MNT_DETACH | UMOUNT_NOFOLLOW);

		if (fchdir(cwd))
			done = 0;
		close(cwd);
		if (done)
			return;
	}
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-q", "-z", m->o->mountpoint, (char *)NULL);
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
	stp_montalk_say_late(m->prog, stp_monlog_image(m->o));
	abandon(m);
	if (stuck)
		while (waitpid(stuck, NULL, 0) < 0 && errno == EINTR)
			;
	return -ETIMEDOUT;
}

/* The plan, then the lookups. Priming only saves time: what goes wrong is a warning,
 * unless it shows the daemon gone or not answering: then the mount is undone. */
static int prime(struct monitor *m, int fd, uint8_t *buf)
{
	struct stp_prime_list *list = NULL;
	pid_t stuck = 0;
	int err = stp_montalk_receive_plan(fd, m->deadline, buf, &list);

	if (!err)
		err = stp_prime_run(list, m->o->mountpoint, m->o->sandbox, m->deadline, &stuck);
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

/* The watcher's end: a dead mount of ours is undone. */
static void unmount_if_dead(void *arg)
{
	const struct monitor *m = arg;

	if (mount_dead(m))
		unmount_ours(m);
}

/* A live mount outlives the monitor: its watcher stays (watcher.h). Without pidfds
 * (Linux < 5.3) there is none. */
static void leave_watcher(struct monitor *m)
{
	int err;

	if (m->pidfd < 0)
		return;
	err = stp_watcher_leave(m->pidfd, m->parent_fd, &m->saved_mask, unmount_if_dead, m);
	if (err)
		stp_monlog_say(m->prog, "warning: %s: no watcher (%s): if the daemon dies, umount -l the "
		    "mount", m->o->mountpoint, stp_strerror(err));
}

/* The daemon's word that the mount is live, then the priming; then the monitor stays
 * (-f) or leaves its watcher. */
static int supervise(struct monitor *m, int fd)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int err = buf ? stp_montalk_wait_live(fd, m->deadline, m->prog, stp_monlog_image(m->o), buf)
		      : -ENOMEM;

	if (err == STP_MONTALK_LOST)
		err = daemon_lost(m);
	if (err)
		abandon(m);
	else if (stp_prime_wanted(m->o))
		err = prime(m, fd, buf);
	free(buf);
	close(fd);
	if (err)
		return err;
	if (m->o->foreground)
		return stay(m);
	leave_watcher(m);
	return 0;
}

/* Live or undone: what the monitor still holds goes, and the signals come back. */
static void finish(struct monitor *m)
{
	if (m->pidfd >= 0)
		close(m->pidfd);
	if (m->parent_fd >= 0)
		close(m->parent_fd);
	sigprocmask(SIG_SETMASK, &m->saved_mask, NULL);
}

int stp_monitor_check(const struct stp_mount_opts *o, const char *prog)
{
	struct monitor m;
	int err;

	init(&m, o, prog);
	err = prepare(&m);
	release(&m);
	stp_fetcher_stop(&m.h.fetcher);
	return err;
}

int stp_monitor_mount(const struct stp_mount_opts *o, const char *prog)
{
	struct monitor m;
	int err, sv[2] = { -1, -1 };

	init(&m, o, prog);
	stp_monsig_hold(&m.saved_mask);
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
		err = hand_over(&m, sv[0]);
	if (!err)
		err = supervise(&m, sv[0]);
	else
		undo(&m, sv);
	finish(&m);
	return err;
}
