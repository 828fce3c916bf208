/* SPDX-License-Identifier: MIT */
/*
 * The sandbox of the mount daemon (see sandbox.h for the steps and the caller's contract).
 *
 * Everything that can fail for an ordinary reason (user lookup, a filter missing,
 * opening /dev/null, checking the descriptors to keep) happens first, while the caller can
 * still unmount; the irreversible steps follow in the only order that works: the empty
 * root and the bounding set need CAP_SYS_ADMIN and CAP_SETPCAP, so they come before
 * the uid change; securebits keep the capabilities across setresuid, so they are cleared
 * explicitly afterwards; seccomp comes last, as it forbids the calls the other steps make.
 */
#include <errno.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/mount.h>
#include <linux/securebits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"
#include "util.h"

/* A daemon keeps the image, /dev/fuse and perhaps a status pipe: a few at most. */
#define MAX_KEEP_FDS 48

/* Candidates for the mount point of the empty root, in our private copy of the tree only. */
static const char *const empty_root_bases[] = { "/tmp", "/run", "/mnt", "/dev" };

#define LOCKED_SECUREBITS                                                          \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |           \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |                 \
	 SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)


/* Step 2 taken ahead (stp_sandbox_enter_empty_root): the empty root is entered, and
 * /dev/null was opened before it (-1: not taken ahead). */
static bool root_entered;
static int early_nullfd = -1;
/* The detached tmpfs that root's daemon has as its root (enter_detached_root), kept open
 * for good; -1: none. */
static int detached_root_fd = -1;

/* unshare(CLONE_NEWNS) and per-thread credentials need one thread; /proc tells. */
static int check_single_threaded(char *err, size_t errlen)
{
	char line[128];
	long threads = 1;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0; /* no /proc: trust the caller */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %ld", &threads) == 1)
			break;
	fclose(f);
	if (threads != 1)
		return stp_errf(err, errlen, -EBUSY,
			    "%ld threads already run; it must be entered before any starts",
			    threads);
	return 0;
}

static int lookup_user(const char *name, uid_t *uid, gid_t *gid, bool *found)
{
	char buf[16384];
	struct passwd pw, *res = NULL;
	int rc = getpwnam_r(name, &pw, buf, sizeof(buf), &res);

	*found = false;
	if (rc && rc != ENOENT && rc != ESRCH)
		return -rc;
	if (res) {
		*uid = pw.pw_uid;
		*gid = pw.pw_gid;
		*found = true;
	}
	return 0;
}

/* Each warning is given once per process: by stp_sandbox_warn, else by the sandbox. */
static bool warned_user, warned_userns;

static void warn_shared_user(void)
{
	if (warned_user)
		return;
	warned_user = true;
	stp_log(STP_LOG_WARN, "warning: sandbox: no user 'stipple', so the daemon runs as the "
		"shared 'nobody', whose other processes may signal or trace it; create the user "
		"with systemd-sysusers (or adduser --system --group --no-create-home stipple)");
}

/* The user named in the options, else "stipple", else "nobody" (with a warning). Never
 * root. */
int stp_sandbox_resolve_user(const char *name, uid_t *uid, gid_t *gid, char *err,
			     size_t errlen)
{
	const char *want = name ? name : "stipple";
	bool found;
	int rc = lookup_user(want, uid, gid, &found);

	if (!rc && !found && !name) {
		want = "nobody";
		rc = lookup_user(want, uid, gid, &found);
		if (!rc && found)
			warn_shared_user();
	}
	if (rc)
		return stp_errf(err, errlen, rc, "looking up user '%s': %s", want,
			    strerror(-rc));
	if (!found)
		return stp_errf(err, errlen, -ENOENT, "user '%s' does not exist", want);
	if (*uid == 0 || *gid == 0)
		return stp_errf(err, errlen, -EINVAL,
			    "user '%s' has uid or gid 0; choose an unprivileged user", want);
	return 0;
}

