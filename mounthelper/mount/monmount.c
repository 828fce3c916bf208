/* SPDX-License-Identifier: MIT */
/*
 * A mount, in its order (monmount.h): what the monitor checks, says and tells the daemon,
 * and when. Every privileged call it makes goes through monitor.c, which holds them all;
 * the rest of the work has modules of their own, tied by the state they share
 * (monstate.h): the keys (monkeys.c), a URL's superblock and store (monurl.c), the mount
 * point's checks (monpoint.c), record= (monrecord.c), priming (monprime.c), the messages
 * (monlog.c), the conversation with the daemon and its seccomp filter (montalk.c,
 * filters.c), the signals (monsig.c), the memory bound (budget.c), the fetcher's channels
 * (fetcher.c), the keys' parsing (trustkeys.c, monchecks.c) and the watcher (watcher.c).
 *
 *   stipple-mountd opened, started          its start overlaps what follows; told the
 *                                             sandbox mode, it confines its files
 *   the keys, the image (or a URL's          the superblock checked, the memory bound,
 *     fetcher), the mount point                the mount point pinned and checked
 *   record='s list opened, the mount made    in a bounded child; libfuse's mount
 *   the hand-over, the watcher forked        the daemon takes the mount; the watcher
 *                                             stays once the mount is live
 *   LIVE, priming                            then the monitor leaves (or stays, -f)
 */
#include "monmount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "budget.h"
#include "daemon.h"
#include "filters.h"
#include "foreign.h"
#include "fuseapi.h"
#include "image.h"
#include "monkeys.h"
#include "monitor.h"
#include "monlog.h"
#include "setup.h"
#include "monproto.h"
#include "monpoint.h"
#include "monprime.h"
#include "monrecord.h"
#include "monsig.h"
#include "monstate.h"
#include "montalk.h"
#include "monurl.h"
#include "mountopts.h"
#include "mountpoint.h"
#include "prime.h"
#include "progpath.h"
#include "sandbox.h"
#include "trustkeys.h"
#include "util.h"
#include "watcher.h"

static void init(struct stp_mon *m, const struct stp_mount_opts *o, const char *prog,
		 const struct stp_monitor_checks *checks)
{
	*m = (struct stp_mon){ .o = o, .prog = prog, .checks = checks, .mountd_fd = -1, .mp_fd = -1, .parent_fd = -1,
			       .rec = { .dir_fd = -1, .fd = -1, .done_fd = -1 },
			       .clone_fd = -1, .fuse_copy = -1,
			       .pidfd = -1, .watcher = -1, .watcher_go = -1,
			       .h = { .image_fd = -1, .record_fd = -1, .record_done_fd = -1,
				      .fuse_fd = -1,
				      .cache = { .fd = -1 } } };
	/* every descriptor -1: a zero would be closed as the monitor's stdin at the hand-over */
	stp_fetcher_init(&m->h.fetcher);
	stp_monlog_route(prog);
}

/* What the daemon takes over, and stipple-mountd: the monitor keeps none of it. */
static void release(struct stp_mon *m)
{
	stp_montalk_release(&m->h);
	if (m->mountd_fd >= 0)
		close(m->mountd_fd);
	if (m->mp_fd >= 0)
		close(m->mp_fd);
	m->mountd_fd = m->mp_fd = -1;
}

/* The daemon, found before anything is mounted: a missing program is said at once. A
 * URL or verify= needs stipple-mountd-checked, which links libcrypto; the rest
 * stipple-mountd, which starts without it (daemonchecks.h). */
static int open_mountd(struct stp_mon *m)
{
	const char *name = stp_mountopts_needs_checks(m->o) ? STP_MOUNTD_CHECKED_NAME : STP_MOUNTD_NAME;
	char path[PATH_MAX];
	int err = stp_progpath(name, STP_LIBEXEC_DIR, path, sizeof(path));

	if (!err && (m->mountd_fd = stp_monitor_open_program(path)) < 0)
		err = m->mountd_fd;
	if (err)
		stp_monlog_say(m->prog, "%s: %s", path, stp_strerror(err));
	return err;
}

