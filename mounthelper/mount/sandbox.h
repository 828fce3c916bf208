/* SPDX-License-Identifier: MIT */
/*
 * The sandbox of the mount daemon. Once the image and /dev/fuse are open and the FUSE
 * mount exists, the daemon gives up everything it will not need again before it decodes a
 * byte of the (untrusted) image:
 *
 *   1. descriptors: all closed except KEEP_FDS; 0 and 1 (and 2 unless KEEP_STDERR) point
 *      at /dev/null;
 *   2. files: an empty read-only tmpfs as the root, and no copy of the FUSE mount (the
 *      host's umount still ends the daemon). Root's daemon makes the tmpfs detached and
 *      chroots into it, keeping the mount's descriptor open (sandbox.c says why), and
 *      takes this step ahead, before its mount exists (stp_sandbox_enter_empty_root);
 *      where the kernel refuses a detached mount, and in a user namespace, it is a
 *      private mount namespace with the tmpfs pivoted in and the old root detached;
 *   3. identity: the bounding set emptied, securebits locked, supplementary groups
 *      dropped, real/effective/saved uid and gid set to the sandbox user, all read back
 *      (and, after step 4, root's ids tried back) so that any difference fails;
 *   4. capabilities: permitted, effective, inheritable and ambient sets cleared;
 *   5. no_new_privs, then a seccomp filter that allows only the calls of the FUSE loop,
 *      the decoder and the worker threads (filters.h), built by the monitor and handed
 *      over: this module only loads it, and links no libseccomp.
 *
 * Not root (a user's mount through fusermount3), the uid stays. Step 2 then runs inside a
 * new user namespace that maps the process's own uid and gid (setgroups denied), where
 * the bounding set is emptied and securebits locked too; it is tried in a child first,
 * and where the kernel refuses user namespaces it is skipped with a warning (stp_log).
 * Steps 4 and 5 always apply.
 *
 * Consequences for the caller:
 *   - capabilities, no_new_privs and seccomp are per thread and inherited only by threads
 *     created later: call stp_sandbox_enter while the process has a single thread, before
 *     the loop (serveloop.h) or any worker starts;
 *   - no thread may be cancelled, nor end by pthread_exit: glibc would then open
 *     libgcc_s for its unwinder, which nothing inside can (the daemon's loop wakes its
 *     threads with a signal instead);
 *   - stat a kept descriptor with stp_fd_stat (util.h), not fstat: where the kernel has a
 *     pathless fstat, the C library's form (a path the filter cannot read) is refused;
 *   - keep no directory descriptor (KEEP_FDS holds files): where that form is still
 *     allowed (32-bit, mips64el), a path given with it is looked up from a directory,
 *     and root's chroot leaves the host's mounts reachable through ".." of one outside
 *     it (the empty root's own descriptor is its root: ".." stays there);
 *   - after it, the process can open no file (open fails with EACCES; libfuse's clone_fd
 *     must stay 0; a file to write later, e.g. a hot list, is opened before and kept),
 *     make no socket (no syslog), exec or fork nothing (either kills it), and cannot
 *     unmount: when the loop ends for another reason than the host's umount, do not call
 *     fuse_session_unmount (its umount2 and fusermount3 fallbacks would be killed), just
 *     exit (the mount then answers ENOTCONN until unmounted);
 *   - the daemon can still write to stderr when KEEP_STDERR is set (foreground debugging);
 *   - no socket survives, so libfuse's auto_unmount (a socket to fusermount3) cannot work:
 *     the option parser refuses it.
 */
#ifndef STP_SANDBOX_H
#define STP_SANDBOX_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum stp_sandbox_mode {
	STP_SANDBOX_ON,		/* all steps; a call outside the filter kills the process */
	STP_SANDBOX_LOG,	/* all steps; such a call is allowed and logged (type=1326) */
	STP_SANDBOX_OFF,	/* nothing: stp_sandbox_enter() returns 0 at once */
};

/* A seccomp program as the kernel loads it (struct sock_filter, host order): built by
 * filters.h, handed over (setup.h: FILTER). At most STP_SANDBOX_PROG_MAX instructions,
 * the kernel's BPF_MAXINSNS. */
#define STP_SANDBOX_PROG_MAX 4096u
struct stp_sandbox_prog {
	uint32_t n;
	struct sock_filter *insns; /* N of them, malloc'd: stp_sandbox_prog_free */
};