/* The ids root's daemon takes: handed over, or looked up here. Never root's. */
static int sandbox_ids(const struct stp_sandbox_opts *o, uid_t *uid, gid_t *gid, char *err,
		       size_t errlen)
{
	if (!o->has_ids)
		return stp_sandbox_resolve_user(o->user, uid, gid, err, errlen);
	*uid = o->uid;
	*gid = o->gid;
	if (*uid == 0 || *gid == 0)
		return stp_errf(err, errlen, -EINVAL, "uid %u, gid %u: root's, refused",
				(unsigned)*uid, (unsigned)*gid);
	return 0;
}


static int compare_ints(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Sorted copy of the descriptors above 2 to keep; each must be open. Returns the count. */
static int collect_keep_fds(const struct stp_sandbox_opts *opts, int *keep, char *err,
			    size_t errlen)
{
	size_t n = 0;

	if (opts->nkeep > MAX_KEEP_FDS - 1)
		return stp_errf(err, errlen, -EINVAL, "%zu descriptors to keep (at most %d)",
			    opts->nkeep, MAX_KEEP_FDS - 1);
	/* the empty root's own (enter_detached_root) */
	if (detached_root_fd > 2)
		keep[n++] = detached_root_fd;
	for (size_t i = 0; i < opts->nkeep; i++) {
		int fd = opts->keep_fds[i];

		if (fd < 0 || fcntl(fd, F_GETFD) < 0)
			return stp_errf(err, errlen, -EBADF,
				    "descriptor %d to keep is not open", fd);
		if (fd > 2)
			keep[n++] = fd;
	}
	qsort(keep, n, sizeof(*keep), compare_ints);
	return (int)n;
}

static int close_fd_range(unsigned int lo, unsigned int hi)
{
	if (lo > hi)
		return 0;
	if (!close_range(lo, hi, 0))
		return 0;
	if (errno != ENOSYS)
		return -errno;
	/* Kernel older than 5.9: close one by one up to the descriptor limit. */
	long max = sysconf(_SC_OPEN_MAX);

	for (long fd = lo; fd <= (long)hi && fd < max; fd++)
		close((int)fd);
	return 0;
}

/* Everything from 3 up, except KEEP (sorted, may hold duplicates). */
static int close_other_fds(const int *keep, int nkeep)
{
	unsigned int lo = 3;
	int rc;

	for (int i = 0; i < nkeep; i++) {
		unsigned int fd = (unsigned int)keep[i];

		if (fd < lo)
			continue;
		rc = close_fd_range(lo, fd - 1);
		if (rc)
			return rc;
		lo = fd + 1;
	}
	return close_fd_range(lo, ~0u);
}

/* 0 and 1 (and 2 unless KEEP_STDERR) onto NULLFD, which is then closed unless it is one of them. */
static int point_stdio_at(int nullfd, bool keep_stderr)
{
	int last = keep_stderr ? 1 : 2;
	int rc = 0;

	for (int fd = 0; !rc && fd <= last; fd++)
		if (fd != nullfd && dup2(nullfd, fd) < 0)
			rc = -errno;
	if (nullfd > 2)
		close(nullfd);
	return rc;
}

/* Files written grow to MAX bytes at most; a write past it fails (EFBIG) instead of
 * killing the process with SIGXFSZ. */
static int limit_file_size(unsigned long long max)
{
	struct rlimit rl = { max, max };

	if (!max)
		return 0;
	signal(SIGXFSZ, SIG_IGN);
	return setrlimit(RLIMIT_FSIZE, &rl) ? -errno : 0;
}

/* STP_SANDBOX_AS_RESERVE (sandbox.h): the program and its libraries (under 100 MiB,
 * libcurl's included), and what holds no memory of its own: each thread's stack beyond
 * what it touches and its malloc arena's 64 MiB reservation (128 MiB while it is made),
 * for some 40 threads (libfuse's, the warming workers, the decoders, a fetcher's
 * channels), with room. RLIMIT_DATA counts private writable mappings only; the filter
 * refuses the others where it sees mmap's arguments, which it does not on s390 (whose
 * mmap takes them in memory). RLIMIT_AS bounds every mapping, whatever the filter sees:
 * a second wall behind it.
 *
 * RLIMIT_AS from RLIMIT_DATA's hard limit, when there is one: that limit and
 * STP_SANDBOX_AS_RESERVE. Nothing without (a process that bounds no memory). */
static int limit_address_space(void)
{
	struct rlimit data, as;

	if (getrlimit(RLIMIT_DATA, &data) || data.rlim_max == RLIM_INFINITY)
		return 0;
	as.rlim_cur = as.rlim_max = data.rlim_max + STP_SANDBOX_AS_RESERVE;
	return setrlimit(RLIMIT_AS, &as) ? -errno : 0;
}

/* STP_SANDBOX_TASKS_MAX (sandbox.h), never raised. Without it a process of the sandbox
 * user could make threads (a clone with a stack of its own costs no counted memory) until
 * the host's pid_max or threads-max, and nothing on the host could fork. */
static int limit_tasks(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NPROC, &rl))
		return -errno;
	if (rl.rlim_max <= STP_SANDBOX_TASKS_MAX)
		return 0;
	rl.rlim_max = STP_SANDBOX_TASKS_MAX;
	rl.rlim_cur = rl.rlim_cur < rl.rlim_max ? rl.rlim_cur : rl.rlim_max;
	return setrlimit(RLIMIT_NPROC, &rl) ? -errno : 0;
}