/* Starts the daemon's process, which execs stipple-mountd at once (monitor.c): its start
 * (the dynamic loader) overlaps the monitor's checks and the mount, and it waits for its
 * setup (hand_over). vfork, not fork: the monitor is suspended only until the exec, and
 * its address space is neither copied nor write-protected, so its own writes after this
 * take no copy-on-write faults (each a page copy and a TLB flush; on this VM they made
 * a good part of a mount's cost). No handler is installed for the signals the child
 * unblocks (stp_monsig_forward comes later), so none runs on the shared memory. Its
 * arguments only tell ps which mount it serves (the image as messages name it: no
 * query), both as stipple-mountd; it reads none of them. */
static int spawn_daemon(struct stp_mon *m, int sv[2])
{
	char *const argv[] = { STP_MOUNTD_NAME, (char *)stp_monlog_image(m->o), m->o->mountpoint, NULL };

	m->pid = stp_monitor_spawn_daemon(m->mountd_fd, sv[1], sv[0], argv, &m->saved_mask);
	close(sv[1]);
	sv[1] = -1;
	if (m->pid < 0) {
		stp_monlog_say(m->prog, "fork: %s", stp_strerror(m->pid));
		m->pid = -1;
		return -EAGAIN;
	}
	m->pidfd = (int)syscall(SYS_pidfd_open, m->pid, 0);
	/* the mode first: root's daemon builds its empty root while the monitor works */
	return stp_setup_send_sandbox(sv[0], m->o->sandbox);
}

/* Waits for the daemon, killing it first when asked; once only. */
static void reap(struct stp_mon *m, bool kill_first)
{
	if (m->reaped)
		return;
	if (kill_first)
		stp_monitor_signal(m->pidfd, m->pid, SIGKILL);
	while (waitpid(m->pid, &m->status, 0) < 0 && errno == EINTR)
		;
	m->reaped = true;
}

/* The daemon died or broke the protocol before the mount was live: it is stopped (a
 * daemon that closed its end may still be running) and the reason told. */
static int daemon_lost(struct stp_mon *m)
{
	bool gone = waitpid(m->pid, &m->status, WNOHANG) == m->pid;

	m->reaped = m->reaped || gone;
	reap(m, true);
	stp_montalk_say_lost(m->prog, gone, m->status);
	return -EIO;
}

/* Forks the fetcher's process (monitor.c): the control socket on STP_MONITOR_FD and
 * stdio, then stipple-fetcher with no signal blocked (the monitor blocks the ones it
 * waits for) and only the proxy variables of the caller's environment. Its argument only
 * names the URL for ps (without query). It keeps its end of the control socket alone. 0,
 * or a negative errno. */
static int spawn_fetcher(struct stp_mon *m)
{
	struct stp_fetcher *f = &m->h.fetcher;
	char path[PATH_MAX], *const argv[] = { STP_FETCHER_NAME, m->o->image_path, NULL };
	char *env[STP_FETCHER_ENV_MAX];
	int err = stp_progpath(STP_FETCHER_NAME, STP_LIBEXEC_DIR, path, sizeof(path));

	stp_fetcher_env(env);
	if (!err && (f->pid = stp_monitor_spawn_fetcher(path, f->ctl[1], argv, env)) < 0) {
		err = f->pid;
		f->pid = -1;
	}
	if (!err) { /* without a pidfd (Linux < 5.3), nothing ends a fetcher that stays */
		f->pidfd = (int)syscall(SYS_pidfd_open, f->pid, 0);
		f->limits_fd = stp_monitor_open_proc(f->pid, "limits"); /* read once it lowered them */
		f->signal = stp_monitor_signal;
	}
	close(f->ctl[1]);
	f->ctl[1] = -1;
	return err;
}

/* The fetcher, spawned, gets its filter, built here while it execs (without one, it
 * builds its own), then its setup. */
static int greet_fetcher(struct stp_mon *m)
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

/* A URL: its fetcher spawned and greeted, then its superblock (monurl.h). */
static int open_url(struct stp_mon *m)
{
	int err = stp_fetcher_prepare(m->o, m->prog, &m->h.fetcher);

	if (!err)
		err = greet_fetcher(m);
	return err ? err : stp_monurl_open(m);
}