/* Frees PROG's instructions and empties it; an empty one is left as it is. */
void stp_sandbox_prog_free(struct stp_sandbox_prog *prog);

struct stp_sandbox_opts {
	enum stp_sandbox_mode mode;
	/* The filter loaded last, built for this process (filters.h: the daemon's or the
	 * fetcher's): required unless MODE is STP_SANDBOX_OFF; read during the call only. */
	const struct stp_sandbox_prog *filter;
	/* NULL: "stipple" if that user exists, else "nobody" (with a warning through
	 * stp_log). Must not resolve to uid 0. Ignored when the process is not root, or
	 * when HAS_IDS gives the ids already looked up (stp_sandbox_resolve_user). */
	const char *user;
	bool has_ids;
	uid_t uid;
	gid_t gid;
	/* Descriptors that stay open (the image, /dev/fuse, a status pipe). Values below 3
	 * are ignored: 0-2 are always reopened on /dev/null (2 kept if KEEP_STDERR). The
	 * array is read during the call only. */
	const int *keep_fds;
	size_t nkeep;
	bool keep_stderr;
	/* RLIMIT_FSIZE, set before confinement with SIGXFSZ ignored (a write past it fails
	 * with EFBIG): the daemon's disk cache file cannot grow past what it needs. 0: the
	 * limit is left as it is. */
	unsigned long long file_size_max;
	/* RLIMIT_AS is set too when the caller's RLIMIT_DATA has a hard limit (the daemon's
	 * budget, the fetcher's bound): that limit and STP_SANDBOX_AS_RESERVE. RLIMIT_NPROC
	 * is lowered to STP_SANDBOX_TASKS_MAX where the count is the sandbox's own: root's
	 * sandbox user, or a user's namespace. */
};

/* RLIMIT_NPROC, set by stp_sandbox_enter (lowered, never raised): the processes and
 * threads of the uid the process runs as, counted together. Root's daemons and fetchers
 * share the sandbox user's count: a quarter of the smallest default pid_max, some 200
 * mounts of 40 threads. A user's daemon in its own user namespace counts alone there
 * (set once inside it); without one the limit is left as it is, since it would count
 * the user's other tasks. */
#define STP_SANDBOX_TASKS_MAX 8192u

/* Address space beyond RLIMIT_DATA: the program, its libraries and reservations that
 * hold no memory (thread stacks, malloc arenas). A process that lowers RLIMIT_DATA
 * later lowers RLIMIT_AS to the new limit and this. */
#define STP_SANDBOX_AS_RESERVE (4ull << 30)

/*
 * Confines the calling process as described above. The process must be single-threaded
 * (-EBUSY otherwise). Returns 0, or a negative errno with a one-line message in ERR
 * (ERRLEN bytes, always terminated) naming the step that failed, for the caller to prefix
 * with "sandbox: " or the like.
 *
 * Errors found before anything irreversible (unknown or root user, bad options, no
 * filter or an empty one, /dev/null cannot be opened) leave the process as it was, so the
 * caller can still unmount. A later failure (e.g. chroot, unshare or pivot_root refused)
 * leaves the process partly confined, perhaps outside the host's files: the caller cannot
 * unmount any more and should exit with an error.
 *
 * Not root, it forks once (a child that tries the user namespace and exits at once).
 * Not thread-safe (by design: it must run before any thread exists).
 */
int stp_sandbox_enter(const struct stp_sandbox_opts *opts, char *err, size_t errlen);

/*
 * Step 2 alone, ahead of the rest, for root's daemon while it waits for its setup, so
 * that it overlaps the monitor's checks and mount instead of following them. Nothing can be
 * opened by path afterwards, so /dev/null is opened first (stp_sandbox_null_fd).
 * stp_sandbox_enter then skips step 2 and uses that /dev/null. The FUSE
 * mount, made after this, never appears beneath the daemon's root. Does nothing (0) for
 * STP_SANDBOX_OFF, when not root (a user's namespace is built by stp_sandbox_enter), or
 * a second time. Returns 0, or a negative errno with a one-line message in ERR: the
 * caller should then report it and _exit. Not thread-safe (it must run before any
 * thread exists).
 */
int stp_sandbox_enter_empty_root(enum stp_sandbox_mode mode, char *err, size_t errlen);