static int pivot_into(const char *dir, char *err, size_t errlen)
{
	if (chdir(dir))
		return stp_errf(err, errlen, -errno, "chdir %s: %s", dir, strerror(errno));
	/* The old root ends up stacked on "."; detaching it drops every other mount. */
	if (syscall(SYS_pivot_root, ".", "."))
		return stp_errf(err, errlen, -errno, "pivot_root into %s: %s", dir,
			    strerror(errno));
	if (umount2(".", MNT_DETACH))
		return stp_errf(err, errlen, -errno, "detaching the old root: %s",
			    strerror(errno));
	if (chdir("/"))
		return stp_errf(err, errlen, -errno, "chdir /: %s", strerror(errno));
	return 0;
}

/*
 * A private copy of the mount tree, then an empty read-only tmpfs as its root. The copy
 * of the FUSE mount goes with the old root, so the host's umount still ends the daemon.
 * A user's daemon (in its user namespace) takes this way; root's, only where the kernel
 * refuses a detached tmpfs (enter_detached_root).
 */
static int enter_private_root(char *err, size_t errlen)
{
	const unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
	const char *base = NULL;

	if (unshare(CLONE_NEWNS))
		return stp_errf(err, errlen, -errno, "unshare(CLONE_NEWNS): %s",
			    strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return stp_errf(err, errlen, -errno, "making / private: %s", strerror(errno));
	for (size_t i = 0; !base && i < sizeof(empty_root_bases) / sizeof(empty_root_bases[0]); i++)
		if (!mount("stipple-sandbox", empty_root_bases[i], "tmpfs", flags,
			   "mode=0555,size=4k,nr_inodes=1"))
			base = empty_root_bases[i];
	if (!base)
		return stp_errf(err, errlen, -errno, "mounting an empty tmpfs on %s: %s",
			    empty_root_bases[0], strerror(errno));
	return pivot_into(base, err, errlen);
}

/*
 * Root's empty root: a tmpfs made detached (fsopen, fsmount: it belongs to no mount
 * namespace and nothing is mounted under it), then chroot into it. The same files as
 * enter_private_root, none, at a fraction of its cost: that copies the host's mount
 * tree only to detach it again, and the detach waits for an RCU grace period (1.6 ms
 * here, on every mount's way to live). No copy means no copy of the FUSE mount either, so
 * the host's umount still ends the daemon; the chroot cannot be left without
 * CAP_SYS_CHROOT or a directory outside it, and the daemon keeps neither. Closing the
 * mount's descriptor would dissolve its anonymous namespace, which waits for the same
 * grace period: it stays open, naming the daemon's own root, until the daemon exits.
 * -ENOSYS or -EPERM before anything is changed (Linux < 5.2, a container's filter):
 * the caller then takes the private namespace instead.
 */
static int set_tmpfs_option(int fs, const char *key, const char *value)
{
	return syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0) ? -errno : 0;
}