static int open_image(struct stp_mon *m)
{
	const struct stp_mount_opts *o = m->o;
	char what[512];
	bool foreign;
	int err;

	if (o->is_url)
		return open_url(m);
	m->h.image_fd = stp_monitor_open_image(o->image_path);
	if (m->h.image_fd < 0) {
		err = m->h.image_fd;
		stp_monlog_say(m->prog, "%s: %s", stp_monlog_image(o),
			       err == -EINVAL ? "not a regular file" : stp_strerror(err));
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

static int prepare(struct stp_mon *m)
{
	int err = stp_monkeys_read(m);

	if (!err)
		err = open_image(m);
	if (!err)
		err = stp_trustkeys_check_signed(m->o, &m->sb, m->prog);
	if (!err)
		err = stp_budget_check(m->o, &m->sb, m->h.fetcher.index_len,
				       m->o->is_url ? stp_fetcher_data_max(&m->h.fetcher) : 0,
				       m->prog, &m->h.mem_limit);
	if (!err && m->h.fetcher.blocks) /* files made for an image that passed, not before */
		stp_monurl_attach_store(m);
	if (!err)
		err = stp_monpoint_check(m);
	return err;
}

/* The mount itself, with libfuse's rules (as root mount(2) on /dev/fuse, else through
 * fusermount3): the session is only the means, the connection goes to the daemon. Root
 * mounts on the directory checked, through /proc/self/fd (mount(2) follows that link and
 * no other); fusermount3 is a program of its own, with its own checks, that resolves
 * /proc/self in itself: a user's mount is made on the path. */
static int mount_fuse(struct stp_mon *m)
{
	static const struct fuse_lowlevel_ops none;
	char *argv[] = { (char *)m->prog, "-o", m->o->fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se = fuse_session_new(&args, &none, sizeof(none), NULL);
	char pinned[64];
	const char *target = geteuid() == 0 ?
		stp_mountpoint_fd_path(m->mp_fd, pinned, sizeof(pinned)) : m->o->mountpoint;

	stp_monpoint_remember(m); /* what is there before */
	if (!se) {
		stp_monlog_say(m->prog, "libfuse refused the options '%s'", m->o->fuse_opts);
		return -EINVAL;
	}
	m->h.fuse_fd = stp_monitor_fuse_mount(se, target, &m->mounted);
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
static bool will_have_watcher(const struct stp_mon *m)
{
	return !m->o->foreground && m->pidfd >= 0;
}

static void remember_mount(struct stp_mon *m)
{
	if (geteuid() == 0 && stp_mountpoint_top_dev(m->mp_fd, &m->mount_dev,
						     will_have_watcher(m) ? &m->clone_fd : NULL))
		m->mount_dev = 0;
}


/* The daemon gets the mount; the monitor keeps none of what it hands over. The mount is
 * remembered after the SETUP is sent, not before: the clone it looks through is
 * dissolved as it closes, which waits for an RCU grace period (1.6 ms here), now while
 * the daemon takes the mount instead of before it may start to. */
static int hand_over(struct stp_mon *m, int fd)
{
	int err;

	m->deadline = (int64_t)stp_now_ns() + stp_montalk_deadline_s(m->o) * 1000000000ll;
	err = stp_montalk_send_setup(fd, m->o, m->prog, &m->h);
	if (err)
		stp_monlog_say(m->prog, "cannot hand the mount to the daemon: %s",
			       stp_strerror(err));
	/* its filter, built while it takes the mount over (said if it fails) */
	if (!err)
		err = stp_montalk_send_filter(fd, m->o, m->prog, m->pid);
	if (!err)
		remember_mount(m);
	if (!err && (will_have_watcher(m) || (m->o->foreground && m->pidfd >= 0)))
		m->fuse_copy = fcntl(m->h.fuse_fd, F_DUPFD_CLOEXEC, 3); /* to see it end */
	release(m);
	return err;
}

/* Root unmounts beneath the parent opened before the fork; a user's mount goes through
 * fusermount3, as libfuse made it (monitor.c). */
static void unmount_ours(const struct stp_mon *m)
{
	stp_monitor_unmount(m->parent_fd, m->base, m->o->mountpoint);
}

/* The daemon is done for: stop it, then undo the mount if one of ours is there. */
static void abandon(struct stp_mon *m)
{
	reap(m, true);
	if (stp_monpoint_ours(m))
		unmount_ours(m);
	stp_monrecord_drop(m);
}

/* A mount that failed before the daemon took it: undone, and the socket to the daemon
 * (SV, either end -1 once closed) closed. */
static void undo(struct stp_mon *m, int sv[2])
{
	release(m);
	stp_fetcher_stop(&m->h.fetcher);
	if (m->pid > 0)
		reap(m, true);
	if (m->mounted && stp_monpoint_ours(m))
		unmount_ours(m);
	stp_monrecord_drop(m);
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
}

/* The daemon did not answer the priming lookups in time: the mount is undone; the
 * connection goes with it, and frees the lookup child STUCK (0: none). */
static int primed_late(struct stp_mon *m, pid_t stuck)
{
	stp_montalk_say_late(m->prog, m->o);
	abandon(m);
	if (stuck)
		while (waitpid(stuck, NULL, 0) < 0 && errno == EINTR)
			;
	return -ETIMEDOUT;
}

/* The plan, then the lookups. Priming only saves time: what goes wrong is a warning,
 * unless it shows the daemon gone or not answering: then the mount is undone. */
static int prime(struct stp_mon *m, int fd, uint8_t *buf)
{
	struct stp_prime_list *list = NULL;
	pid_t stuck = 0;
	int err = stp_montalk_receive_plan(fd, m->deadline, buf, &list);

	if (!err)
		err = stp_monprime_look_up(m, list, &stuck);
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

static void close_clone(struct stp_mon *m)
{
	if (m->clone_fd >= 0)
		close(m->clone_fd);
	m->clone_fd = -1;
}

static void close_fuse_copy(struct stp_mon *m)
{
	if (m->fuse_copy >= 0)
		close(m->fuse_copy);
	m->fuse_copy = -1;
}

static bool still_mounted(void *m)
{
	return stp_monpoint_ours(m);
}

static void record_came(void *m)
{
	stp_monrecord_finish(m);
}

/* -f: the monitor watches as the watcher would (watcher.h): once the mount's connection
 * has ended, a daemon that stays gets STP_WATCHER_GRACE_MS, then SIGKILL. Without a
 * pidfd (Linux < 5.3) it only waits. */
static void watch_daemon(struct stp_mon *m)
{
	struct stp_watched w = { m->pidfd, -1, m->fuse_copy, m->rec.done_fd, record_came, m };

	if (m->pidfd >= 0 && stp_watcher_wait(&w, still_mounted, m)) {
		stp_watcher_end(&w, m->pidfd, STP_WATCHER_GRACE_MS);
		m->lingered = true;
	}
	if (m->pidfd < 0)
		stp_monrecord_await(m);
	close_fuse_copy(m);
}

/* -f: the monitor stays until the daemon ends, passing it the signals that end a mount,
 * and unmounts unless the host already did. */
static int stay(struct stp_mon *m)
{
	stp_monsig_forward(m->pid, m->pidfd, &m->saved_mask);
	watch_daemon(m);
	reap(m, false);
	stp_monrecord_finish(m);
	if (m->lingered && WIFSIGNALED(m->status))
		stp_monlog_say(m->prog, "%s: the daemon stayed %d s after its mount had gone: "
			       "killed", m->o->mountpoint, STP_WATCHER_GRACE_MS / 1000);
	stp_watcher_end(NULL, m->h.fetcher.pidfd, STP_WATCHER_GRACE_MS);
	stp_fetcher_stop(&m->h.fetcher); /* reaped */
	if (WIFEXITED(m->status) && WEXITSTATUS(m->status) == STP_DAEMON_UNMOUNTED)
		return 0;
	if (stp_monpoint_ours(m))
		unmount_ours(m);
	return stp_monsig_forwarded() && WIFEXITED(m->status) ? 0 : -EIO;
}

/* The watcher's process (watcher.h): it drops privilege at once, says so on WORD, and
 * stays once told the mount is live (the socket closed: it was not); when the daemon then
 * ends and left its mount dead, it unmounts it. A daemon that stays after its mount has
 * gone is ended, and the fetcher after the daemon. */
static _Noreturn void watch(struct stp_mon *m, int word)
{
	struct stp_watched w = { m->pidfd, m->h.fetcher.pidfd, m->fuse_copy, m->rec.done_fd,
				 record_came, m };
	int keep[6] = { m->parent_fd, word, m->clone_fd };

	stp_monrecord_fds(m, keep + 3);
	stp_watcher_detach(&w, keep, 6, &m->saved_mask);
	if (stp_monitor_drop_to_watcher(m->rec.dir_fd) || !stp_watcher_send_word(word) ||
	    !stp_watcher_word_came(word))
		_exit(0);
	close(word);
	close_clone(m); /* the monitor has gone: the grace period holds up no one */
	if (stp_watcher_wait(&w, still_mounted, m))
		stp_watcher_end(&w, w.daemon, STP_WATCHER_GRACE_MS);
	close_fuse_copy(m); /* the last: a dead daemon's connection ends only now */
	stp_monrecord_finish(m);
	if (stp_monpoint_dead(m))
		unmount_ours(m);
	stp_watcher_end(NULL, w.fetcher, STP_WATCHER_GRACE_MS);
	_exit(0);
}

/* A live mount outlives the monitor: its watcher stays. It is forked while the daemon
 * opens the image, when the monitor only waits: its fork (the monitor's page tables
 * copied) no longer holds up the return after LIVE. Without pidfds (Linux < 5.3), or in
 * the foreground (the monitor stays), there is none. */
static void say_no_watcher(const struct stp_mon *m, int err)
{
	stp_monlog_say(m->prog, "warning: %s: no watcher (%s): if the daemon dies, umount -l the "
		       "mount", m->o->mountpoint, stp_strerror(err));
}

static void start_watcher(struct stp_mon *m)
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
	close_fuse_copy(m);
	if (m->watcher < 0) {
		say_no_watcher(m, -errno);
		close(go[1]);
		return;
	}
	m->watcher_go = go[1];
}


/* The daemon's word that the mount is live, then the priming; then the monitor stays
 * (-f) or leaves its watcher. */
static int supervise(struct stp_mon *m, int fd)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int err;

	start_watcher(m);
	err = buf ? stp_montalk_wait_live(fd, m->deadline, m->prog, m->o, buf) : -ENOMEM;
	if (err == STP_MONTALK_LOST)
		err = daemon_lost(m);
	if (err)
		abandon(m);
	else if (stp_prime_wanted(m->o))
		err = prime(m, fd, buf);
	free(buf);
	close(fd);
	stp_watcher_release(&m->watcher_go, m->watcher, !err);
	if (err)
		return err;
	return m->o->foreground ? stay(m) : 0;
}

/* Live or undone: what the monitor still holds goes, and the signals come back. */
static void finish(struct stp_mon *m)
{
	if (m->pidfd >= 0)
		close(m->pidfd);
	if (m->parent_fd >= 0)
		close(m->parent_fd);
	stp_monrecord_close(m); /* a live mount's list is its watcher's (or stay's) to finish */
	if (m->h.fetcher.pidfd >= 0)
		close(m->h.fetcher.pidfd);
	m->h.fetcher.pidfd = -1;
	close_clone(m);
	close_fuse_copy(m);
	sigprocmask(SIG_SETMASK, &m->saved_mask, NULL);
}

/* A URL or verify= without the modules that need libcrypto (mount.stipple, which execs
 * mount.stipple-checked for them first): refused, not run without. */
static int require_checks(const struct stp_mon *m)
{
	if (m->checks || !stp_mountopts_needs_checks(m->o))
		return 0;
	stp_monlog_say(m->prog, "%s: a URL or verify= is mounted by %s only",
		       stp_monlog_image(m->o), STP_HELPER_CHECKED_NAME);
	return -EPROTONOSUPPORT;
}

int stp_monmount_check(const struct stp_mount_opts *o, const char *prog,
		      const struct stp_monitor_checks *checks)
{
	struct stp_mon m;
	int err;

	init(&m, o, prog, checks);
	err = require_checks(&m);
	if (!err)
		err = prepare(&m);
	release(&m);
	stp_fetcher_stop(&m.h.fetcher);
	return err;
}

int stp_monmount_mount(const struct stp_mount_opts *o, const char *prog,
		      const struct stp_monitor_checks *checks)
{
	struct stp_mon m;
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
		err = stp_monrecord_open(&m);
	if (!err)
		err = mount_fuse(&m);
	if (!err)
		err = stp_montalk_sandbox_ids(&m.h, m.o, m.prog);
	if (!err)
		err = hand_over(&m, sv[0]);
	if (!err)
		err = supervise(&m, sv[0]);
	else
		undo(&m, sv);
	finish(&m);
	return err;
}