/* /dev/null as opened by stp_sandbox_enter_empty_root, until stp_sandbox_enter takes it
 * over; -1 otherwise. The caller may dup it, not close it. */
int stp_sandbox_null_fd(void);

/*
 * The user root's daemon runs as: NAME, or for NULL "stipple" if that user exists, else
 * "nobody" with a warning through stp_log (STP_LOG_WARN) that the shared user is used.
 * Through the name service, which may load modules and read files: for the monitor to
 * call while the daemon starts, handing the ids over (HAS_IDS), so that the daemon makes
 * no lookup. 0 with *UID and *GID, or a negative errno with a one-line message in ERR: an
 * unknown user, one with uid or gid 0, a failed lookup. Not thread-safe (the warning is
 * given once per process).
 */
int stp_sandbox_resolve_user(const char *name, uid_t *uid, gid_t *gid, char *err,
			     size_t errlen);

/*
 * Gives, through stp_log (STP_LOG_WARN), the warning stp_sandbox_enter would give for
 * MODE in a process that is not root: a user's daemon that may not create a user
 * namespace (found by trying in a child). For a daemon to call while its stderr is still
 * the user's, before it detaches; stp_sandbox_enter then does not repeat it. Root's
 * warning (the shared "nobody") is stp_sandbox_resolve_user's. Not thread-safe.
 */
void stp_sandbox_warn(enum stp_sandbox_mode mode);

/*
 * Confines a freshly forked, single-threaded child of the mounting process whose only work
 * is lookups beneath a directory descriptor it already holds (openat2 with RESOLVE_BENEATH,
 * fstat, close) and reads and writes on descriptors it holds (a pipe). It keeps its uid
 * and gid (the kernel lets only the mount's owner into a FUSE mount without allow_other),
 * and gives up the rest:
 *
 *   1. when it holds CAP_SETPCAP (root): the bounding set emptied and securebits locked
 *      (NOROOT and friends), so that uid 0 regains no capability;
 *   2. permitted, effective, inheritable and ambient sets cleared;
 *   3. START(ARG), when START is not NULL: it may start threads, which inherit all of the
 *      above from the calling thread; they must wait, making no request to the mount,
 *      until this function has returned 0;
 *   4. no_new_privs, then PROG, the lookup filter (filters.h: STP_FILTER_LOOKUP, built
 *      before the fork), on every thread of the process at once (SECCOMP_FILTER_FLAG_TSYNC,
 *      which sets no_new_privs on them too), allowing only: openat2 and newfstatat
 *      (AT_EMPTY_PATH only) from a descriptor (not AT_FDCWD), fstat, close, read, write,
 *      poll, brk/mmap/mprotect without PROT_EXEC, munmap, mremap, madvise, futex for
 *      glibc's locks, a thread's start and end, clock_gettime, rt_sigreturn,
 *      restart_syscall, exit, exit_group. No clone: the process can make no thread or
 *      process from here on, so START's threads are all it will have, whatever uid it
 *      runs as (RLIMIT_NPROC binds no uid 0). Anything else kills the process
 *      (STP_SANDBOX_ON) or is logged and allowed (STP_SANDBOX_LOG).
 *
 * The filter cannot read openat2's struct open_how: passing RESOLVE_BENEATH (and
 * RESOLVE_NO_MAGICLINKS) is the caller's part. Descriptors are left alone: close what the
 * child must not have (the image, /dev/fuse) before the call. STP_SANDBOX_OFF: calls
 * START and returns 0.
 *
 * Returns 0, or a negative errno with a one-line message in ERR, as stp_sandbox_enter: a
 * second thread (-EBUSY) or a filter that cannot be built leaves the process as it was;
 * a later failure (-ESRCH: a thread the filter could not be put on) leaves it partly
 * confined, with START's threads waiting, and the caller should _exit. Not thread-safe
 * (it must be entered before any thread exists).
 */
int stp_sandbox_confine_lookups(enum stp_sandbox_mode mode, const struct stp_sandbox_prog *prog,
				void (*start)(void *arg), void *arg, char *err, size_t errlen);

/* Parses "on", "log", "off" into MODE. Returns 0 or -EINVAL (MODE untouched). */
int stp_sandbox_parse_mode(const char *s, enum stp_sandbox_mode *mode);

#endif