static int make_detached_tmpfs(void)
{
	const unsigned attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			       MOUNT_ATTR_NOEXEC;
	int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	int rc, mnt = -1;

	if (fs < 0)
		return -errno;
	rc = set_tmpfs_option(fs, "source", "stipple-sandbox");
	if (!rc)
		rc = set_tmpfs_option(fs, "mode", "0555");
	if (!rc)
		rc = set_tmpfs_option(fs, "size", "4k");
	if (!rc)
		rc = set_tmpfs_option(fs, "nr_inodes", "1");
	if (!rc && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
		rc = -errno;
	if (!rc && (mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs)) < 0)
		rc = -errno;
	close(fs);
	return rc ? rc : mnt;
}

static int enter_detached_root(char *err, size_t errlen)
{
	int mnt = make_detached_tmpfs();

	if (mnt == -ENOSYS || mnt == -EPERM)
		return enter_private_root(err, errlen);
	if (mnt < 0)
		return stp_errf(err, errlen, mnt, "making an empty tmpfs: %s", strerror(-mnt));
	if (fchdir(mnt) || chroot(".") || chdir("/")) {
		int rc = -errno;

		close(mnt);
		return stp_errf(err, errlen, rc, "entering an empty tmpfs: %s", strerror(-rc));
	}
	detached_root_fd = mnt;
	return 0;
}

/*
 * The capability calls are made directly (prctl, capget, capset), not through libcap:
 * they are a few lines here, and a program that links libcap pays for its loading and
 * for its constructor's probe of the kernel at every start (stipple-mountd: about
 * 0.25 ms of CPU on the way to live, tests/bench/NOTES.md).
 */

/* Every capability the kernel knows, from the bounding set: until PR_CAPBSET_READ says
 * EINVAL, past the last one. Needs CAP_SETPCAP, hence before the uid change. */
static int drop_bounding_set(char *err, size_t errlen)
{
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
			return stp_errf(err, errlen, -errno, "dropping capability %d from the "
				    "bounding set: %s", cap, strerror(errno));
	return errno == EINVAL ? 0 : stp_errf(err, errlen, -errno, "reading the bounding set: %s",
					      strerror(errno));
}

static int lock_securebits(char *err, size_t errlen)
{
	if (prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS, 0, 0, 0))
		return stp_errf(err, errlen, -errno, "locking securebits: %s", strerror(errno));
	return 0;
}

/* What the kernel now holds, read back rather than trusted from the calls that set it
 * (as OpenSSH's permanently_set_uid does): all three uids and gids as asked and no
 * supplementary group. A gid of -1, say, would have left root's. */
static int check_switched(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;

	if (getresuid(&ruid, &euid, &suid) || ruid != uid || euid != uid || suid != uid)
		return stp_errf(err, errlen, -EPERM, "the uid did not change to %u",
			    (unsigned)uid);
	if (getresgid(&rgid, &egid, &sgid) || rgid != gid || egid != gid || sgid != gid)
		return stp_errf(err, errlen, -EPERM, "the gid did not change to %u",
			    (unsigned)gid);
	if (getgroups(0, NULL) != 0)
		return stp_errf(err, errlen, -EPERM, "supplementary groups remain");
	return 0;
}

/* Once the capabilities are gone (securebits kept them across the switch): root's ids
 * cannot be taken back. */
static int check_no_way_back(char *err, size_t errlen)
{
	if (!setresuid(0, 0, 0) || !setresgid(0, 0, 0) || !setgroups(0, NULL))
		return stp_errf(err, errlen, -EPERM, "root's ids could be taken back");
	return 0;
}

static int switch_user(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	if (setgroups(0, NULL))
		return stp_errf(err, errlen, -errno, "setgroups: %s", strerror(errno));
	if (setresgid(gid, gid, gid))
		return stp_errf(err, errlen, -errno, "setresgid %u: %s", (unsigned)gid,
			    strerror(errno));
	if (setresuid(uid, uid, uid))
		return stp_errf(err, errlen, -errno, "setresuid %u: %s", (unsigned)uid,
			    strerror(errno));
	return check_switched(uid, gid, err, errlen);
}

/* Dropping needs no privilege, so this runs for root and for users alike. The ambient
 * set first (a kernel before 4.3 has none: EINVAL), then the effective, permitted and
 * inheritable sets, all 64 bits of each. */
static int clear_capabilities(char *err, size_t errlen)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return stp_errf(err, errlen, -errno, "clearing the ambient set: %s",
			    strerror(errno));
	if (syscall(SYS_capset, &head, none))
		return stp_errf(err, errlen, -errno, "clearing capabilities: %s",
			    strerror(errno));
	return 0;
}

/* The steps that need root: namespace (unless taken ahead), bounding set, securebits,
 * identity. */
static int drop_privilege(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	int rc = root_entered ? 0 : enter_detached_root(err, errlen);

	if (!rc)
		rc = drop_bounding_set(err, errlen);
	if (!rc)
		rc = lock_securebits(err, errlen);
	if (!rc)
		rc = switch_user(uid, gid, err, errlen);
	return rc;
}

static int write_proc_file(const char *path, const char *text, char *err, size_t errlen)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return stp_errf(err, errlen, -errno, "opening %s: %s", path, strerror(errno));
	n = write(fd, text, len);
	if (n != (ssize_t)len) {
		int rc = n < 0 ? -errno : -EIO;

		close(fd);
		return stp_errf(err, errlen, rc, "writing %s: %s", path, strerror(-rc));
	}
	close(fd);
	return 0;
}

/*
 * A user namespace in which the process keeps its own uid and gid (mapped onto
 * themselves), then the private empty root as for root. setgroups must be denied before
 * an unprivileged process may write gid_map. Inside, the process holds every capability
 * over what the namespace owns, which is what the mount namespace, the tmpfs and
 * pivot_root need; the bounding set and securebits go too, and the capabilities are
 * cleared afterwards like root's.
 */
static int enter_user_namespace(char *err, size_t errlen)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	/* A process that changed its uid is not dumpable, and then its /proc files belong to
	 * root, maps included: dumpable while they are written. */
	int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	int rc;

	if (unshare(CLONE_NEWUSER))
		return stp_errf(err, errlen, -errno, "unshare(CLONE_NEWUSER): %s", strerror(errno));
	if (dumpable == 0 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
		return stp_errf(err, errlen, -errno, "PR_SET_DUMPABLE: %s", strerror(errno));
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	rc = write_proc_file("/proc/self/uid_map", map, err, errlen);
	if (!rc)
		rc = write_proc_file("/proc/self/setgroups", "deny\n", err, errlen);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (!rc)
		rc = write_proc_file("/proc/self/gid_map", map, err, errlen);
	if (dumpable == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) && !rc)
		rc = stp_errf(err, errlen, -errno, "PR_SET_DUMPABLE: %s", strerror(errno));
	if (!rc)
		rc = enter_private_root(err, errlen);
	if (!rc)
		rc = drop_bounding_set(err, errlen);
	return rc ? rc : lock_securebits(err, errlen);
}

/*
 * Whether the kernel lets this process build its namespaces (unprivileged user namespaces
 * may be off: Debian's kernel.unprivileged_userns_clone, user.max_user_namespaces, an LSM).
 * Tried in a child first, because a failure half-way would leave this process in a user
 * namespace it cannot leave. Cached: asked once per process.
 */
static int userns_probe = 1; /* 1: not asked yet */
static char userns_why[160];

static int probe_user_namespace(void)
{
	int pipefd[2], status = 0;
	ssize_t n;
	pid_t pid;

	if (userns_probe != 1)
		return userns_probe;
	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid == 0) {
		char why[sizeof(userns_why)] = "";
		int rc = enter_user_namespace(why, sizeof(why));

		if (rc && write(pipefd[1], why, strlen(why)) < 0)
			rc = -EIO;
		_exit(rc ? 1 : 0);
	}
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		return -errno;
	}
	n = read(pipefd[0], userns_why, sizeof(userns_why) - 1);
	userns_why[n > 0 ? n : 0] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) != pid)
		status = 1 << 8;
	userns_probe = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
	if (userns_probe && !userns_why[0])
		snprintf(userns_why, sizeof(userns_why), "the trial child failed (status %#x)",
			 status);
	return userns_probe;
}

static void warn_no_userns(void)
{
	if (warned_userns || !probe_user_namespace())
		return;
	warned_userns = true;
	stp_log(STP_LOG_WARN, "warning: sandbox: no user namespace (%s): the daemon keeps its "
		"view of the host's files; it is still confined by the filter", userns_why);
}

void stp_sandbox_warn(enum stp_sandbox_mode mode)
{
	if (mode != STP_SANDBOX_OFF && geteuid() != 0)
		warn_no_userns();
}

/* no_new_privs, then the program: as libseccomp's seccomp_load does, without its
 * compile and its probes of the kernel (the monitor made them: filters.h). On this
 * thread, or with SECCOMP_FILTER_FLAG_TSYNC on every thread, no_new_privs included (the
 * kernel then answers with the id of a thread it could not bring along). */
static int load_prog(const struct stp_sandbox_prog *prog, unsigned flags, char *err,
		     size_t errlen)
{
	struct sock_fprog fprog = { .len = (unsigned short)prog->n, .filter = prog->insns };
	long rc;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return stp_errf(err, errlen, -errno, "setting no_new_privs: %s", strerror(errno));
	rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
	if (rc < 0)
		return stp_errf(err, errlen, -errno, "loading the seccomp filter: %s",
				strerror(errno));
	if (rc > 0)
		return stp_errf(err, errlen, -ESRCH,
			    "loading the seccomp filter: thread %ld could not take it", rc);
	return 0;
}

/* A program to load: 1 to STP_SANDBOX_PROG_MAX instructions. */
static int check_prog(const struct stp_sandbox_prog *prog, char *err, size_t errlen)
{
	if (!prog || !prog->n || prog->n > STP_SANDBOX_PROG_MAX || !prog->insns)
		return stp_errf(err, errlen, -EINVAL, "no seccomp filter to load");
	return 0;
}

static int confine(bool privileged, uid_t uid, gid_t gid, const struct stp_sandbox_prog *prog,
		   char *err, size_t errlen)
{
	bool own_count = privileged; /* the sandbox user's tasks, or the namespace's */
	int rc = 0;

	if (privileged) {
		rc = drop_privilege(uid, gid, err, errlen);
	} else if (!probe_user_namespace()) {
		rc = enter_user_namespace(err, errlen);
		own_count = !rc;
	}

	if (!rc)
		rc = clear_capabilities(err, errlen);
	if (!rc && privileged)
		rc = check_no_way_back(err, errlen);
	/* after the user namespace: there it counts the process's own tasks only. A user's
	 * daemon without one would share the limit with every task of the user (a build,
	 * a browser), who could then neither mount nor keep the daemon's threads. */
	if (!rc && own_count && (rc = limit_tasks()))
		rc = stp_errf(err, errlen, rc, "RLIMIT_NPROC: %s", strerror(-rc));
	return rc ? rc : load_prog(prog, 0, err, errlen);
}

int stp_sandbox_enter(const struct stp_sandbox_opts *opts, char *err, size_t errlen)
{
	int keep[MAX_KEEP_FDS];
	bool privileged = geteuid() == 0;
	uid_t uid = 0;
	gid_t gid = 0;
	int nkeep, nullfd, rc;

	if (err && errlen)
		err[0] = '\0';
	if (opts->mode == STP_SANDBOX_OFF)
		return 0;
	rc = check_single_threaded(err, errlen);
	if (rc)
		return rc;
	nkeep = collect_keep_fds(opts, keep, err, errlen);
	if (nkeep < 0)
		return nkeep;
	if (privileged) {
		rc = sandbox_ids(opts, &uid, &gid, err, errlen);
		if (rc)
			return rc;
	}
	rc = check_prog(opts->filter, err, errlen);
	if (rc)
		return rc;
	if (!privileged)
		warn_no_userns();
	nullfd = early_nullfd >= 0 ? early_nullfd : open("/dev/null", O_RDWR | O_CLOEXEC);
	early_nullfd = -1;
	if (nullfd < 0)
		return stp_errf(err, errlen, -errno, "opening /dev/null: %s", strerror(errno));

	/* From here on nothing can be undone. */
	rc = limit_file_size(opts->file_size_max);
	if (rc)
		return stp_errf(err, errlen, rc, "RLIMIT_FSIZE: %s", strerror(-rc));
	rc = limit_address_space();
	if (rc)
		return stp_errf(err, errlen, rc, "RLIMIT_AS: %s", strerror(-rc));
	rc = point_stdio_at(nullfd, opts->keep_stderr);
	if (rc)
		return stp_errf(err, errlen, rc, "pointing 0-2 at /dev/null: %s", strerror(-rc));
	rc = close_other_fds(keep, nkeep);
	if (rc)
		return stp_errf(err, errlen, rc, "closing descriptors: %s", strerror(-rc));
	return confine(privileged, uid, gid, opts->filter, err, errlen);
}

int stp_sandbox_enter_empty_root(enum stp_sandbox_mode mode, char *err, size_t errlen)
{
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (mode == STP_SANDBOX_OFF || geteuid() != 0 || root_entered)
		return 0;
	rc = check_single_threaded(err, errlen);
	if (rc)
		return rc;
	/* what nothing can open once the root is empty */
	early_nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (early_nullfd < 0)
		return stp_errf(err, errlen, -errno, "opening /dev/null: %s", strerror(errno));
	rc = enter_detached_root(err, errlen);
	root_entered = !rc;
	return rc;
}

int stp_sandbox_null_fd(void)
{
	return early_nullfd;
}


/* Whether this process may drop from the bounding set and set securebits. */
static bool has_setpcap(void)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &head, caps))
		return false;
	return caps[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP);
}

int stp_sandbox_confine_lookups(enum stp_sandbox_mode mode, const struct stp_sandbox_prog *prog,
				void (*start)(void *arg), void *arg, char *err, size_t errlen)
{
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (mode == STP_SANDBOX_OFF) {
		if (start)
			start(arg);
		return 0;
	}
	rc = check_single_threaded(err, errlen);
	if (!rc)
		rc = check_prog(prog, err, errlen);
	if (rc)
		return rc;

	/* From here on nothing can be undone. uid 0 keeps its uid: securebits then keep it
	 * from regaining capabilities (NOROOT) at an exec, which the filter forbids too.
	 * All three are per thread: START's threads inherit them from this one. */
	if (has_setpcap()) {
		rc = drop_bounding_set(err, errlen);
		if (!rc)
			rc = lock_securebits(err, errlen);
	}
	if (!rc)
		rc = clear_capabilities(err, errlen);
	if (rc)
		return rc;
	if (start)
		start(arg);
	return load_prog(prog, SECCOMP_FILTER_FLAG_TSYNC, err, errlen);
}

void stp_sandbox_prog_free(struct stp_sandbox_prog *prog)
{
	free(prog->insns);
	*prog = (struct stp_sandbox_prog){ 0 };
}
