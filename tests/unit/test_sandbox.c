/* SPDX-License-Identifier: MIT */
/*
 * The sandbox through the library: each case forks a child that enters the sandbox and
 * then makes one call; a forbidden call must kill the child with SIGSYS (open and clone3
 * must fail with EACCES and ENOSYS), an allowed one must still work. The parent also reads a confined child's /proc entries (capabilities,
 * no_new_privs, seccomp, uid, descriptors, mounts). Each check is one TAP case; without
 * root, all but the option parsing are skipped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <linux/futex.h>
#include <linux/fuse.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <pwd.h>
#include <seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "filters.h"
#include "sandbox.h"
#include "syscalls.h"
#include "util.h"

#include "check.h"

/* Exit codes of a probe child. */
#define PROBE_OK 0
#define PROBE_CALL_RETURNED 3
#define PROBE_ENTER_FAILED 4
#define PROBE_WRONG 5

static const char scratch_text[] = "stipple sandbox test: bytes read through a kept fd\n";
static int scratch_fd = -1;
/* Whether uid 65534 may create a user namespace here (then a user's sandbox has one). */
static bool user_namespaces;
static bool as_fetcher; /* the fetcher's filter instead of the daemon's */
static bool ahead;      /* the empty root entered first (stp_sandbox_enter_empty_root) */

static void report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(bool ok, const char *fmt, ...)
{
	char name[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	tap_result(ok, name);
}

/* The daemon's filter in STP_SANDBOX_ON, built for this process (a child) as the monitor
 * builds it; NULL when it cannot be (the sandbox then refuses). */
static const struct stp_sandbox_prog *daemon_filter(void)
{
	static struct stp_sandbox_prog filter;

	if (!filter.n && stp_filters_export(STP_FILTER_DAEMON, STP_SANDBOX_ON, getpid(), &filter,
					    NULL, 0))
		return NULL;
	return &filter;
}

/* In a child: enter the sandbox keeping the scratch file and EXTRA. */
static int enter(enum stp_sandbox_mode mode, const int *extra, size_t nextra)
{
	int keep[8] = { scratch_fd };
	/* nobody by name: whether a 'stipple' user exists does not matter here */
	struct stp_sandbox_opts opts = { .mode = mode, .user = "nobody", .keep_fds = keep,
					 .nkeep = 1 + nextra };
	/* as the monitor builds it, for this process, before it reaches the empty root */
	struct stp_sandbox_prog filter;
	char err[256];
	int rc = stp_filters_export(as_fetcher ? STP_FILTER_FETCHER : STP_FILTER_DAEMON, mode,
				    getpid(), &filter, err, sizeof(err));

	if (rc) {
		dprintf(2, "stp_filters_export: %d: %s\n", rc, err);
		return rc;
	}
	opts.filter = &filter;
	memcpy(keep + 1, extra, nextra * sizeof(*extra));
	if (ahead) {
		/* no name service in the empty root: the ids, as the monitor hands them over */
		opts.has_ids = true;
		opts.uid = opts.gid = 65534;
		rc = stp_sandbox_enter_empty_root(mode, err, sizeof(err));
		/* a root's: nothing can be opened by path now, /dev/null was before */
		if (!rc && geteuid() == 0 && (stp_sandbox_null_fd() < 0 || open("/dev/null", O_RDONLY) >= 0))
			rc = -EPROTO;
		if (rc) {
			dprintf(2, "stp_sandbox_enter_empty_root: %d: %s\n", rc, err);
			return rc;
		}
	}
	rc = stp_sandbox_enter(&opts, err, sizeof(err));
	if (rc)
		dprintf(2, "stp_sandbox_enter: %d: %s\n", rc, err);
	return rc;
}

/* The probes: each returns the child's exit code (when it is not killed). */

static int probe_execve(void)
{
	char *argv[] = { "/bin/true", NULL };

	execve("/bin/true", argv, (char *[]){ NULL });
	return PROBE_CALL_RETURNED;
}

static int probe_socket(void)
{
	return socket(AF_INET, SOCK_STREAM, 0) >= 0 ? PROBE_OK : PROBE_CALL_RETURNED;
}

/* Refused with EACCES, not killed: glibc opens some files lazily and copes with that. */
static int probe_open(void)
{
	int fd = open("/etc/passwd", O_RDONLY);

	if (fd < 0 && errno == EACCES)
		fd = openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY);
	return fd < 0 && errno == EACCES ? PROBE_OK : PROBE_CALL_RETURNED;
}

static int probe_ptrace(void)
{
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	return PROBE_CALL_RETURNED;
}

static int probe_mount(void)
{
	mount("none", "/", "tmpfs", 0, NULL);
	return PROBE_CALL_RETURNED;
}

static int probe_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	return PROBE_CALL_RETURNED;
}

static int probe_other_ioctl(void)
{
	int n;

	ioctl(scratch_fd, FIONREAD, &n);
	return PROBE_CALL_RETURNED;
}

static int probe_stat_path(void)
{
	struct stat st;

	stat("/", &st);
	return PROBE_CALL_RETURNED;
}

/* AT_EMPTY_PATH does not make a path lookup from the working directory acceptable. */
static int probe_empty_path_flag_cwd(void)
{
	struct stat st;

	fstatat(AT_FDCWD, "/etc/passwd", &st, AT_EMPTY_PATH);
	return PROBE_CALL_RETURNED;
}

/* Where fstat has a call of its own (stp_fd_stat), a path given with AT_EMPTY_PATH from
 * a held file is refused by the filter, whatever the root holds; elsewhere it is looked
 * up, and finds the empty root (or, for a user's daemon without a user namespace, the
 * host's tree). */
static int probe_empty_path_flag_abs(void)
{
	struct stat st;
	int want = stp_syscalls_fstat_pathless(seccomp_arch_native()) ? EACCES : ENOENT;

	return fstatat(scratch_fd, "/etc/passwd", &st, AT_EMPTY_PATH) < 0 && errno == want
		       ? PROBE_OK : PROBE_WRONG;
}

/* The C library's fstat: "" with AT_EMPTY_PATH, answered EACCES there (not killed). */
static int probe_libc_fstat(void)
{
	struct stat st;
	int rc = fstat(scratch_fd, &st);

	if (stp_syscalls_fstat_pathless(seccomp_arch_native()))
		return rc < 0 && errno == EACCES ? PROBE_OK : PROBE_WRONG;
	return !rc ? PROBE_OK : PROBE_WRONG;
}

static int probe_fstat(void)
{
	struct stat st;

	return !stp_fd_stat(scratch_fd, &st) && st.st_size == sizeof(scratch_text) - 1
		       ? PROBE_OK : PROBE_WRONG;
}

/* libfuse's loop cloned /dev/fuse with it (clone_fd); the daemon's own loop does not. */
static int probe_fuse_clone_ioctl(void)
{
	uint32_t master = (uint32_t)scratch_fd;

	ioctl(scratch_fd, FUSE_DEV_IOC_CLONE, &master);
	return PROBE_CALL_RETURNED;
}

static int probe_exec_mapping(void)
{
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return PROBE_CALL_RETURNED;
}

/* RLIMIT_DATA counts private writable mappings: written pages made read-only (or
 * PROT_NONE) would leave the count and stay resident. Four rounds of 32 MiB: each
 * mprotect must fail with EACCES (review 5 #3). */
static int drop_write(int prot)
{
	for (int i = 0; i < 4; i++) {
		size_t len = 32u << 20;
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return PROBE_WRONG;
		memset(p, 0x5a, len);
		if (mprotect(p, len, prot) == 0 || errno != EACCES)
			return PROBE_WRONG;
	}
	return PROBE_OK;
}

static int probe_mprotect_read(void)
{
	return drop_write(PROT_READ);
}

static int probe_mprotect_none(void)
{
	return drop_write(PROT_NONE);
}

/* A read-only private mapping is not counted either: its reads make pages (or page
 * tables). No confined process maps one, the daemon included: EACCES. */
static int probe_read_only_mapping(void)
{
	void *p = mmap(NULL, 1u << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED && errno == EACCES ? PROBE_OK : PROBE_WRONG;
}

#if defined(__x86_64__)
/* Another system-call table than the filter's: each call number means another call there,
 * so the filter must kill it whatever the number (review 10: checked). x32: the amd64
 * entry with bit 30 set (getpid here); i386: int 0x80 (getpid is 20 there). */
static int probe_x32(void)
{
	syscall(0x40000000 | SYS_getpid);
	return PROBE_CALL_RETURNED;
}

static int probe_int80(void)
{
	long rc = 20;

	__asm__ volatile("int $0x80" : "+a"(rc) : : "memory");
	return PROBE_CALL_RETURNED;
}

/* Whether this kernel has the i386 entry (CONFIG_IA32_EMULATION, not ia32_emulation=0):
 * without, int 0x80 faults (SIGSEGV) before any filter sees it. */
static bool has_int80(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(probe_int80());
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status);
}
#endif

static int probe_clone3(void)
{
	long rc = syscall(SYS_clone3, NULL, (size_t)0);

	return rc == -1 && errno == ENOSYS ? PROBE_OK : PROBE_WRONG;
}

static int probe_pread(void)
{
	char buf[sizeof(scratch_text)];
	ssize_t n = pread(scratch_fd, buf, sizeof(buf), 0);

	if (n != (ssize_t)sizeof(scratch_text) - 1 || memcmp(buf, scratch_text, (size_t)n))
		return PROBE_WRONG;
	return PROBE_OK;
}

static int probe_malloc(void)
{
	size_t len = 64u << 20;
	unsigned char *p = malloc(len);

	if (!p)
		return PROBE_WRONG;
	memset(p, 0xa5, len);
	p = realloc(p, 2 * len);
	if (!p || p[len - 1] != 0xa5)
		return PROBE_WRONG;
	free(p);
	return PROBE_OK;
}

/* Grows a thread's malloc arena, then frees it all: shrinking the arena's heap makes glibc
 * read /proc/sys/vm/overcommit_memory, which the filter must refuse without killing. */
static int churn_arena(void)
{
	enum { N = 256, SIZE = 64 << 10 };
	void **p = calloc(N, sizeof(*p));

	if (!p)
		return -1;
	for (int i = 0; i < N; i++)
		if (!(p[i] = malloc(SIZE)))
			return -1;
		else
			memset(p[i], i, SIZE);
	for (int i = N - 1; i >= 0; i--)
		free(p[i]);
	free(p);
	return 0;
}

static void *thread_main(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	void *p = malloc(1 << 20); /* a new arena: glibc asks for the CPU count */

	if (!p || probe_pread() || churn_arena())
		return (void *)1;
	memset(p, (int)i, 1 << 20);
	free(p);
	return NULL;
}

/* What libfuse 3.17's workers do first (glibc: prctl(PR_SET_NAME)); the daemon's own
 * loop names no thread. */
static int probe_setname(void)
{
	pthread_setname_np(pthread_self(), "fuse_worker");
	return PROBE_CALL_RETURNED;
}

static int probe_other_prctl(void)
{
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return PROBE_CALL_RETURNED;
}

static int probe_threads(void)
{
	pthread_t t[8];
	void *res;
	int bad = 0;

	for (uintptr_t i = 0; i < 8; i++)
		if (pthread_create(&t[i], NULL, thread_main, (void *)i))
			return PROBE_WRONG;
	for (int i = 0; i < 8; i++)
		if (pthread_join(t[i], &res) || res)
			bad = 1;
	return bad ? PROBE_WRONG : PROBE_OK;
}

/* glibc's own locks: FUTEX_WAKE and FUTEX_WAIT_BITSET, private, on a realtime clock. */
static int probe_futex_glibc(void)
{
	uint32_t word = 0;
	struct timespec past = { 0 };

	if (syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) != 0)
		return PROBE_WRONG;
	if (syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, 0, &past,
		    NULL, FUTEX_BITSET_MATCH_ANY) != -1 || errno != ETIMEDOUT)
		return PROBE_WRONG;
	return PROBE_OK;
}

/* A priority-inheritance lock: no filter allows one. */
static int probe_futex_pi(void)
{
	uint32_t word = 0;

	syscall(SYS_futex, &word, FUTEX_TRYLOCK_PI_PRIVATE, 0, NULL, NULL, 0);
	return PROBE_CALL_RETURNED;
}

static int probe_futex_requeue(void)
{
	uint32_t word = 0, other = 0;

	syscall(SYS_futex, &word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)1, &other, 0);
	return PROBE_CALL_RETURNED;
}

static volatile int woken;

static void on_wake(int sig)
{
	(void)sig;
}

static void *sleep_until_woken(void *arg)
{
	struct timespec ts = { 100, 0 };

	woken = nanosleep(&ts, NULL) && errno == EINTR;
	return arg;
}

/* The loop's threads wait in a read, and are woken with a signal as it ends
 * (serveloop.h): a handler without SA_RESTART, pthread_kill until the thread is out
 * (a signal that comes before the thread waits is lost). */
static int probe_wake(void)
{
	struct sigaction sa = { .sa_handler = on_wake };
	pthread_t t;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) || pthread_create(&t, NULL, sleep_until_woken, NULL))
		return PROBE_WRONG;
	for (int i = 0; i < 500 && !woken; i++) {
		struct timespec ts = { 0, 10000000 };

		pthread_kill(t, SIGUSR1);
		nanosleep(&ts, NULL);
	}
	if (pthread_join(t, NULL))
		return PROBE_WRONG;
	return woken ? PROBE_OK : PROBE_WRONG;
}

/* A zstd frame made before the sandbox, decoded inside it as the daemon does. */
static void *frame;
static size_t frame_len, plain_len = 32u << 20;

static int make_frame(void)
{
	unsigned char *plain = malloc(plain_len);
	size_t cap = ZSTD_compressBound(plain_len);

	frame = malloc(cap);
	if (!plain || !frame)
		return -1;
	for (size_t i = 0; i < plain_len; i++)
		plain[i] = (unsigned char)(i * 2654435761u >> 24) & 0x0f;
	frame_len = ZSTD_compress(frame, cap, plain, plain_len, 1);
	free(plain);
	return ZSTD_isError(frame_len) ? -1 : 0;
}

static void *decode_frame(void *arg)
{
	unsigned char *out = malloc(plain_len);
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	size_t n;
	bool ok;

	if (!out || !dctx)
		return (void *)1;
	n = ZSTD_decompressDCtx(dctx, out, plain_len, frame, frame_len);
	ok = n == plain_len && out[12345] == ((unsigned char)(12345 * 2654435761u >> 24) & 0x0f);
	ZSTD_freeDCtx(dctx);
	free(out);
	return ok ? NULL : (void *)1;
}

static int probe_zstd(void)
{
	pthread_t t[2];
	void *r0, *r1;

	if (pthread_create(&t[0], NULL, decode_frame, NULL) ||
	    pthread_create(&t[1], NULL, decode_frame, NULL) || pthread_join(t[0], &r0) ||
	    pthread_join(t[1], &r1))
		return PROBE_WRONG;
	return !r0 && !r1 && !decode_frame(NULL) ? PROBE_OK : PROBE_WRONG;
}

static int probe_stderr(void)
{
	fprintf(stderr, "written to /dev/null\n");
	return write(2, "x", 1) == 1 ? PROBE_OK : PROBE_WRONG;
}

/* The fetcher's fcntl: what libcurl asks (a socket made non-blocking, close-on-exec),
 * and nothing that makes the kernel signal another process. */
static int probe_fcntl_nonblock(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) || fcntl(fd, F_GETFD) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC))
		return PROBE_WRONG;
	return fcntl(fd, F_GETFL) & O_NONBLOCK ? PROBE_OK : PROBE_WRONG;
}

static int probe_fcntl_setown(void)
{
	fcntl(scratch_fd, F_SETOWN, 1);
	return PROBE_CALL_RETURNED;
}

static int probe_fcntl_async(void)
{
	fcntl(scratch_fd, F_SETFL, O_ASYNC | O_NONBLOCK);
	return PROBE_CALL_RETURNED;
}

static int probe_fcntl_setsig(void)
{
	fcntl(scratch_fd, F_SETSIG, SIGKILL);
	return PROBE_CALL_RETURNED;
}

static int probe_fcntl_setlease(void)
{
	fcntl(scratch_fd, F_SETLEASE, F_RDLCK);
	return PROBE_CALL_RETURNED;
}

static int probe_fcntl_notify(void)
{
	fcntl(scratch_fd, F_NOTIFY, DN_ACCESS);
	return PROBE_CALL_RETURNED;
}

static int probe_fcntl_dupfd(void)
{
	fcntl(scratch_fd, F_DUPFD, 100);
	return PROBE_CALL_RETURNED;
}

static pid_t spawn_probe(enum stp_sandbox_mode mode, bool as_user, int (*probe)(void))
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	if (as_user && setresuid(65534, 65534, 65534))
		_exit(PROBE_ENTER_FAILED);
	if (enter(mode, NULL, 0))
		_exit(PROBE_ENTER_FAILED);
	_exit(probe());
}

static const char *describe(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	return buf;
}

static void expect(const char *what, enum stp_sandbox_mode mode, bool as_user,
		   int (*probe)(void), bool killed)
{
	int status;
	char desc[64];
	pid_t pid = spawn_probe(mode, as_user, probe);
	const char *who = as_user ? "user" : "root";
	const char *m = mode == STP_SANDBOX_LOG ? "log" : "on";

	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		report(false, "%s (%s, %s): fork/wait failed", what, who, m);
		return;
	}
	if (killed)
		report(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
		       "%s (%s, sandbox=%s) is killed by SIGSYS: %s", what, who, m,
		       describe(status, desc, sizeof(desc)));
	else
		report(WIFEXITED(status) && WEXITSTATUS(status) == PROBE_OK,
		       "%s (%s, sandbox=%s) works: %s", what, who, m,
		       describe(status, desc, sizeof(desc)));
}

static void test_forbidden(bool as_user)
{
	expect("execve", STP_SANDBOX_ON, as_user, probe_execve, true);
	expect("socket", STP_SANDBOX_ON, as_user, probe_socket, true);
	expect("ptrace", STP_SANDBOX_ON, as_user, probe_ptrace, true);
	expect("mount", STP_SANDBOX_ON, as_user, probe_mount, true);
	expect("fork", STP_SANDBOX_ON, as_user, probe_fork, true);
	expect("ioctl FIONREAD", STP_SANDBOX_ON, as_user, probe_other_ioctl, true);
	expect("mmap PROT_EXEC", STP_SANDBOX_ON, as_user, probe_exec_mapping, true);
	expect("stat of a path", STP_SANDBOX_ON, as_user, probe_stat_path, true);
	expect("prctl(PR_SET_DUMPABLE)", STP_SANDBOX_ON, as_user, probe_other_prctl, true);
	expect("prctl(PR_SET_NAME)", STP_SANDBOX_ON, as_user, probe_setname, true);
	expect("ioctl FUSE_DEV_IOC_CLONE", STP_SANDBOX_ON, as_user, probe_fuse_clone_ioctl, true);
	expect("fstatat(AT_FDCWD, path, AT_EMPTY_PATH)", STP_SANDBOX_ON, as_user,
	       probe_empty_path_flag_cwd, true);
	expect("futex(FUTEX_TRYLOCK_PI)", STP_SANDBOX_ON, as_user, probe_futex_pi, true);
	expect("futex(FUTEX_CMP_REQUEUE)", STP_SANDBOX_ON, as_user, probe_futex_requeue, true);
#if defined(__x86_64__)
	expect("an x32 call (getpid)", STP_SANDBOX_ON, as_user, probe_x32, true);
	if (has_int80())
		expect("an i386 call by int 0x80 (getpid)", STP_SANDBOX_ON, as_user, probe_int80,
		       true);
	else
		printf("# no i386 entry in this kernel: int 0x80 not tried\n");
#endif
}

static void test_allowed(bool as_user)
{
	expect("open answers EACCES", STP_SANDBOX_ON, as_user, probe_open, false);
	expect("clone3 answers ENOSYS", STP_SANDBOX_ON, as_user, probe_clone3, false);
	expect("pread of a kept fd", STP_SANDBOX_ON, as_user, probe_pread, false);
	expect("fstat of a kept fd", STP_SANDBOX_ON, as_user, probe_fstat, false);
	expect("the C library's fstat", STP_SANDBOX_ON, as_user, probe_libc_fstat, false);
	expect("fstatat(fd, \"/etc/passwd\", AT_EMPTY_PATH) is refused or finds the empty root",
	       STP_SANDBOX_ON, as_user, probe_empty_path_flag_abs, false);

	expect("malloc 64 MiB", STP_SANDBOX_ON, as_user, probe_malloc, false);
	expect("pthread_create", STP_SANDBOX_ON, as_user, probe_threads, false);
	expect("futex as glibc's locks use it", STP_SANDBOX_ON, as_user, probe_futex_glibc, false);
	expect("stderr", STP_SANDBOX_ON, as_user, probe_stderr, false);
	expect("a thread woken by pthread_kill", STP_SANDBOX_ON, as_user, probe_wake, false);

	expect("zstd decoding in threads", STP_SANDBOX_ON, as_user, probe_zstd, false);
	expect("mprotect(PROT_READ) of written pages answers EACCES", STP_SANDBOX_ON, as_user,
	       probe_mprotect_read, false);
	expect("mprotect(PROT_NONE) of written pages answers EACCES", STP_SANDBOX_ON, as_user,
	       probe_mprotect_none, false);
	expect("mmap(PROT_READ) answers EACCES", STP_SANDBOX_ON, as_user,
	       probe_read_only_mapping, false);
}

/* The fetcher's filter (issue 28, item 11): the fcntl commands libcurl needs, none of
 * those that reach other processes of its uid. */
static void test_fetcher(bool as_user)
{
	as_fetcher = true;
	expect("fetcher: socket(AF_INET)", STP_SANDBOX_ON, as_user, probe_socket, false);
	expect("fetcher: fcntl F_GETFL, F_SETFL O_NONBLOCK, F_GETFD, F_SETFD",
	       STP_SANDBOX_ON, as_user, probe_fcntl_nonblock, false);
	expect("fetcher: fcntl F_SETOWN", STP_SANDBOX_ON, as_user, probe_fcntl_setown, true);
	expect("fetcher: fcntl F_SETFL O_ASYNC", STP_SANDBOX_ON, as_user, probe_fcntl_async,
	       true);
	expect("fetcher: fcntl F_SETSIG", STP_SANDBOX_ON, as_user, probe_fcntl_setsig, true);
	expect("fetcher: fcntl F_SETLEASE", STP_SANDBOX_ON, as_user, probe_fcntl_setlease, true);
	expect("fetcher: fcntl F_NOTIFY", STP_SANDBOX_ON, as_user, probe_fcntl_notify, true);
	expect("fetcher: fcntl F_DUPFD", STP_SANDBOX_ON, as_user, probe_fcntl_dupfd, true);
	expect("fetcher: mprotect(PROT_READ) answers EACCES", STP_SANDBOX_ON, as_user,
	       probe_mprotect_read, false);
	expect("fetcher: mmap(PROT_READ) answers EACCES", STP_SANDBOX_ON, as_user,
	       probe_read_only_mapping, false);
	expect("fetcher: malloc 64 MiB", STP_SANDBOX_ON, as_user, probe_malloc, false);
	expect("fetcher: pthread_create", STP_SANDBOX_ON, as_user, probe_threads, false);
	expect("fetcher: fstat of a kept fd", STP_SANDBOX_ON, as_user, probe_fstat, false);
	expect("fetcher: fstatat(fd, \"/etc/passwd\", AT_EMPTY_PATH) is refused or finds the "
	       "empty root", STP_SANDBOX_ON, as_user, probe_empty_path_flag_abs, false);
	as_fetcher = false;
}

/* The fetcher passes no descriptor (review 10 #1): the monitor would close it, and the last
 * close of a TCP socket with SO_LINGER waits for hours. Over a socket pair, as on the
 * fetcher's control socket; plain sends still go. */
static int send_fd(bool mmsg)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl = { 0 };
	char byte = 'x';
	struct iovec iov = { &byte, 1 };
	struct mmsghdr mm = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1,
					   .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) } };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mm.msg_hdr);
	int sv[2];
	long rc;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) || send(sv[0], "y", 1, 0) != 1)
		return PROBE_WRONG;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &scratch_fd, sizeof(int));
	rc = mmsg ? sendmmsg(sv[0], &mm, 1, 0) : sendmsg(sv[0], &mm.msg_hdr, 0);
	return rc < 0 && errno == ENOSYS ? PROBE_OK : PROBE_WRONG;
}

static int probe_sendmsg_fd(void)
{
	return send_fd(false);
}

static int probe_sendmmsg_fd(void)
{
	return send_fd(true);
}

static void test_fetcher_sends_no_fd(bool as_user)
{
	as_fetcher = true;
	expect("fetcher: sendmsg (a descriptor attached) answers ENOSYS", STP_SANDBOX_ON, as_user,
	       probe_sendmsg_fd, false);
	expect("fetcher: sendmmsg (a descriptor attached) answers ENOSYS", STP_SANDBOX_ON,
	       as_user, probe_sendmmsg_fd, false);
	as_fetcher = false;
}

/* Under sandbox=log a denied call goes through (and is logged by the kernel). */
static void test_log_mode(void)
{
	expect("socket", STP_SANDBOX_LOG, false, probe_socket, false);
	expect("pthread_create", STP_SANDBOX_LOG, false, probe_threads, false);
}

/* "Name:\tvalue" of /proc/PID/task/TID/status (or /proc/PID/status when TID is 0). */
static bool proc_field(pid_t pid, pid_t tid, const char *name, char *out, size_t len)
{
	char path[64], line[256];
	size_t n = strlen(name);
	bool found = false;
	FILE *f;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, name, n) || line[n] != ':')
			continue;
		snprintf(out, len, "%s", line + n + 1 + strspn(line + n + 1, " \t"));
		out[strcspn(out, "\n")] = '\0';
		found = true;
	}
	fclose(f);
	return found;
}

static void check_thread(pid_t pid, pid_t tid, bool as_root)
{
	static const char *const zero_caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	char v[128];

	for (size_t i = 0; i < sizeof(zero_caps) / sizeof(zero_caps[0]); i++) {
		bool bnd = !strcmp(zero_caps[i], "CapBnd");

		if (bnd && !as_root && !user_namespaces)
			continue; /* emptied only inside a user namespace; no_new_privs makes it moot */
		report(proc_field(pid, tid, zero_caps[i], v, sizeof(v)) &&
		       !strcmp(v, "0000000000000000"), "thread %d: %s is 0 (%s)", tid,
		       zero_caps[i], v);
	}
	report(proc_field(pid, tid, "NoNewPrivs", v, sizeof(v)) && !strcmp(v, "1"),
	       "thread %d: NoNewPrivs 1 (%s)", tid, v);
	report(proc_field(pid, tid, "Seccomp", v, sizeof(v)) && !strcmp(v, "2"),
	       "thread %d: Seccomp 2 (%s)", tid, v);
	report(proc_field(pid, tid, "Uid", v, sizeof(v)) && !strcmp(v, "65534\t65534\t65534\t65534"),
	       "thread %d: uid 65534 everywhere (%s)", tid, v);
	if (as_root) {
		report(proc_field(pid, tid, "Gid", v, sizeof(v)) &&
		       !strcmp(v, "65534\t65534\t65534\t65534"), "thread %d: gid 65534 (%s)", tid, v);
		report(proc_field(pid, tid, "Groups", v, sizeof(v)) && !strcmp(v, ""),
		       "thread %d: no supplementary groups (%s)", tid, v);
	}
}

static void check_threads(pid_t pid, bool as_root)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d) {
		report(false, "open %s: %s", path, strerror(errno));
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			check_thread(pid, atoi(e->d_name), as_root);
			n++;
		}
	closedir(d);
	report(n == 2, "the confined child runs 2 threads (%d)", n);
}

/* Whether PATH is the directory PID has as its root, and not the host's (root's sandbox
 * keeps its detached root open: sandbox.c). */
static bool is_own_root(pid_t pid, const char *path)
{
	char root[64];
	struct stat a, b, host;

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	return !stat(path, &a) && !stat(root, &b) && !stat("/", &host) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino && a.st_dev != host.st_dev;
}

/* Every open descriptor is /dev/null (0-2), one of KEEP, or the process's own root. */
static void check_fds(pid_t pid, const int *keep, size_t nkeep, int dropped)
{
	char dir[64], path[384], target[256];
	struct dirent *e;
	DIR *d;
	bool seen_dropped = false;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	d = opendir(dir);
	if (!d) {
		report(false, "open %s: %s", dir, strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		bool kept = false;
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		target[n < 0 ? 0 : n] = '\0';
		for (size_t i = 0; i < nkeep; i++)
			kept |= keep[i] == fd;
		kept |= !strcmp(target, "/") && is_own_root(pid, path);
		seen_dropped |= fd == dropped;
		if (fd <= 2)
			report(!strcmp(target, "/dev/null"), "fd %d is /dev/null (%s)", fd, target);
		else
			report(kept, "fd %d (%s) was asked to be kept", fd, target);
	}
	closedir(d);
	report(!seen_dropped, "fd %d, not kept, is closed", dropped);
}

/* The root is an empty read-only tmpfs, not the host's, and it sees no other mount: none
 * at all (root: a detached tmpfs), or that tmpfs alone (a private namespace; its mount
 * table read through libmount). */
static void check_mounts(pid_t pid)
{
	char path[64];
	int mounts, entries = 0;
	bool tmpfs_root;
	struct statfs sf;
	struct libmnt_table *tb;
	struct libmnt_fs *fs;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	tb = mnt_new_table_from_file(path);
	if (!tb) {
		report(false, "libmount cannot read %s", path);
		return;
	}
	mounts = mnt_table_get_nents(tb);
	fs = mnt_table_find_target(tb, "/", MNT_ITER_FORWARD);
	tmpfs_root = fs && strcmp(mnt_fs_get_fstype(fs), "tmpfs") == 0 &&
		     strcmp(mnt_fs_get_root(fs), "/") == 0;
	mnt_unref_table(tb);
	report(mounts == 0 || (mounts == 1 && tmpfs_root),
	       "no mount, or one, a tmpfs on / (%d mounts)", mounts);

	snprintf(path, sizeof(path), "/proc/%d/root", pid);
	report(!statfs(path, &sf) && sf.f_type == TMPFS_MAGIC && (sf.f_flags & ST_RDONLY) &&
	       is_own_root(pid, path), "the root is a read-only tmpfs of its own");
	d = opendir(path);
	if (!d) {
		report(false, "open %s: %s", path, strerror(errno));
		return;
	}
	while ((e = readdir(d)))
		entries += e->d_name[0] != '.';
	closedir(d);
	report(entries == 0, "the root is empty (%d entries)", entries);
}

static void *park(void *arg)
{
	int fd = *(int *)arg;
	char c;

	return read(fd, &c, 1) == 1 ? NULL : (void *)1;
}

/*
 * A child enters the sandbox, starts a thread, says it is ready and waits; meanwhile the
 * parent reads its /proc entries.
 */
/* RLIMIT_NPROC, soft and hard, at most STP_SANDBOX_TASKS_MAX: threads made by raw clone
 * cost no counted memory, and unbounded they take the host's every pid (review 10 #2). */
static void check_task_limit(pid_t pid)
{
	char path[64], line[256];
	unsigned long long soft = ~0ull, hard = ~0ull;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Max processes", 13))
			sscanf(line + 13, "%llu %llu", &soft, &hard);
	if (f)
		fclose(f);
	report(hard <= STP_SANDBOX_TASKS_MAX && soft <= hard,
	       "RLIMIT_NPROC at most %u (soft %llu, hard %llu)", STP_SANDBOX_TASKS_MAX, soft, hard);
}

static void test_confined_state(bool as_root)
{
	int ready[2], go[2], dropped, status;
	pid_t pid;
	char c;

	if (pipe(ready) || pipe(go)) {
		report(false, "pipe: %s", strerror(errno));
		return;
	}
	dropped = open("/dev/zero", O_RDONLY);
	pid = fork();
	if (pid == 0) {
		int keep[] = { ready[1], go[0] };
		pthread_t t;

		if (!as_root && setresuid(65534, 65534, 65534))
			_exit(PROBE_ENTER_FAILED);
		if (enter(STP_SANDBOX_ON, keep, 2))
			_exit(PROBE_ENTER_FAILED);
		if (pthread_create(&t, NULL, park, &go[0]))
			_exit(PROBE_WRONG);
		if (write(ready[1], "r", 1) != 1)
			_exit(PROBE_WRONG);
		pthread_join(t, NULL);
		_exit(PROBE_OK);
	}
	close(ready[1]);
	close(go[0]);
	if (read(ready[0], &c, 1) == 1) {
		int keep[] = { scratch_fd, ready[1], go[0] };

		check_threads(pid, as_root);
		check_fds(pid, keep, 3, dropped);
		check_task_limit(pid);
		if (as_root || user_namespaces)
			check_mounts(pid);
		else
			printf("# unprivileged user namespaces are off here: no empty root to check\n");
	} else {
		report(false, "the child (%s) did not get ready", as_root ? "root" : "user");
	}
	if (write(go[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	report(WIFEXITED(status) && WEXITSTATUS(status) == PROBE_OK,
	       "the confined child (%s) exits 0 (status %#x)", as_root ? "root" : "user", status);
	close(ready[0]);
	close(go[1]);
	close(dropped);
}

/* Runs ENTER in a child and checks the result and that nothing changed. */
static void expect_refusal(const char *what, struct stp_sandbox_opts *opts, int want_rc,
			   bool threaded)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		char err[256], v[64];
		pthread_t t;
		int blocker[2];
		int rc;

		if (threaded && (pipe(blocker) || pthread_create(&t, NULL, park, &blocker[0])))
			_exit(PROBE_WRONG);
		rc = stp_sandbox_enter(opts, err, sizeof(err));
		if (rc != want_rc || !err[0]) {
			printf("# %s: rc %d, message '%s'\n", what, rc, err);
			_exit(PROBE_WRONG);
		}
		printf("# %s: %s\n", what, err);
		fflush(stdout);
		/* Nothing irreversible happened: no filter, descriptors still open. */
		if (!proc_field(getpid(), 0, "Seccomp", v, sizeof(v)) || strcmp(v, "0"))
			_exit(PROBE_WRONG);
		if (fcntl(scratch_fd, F_GETFD) < 0 || getuid() != 0)
			_exit(PROBE_WRONG);
		_exit(PROBE_OK);
	}
	report(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == PROBE_OK, "%s is refused with %d, process unchanged",
	       what, want_rc);
}

static void test_refusals(void)
{
	int closed_fd = 1000;
	struct stp_sandbox_opts unknown = { .mode = STP_SANDBOX_ON, .user = "no-such-user-x" };
	struct stp_sandbox_opts root = { .mode = STP_SANDBOX_ON, .user = "root" };
	struct stp_sandbox_opts bad_fd = { .mode = STP_SANDBOX_ON, .keep_fds = &closed_fd,
					   .nkeep = 1 };
	struct stp_sandbox_opts on = { .mode = STP_SANDBOX_ON };
	struct stp_sandbox_opts root_ids = { .mode = STP_SANDBOX_ON, .has_ids = true };
	struct stp_sandbox_opts root_gid = { .mode = STP_SANDBOX_ON, .has_ids = true, .uid = 65534 };
	struct stp_sandbox_opts no_filter = { .mode = STP_SANDBOX_ON, .has_ids = true,
					      .uid = 65534, .gid = 65534 };
	struct stp_sandbox_prog empty = { 0 };
	struct stp_sandbox_opts empty_filter = { .mode = STP_SANDBOX_LOG, .has_ids = true,
						 .uid = 65534, .gid = 65534, .filter = &empty };

	expect_refusal("an unknown user", &unknown, -ENOENT, false);
	expect_refusal("user root", &root, -EINVAL, false);
	expect_refusal("root's ids handed over", &root_ids, -EINVAL, false);
	expect_refusal("gid 0 handed over", &root_gid, -EINVAL, false);
	expect_refusal("a closed fd to keep", &bad_fd, -EBADF, false);
	expect_refusal("a second thread", &on, -EBUSY, true);
	/* the daemon cannot confine itself without the monitor's filter: it does not serve */
	expect_refusal("no seccomp filter", &no_filter, -EINVAL, false);
	expect_refusal("an empty seccomp filter", &empty_filter, -EINVAL, false);
}

/* Ids handed over (the monitor looked the user up) are taken as they are: the name is not
 * looked up again, so one no system knows does not matter. */
static void test_given_ids(void)
{
	int ready[2], hold[2], status;
	char uid[64] = "", gid[64] = "", groups[64] = "", c;
	pid_t pid;

	if (pipe(ready) || pipe(hold)) {
		report(false, "ids handed over: pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		int keep[2] = { ready[1], hold[0] };
		struct stp_sandbox_opts o = { .mode = STP_SANDBOX_ON, .user = "no-such-user-x",
					      .has_ids = true, .uid = 65534, .gid = 65533,
					      .keep_fds = keep, .nkeep = 2,
					      .filter = daemon_filter() };
		char err[256];

		if (stp_sandbox_enter(&o, err, sizeof(err))) {
			dprintf(2, "stp_sandbox_enter: %s\n", err);
			_exit(PROBE_ENTER_FAILED);
		}
		if (write(ready[1], "r", 1) != 1 || read(hold[0], &c, 1) < 0)
			_exit(PROBE_WRONG);
		_exit(PROBE_OK);
	}
	close(ready[1]);
	close(hold[0]);
	if (pid > 0 && read(ready[0], &c, 1) == 1) {
		proc_field(pid, 0, "Uid", uid, sizeof(uid));
		proc_field(pid, 0, "Gid", gid, sizeof(gid));
		if (!proc_field(pid, 0, "Groups", groups, sizeof(groups)))
			snprintf(groups, sizeof(groups), "(none read)");
	}
	close(hold[1]);
	close(ready[0]);
	report(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == PROBE_OK && !strcmp(uid, "65534\t65534\t65534\t65534") &&
	       !strcmp(gid, "65533\t65533\t65533\t65533") && !groups[0],
	       "ids handed over are taken without a lookup: Uid %s, Gid %s, Groups '%s'", uid,
	       gid, groups);
}

/* A gid the kernel does not take as asked ((gid_t)-1 leaves setresgid's ids as they
 * are: root's) fails the sandbox before anything runs as that half-switched user. */
static void test_gid_checked(void)
{
	int status;
	char desc[64];
	pid_t pid = fork();

	if (pid == 0) {
		struct stp_sandbox_opts o = { .mode = STP_SANDBOX_ON, .has_ids = true,
					      .uid = 65534, .gid = (gid_t)-1,
					      .filter = daemon_filter() };
		char err[256] = "";
		int rc = stp_sandbox_enter(&o, err, sizeof(err));

		_exit(rc == -EPERM && strstr(err, "gid") ? PROBE_OK :
		      rc ? PROBE_WRONG : PROBE_CALL_RETURNED);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		report(false, "gid checked: fork/wait failed");
		return;
	}
	report(WIFEXITED(status) && WEXITSTATUS(status) == PROBE_OK,
	       "a gid not taken as asked fails the sandbox: %s",
	       describe(status, desc, sizeof(desc)));
}

/* sandbox=off changes nothing. */
static void test_off(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct stp_sandbox_opts off = { .mode = STP_SANDBOX_OFF };
		char err[64], v[64];
		int fd;

		/* nothing ahead either: the root is still the host's */
		if (stp_sandbox_enter_empty_root(STP_SANDBOX_OFF, err, sizeof(err)) ||
		    stp_sandbox_null_fd() != -1 || (fd = open("/etc/passwd", O_RDONLY)) < 0)
			_exit(PROBE_WRONG);
		close(fd);
		if (stp_sandbox_enter(&off, err, sizeof(err)))
			_exit(PROBE_ENTER_FAILED);
		if (!proc_field(getpid(), 0, "Seccomp", v, sizeof(v)) || strcmp(v, "0"))
			_exit(PROBE_WRONG);
		_exit(fcntl(scratch_fd, F_GETFD) >= 0 && getuid() == 0 ? PROBE_OK : PROBE_WRONG);
	}
	report(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == PROBE_OK, "sandbox=off changes nothing");
}

static void test_parse_mode(void)
{
	enum stp_sandbox_mode m = STP_SANDBOX_OFF;

	report(!stp_sandbox_parse_mode("on", &m) && m == STP_SANDBOX_ON, "parse 'on'");
	report(!stp_sandbox_parse_mode("log", &m) && m == STP_SANDBOX_LOG, "parse 'log'");
	report(!stp_sandbox_parse_mode("off", &m) && m == STP_SANDBOX_OFF, "parse 'off'");
	report(stp_sandbox_parse_mode("On", &m) == -EINVAL && m == STP_SANDBOX_OFF,
	       "refuse 'On'");
	report(stp_sandbox_parse_mode("", &m) == -EINVAL, "refuse ''");
}

/*
 * The priming child's confinement: a directory held open, lookups beneath it through
 * openat2, and nothing else.
 */
static char lookup_dir[] = "/tmp/stipple-lookups-XXXXXX";
static int lookup_dirfd = -1;
static const char lookup_text[] = "beneath the held directory\n";

static int make_lookup_dir(void)
{
	char path[sizeof(lookup_dir) + 8];
	int fd;

	if (!mkdtemp(lookup_dir) || chmod(lookup_dir, 0755))
		return -1;
	snprintf(path, sizeof(path), "%s/f", lookup_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, lookup_text, sizeof(lookup_text) - 1) != sizeof(lookup_text) - 1)
		return -1;
	close(fd);
	lookup_dirfd = open(lookup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return lookup_dirfd < 0 ? -1 : 0;
}

static void remove_lookup_dir(void)
{
	char path[sizeof(lookup_dir) + 8];

	snprintf(path, sizeof(path), "%s/f", lookup_dir);
	unlink(path);
	rmdir(lookup_dir);
	close(lookup_dirfd);
}

static long open_beneath(int dirfd, const char *name)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};

	return syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

static int probe_lookup_beneath(void)
{
	char buf[64];
	struct stat st;
	long fd = open_beneath(lookup_dirfd, "f");
	ssize_t n;

	if (fd < 0 || fstat((int)fd, &st) || st.st_size != sizeof(lookup_text) - 1)
		return PROBE_WRONG;
	n = read((int)fd, buf, sizeof(buf));
	if (n != (ssize_t)sizeof(lookup_text) - 1 || memcmp(buf, lookup_text, (size_t)n) || close((int)fd))
		return PROBE_WRONG;
	/* RESOLVE_BENEATH, not the filter, refuses an escape */
	if (open_beneath(lookup_dirfd, "../f") >= 0 || errno != EXDEV)
		return PROBE_WRONG;
	return PROBE_OK;
}

static int probe_lookup_malloc(void)
{
	void *p = malloc(8 << 20);

	if (!p)
		return PROBE_WRONG;
	memset(p, 1, 8 << 20);
	free(p);
	return PROBE_OK;
}

/* clone(CLONE_VM | CLONE_VFORK), as posix_spawn makes it: a process, not a thread. */
static int probe_vfork(void)
{
	long pid = syscall(SYS_clone, CLONE_VM | CLONE_VFORK | SIGCHLD, 0, NULL, NULL, 0);

	if (pid == 0)
		syscall(SYS_exit, 0);
	return PROBE_CALL_RETURNED;
}

static void *lookup_thread(void *arg)
{
	(void)arg;
	return probe_lookup_beneath() == PROBE_OK ? NULL : (void *)1;
}

/* A thread made once confined: the lookup filter allows no clone3, which glibc tries
 * first and which kills here; that it allows no clone either, test_syscalls checks. */
static int probe_lookup_threads(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, lookup_thread, NULL))
		return PROBE_WRONG;
	pthread_join(t, NULL);
	return PROBE_CALL_RETURNED;
}

/* What the priming child's streams do (prime.c): threads started between the
 * capabilities' drop and the filter, waiting until released, then looking up. */
static struct {
	pthread_t t[2];
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool released;
} early = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void *early_thread(void *arg)
{
	pthread_mutex_lock(&early.lock);
	while (!early.released)
		pthread_cond_wait(&early.cond, &early.lock);
	pthread_mutex_unlock(&early.lock);
	return lookup_thread(arg);
}

/* START for stp_sandbox_confine_lookups. */
static void start_early(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2; i++)
		if (!pthread_create(&early.t[i], NULL, early_thread, NULL))
			early.started++;
}

static void release_early(void)
{
	pthread_mutex_lock(&early.lock);
	early.released = true;
	pthread_cond_broadcast(&early.cond);
	pthread_mutex_unlock(&early.lock);
}

static int probe_early_threads(void)
{
	void *res;
	int bad = early.started != 2;

	release_early();
	for (int i = 0; i < early.started; i++)
		if (pthread_join(early.t[i], &res) || res)
			bad = 1;
	return bad ? PROBE_WRONG : PROBE_OK;
}

static int probe_open_passwd(void)
{
	open("/etc/passwd", O_RDONLY);
	return PROBE_CALL_RETURNED;
}

static int probe_openat2_cwd(void)
{
	open_beneath(AT_FDCWD, "etc/passwd");
	return PROBE_CALL_RETURNED;
}

static int probe_stat_passwd(void)
{
	struct stat st;

	stat("/etc/passwd", &st);
	return PROBE_CALL_RETURNED;
}

static int probe_open_works(void)
{
	int fd = open("/etc/passwd", O_RDONLY);

	return fd >= 0 && !close(fd) ? PROBE_OK : PROBE_WRONG;
}

static int probe_pid(void)
{
	getpid();
	return PROBE_CALL_RETURNED;
}

/* The lookup filter, built as the monitor builds it before its fork, then loaded. */
static int confine_lookups(enum stp_sandbox_mode mode, void (*start)(void *), void *arg,
			   char *err, size_t errlen)
{
	struct stp_sandbox_prog filter = { 0 };
	int rc = mode == STP_SANDBOX_OFF ? 0 :
		 stp_filters_export(STP_FILTER_LOOKUP, mode, getpid(), &filter, err, errlen);

	if (!rc)
		rc = stp_sandbox_confine_lookups(mode, &filter, start, arg, err, errlen);
	stp_sandbox_prog_free(&filter);
	return rc;
}

static pid_t spawn_lookup_probe(enum stp_sandbox_mode mode, bool as_user,
				void (*start)(void *), int (*probe)(void))
{
	char err[256];
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	if (as_user && setresuid(65534, 65534, 65534))
		_exit(PROBE_ENTER_FAILED);
	if (confine_lookups(mode, start, NULL, err, sizeof(err))) {
		dprintf(2, "stp_sandbox_confine_lookups: %s\n", err);
		_exit(PROBE_ENTER_FAILED);
	}
	_exit(probe());
}

static void expect_lookup_started(const char *what, enum stp_sandbox_mode mode, bool as_user,
				  void (*start)(void *), int (*probe)(void), bool killed)
{
	int status;
	char desc[64];
	pid_t pid = spawn_lookup_probe(mode, as_user, start, probe);
	const char *who = as_user ? "user" : "root";

	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		report(false, "lookups: %s (%s): fork/wait failed", what, who);
		return;
	}
	if (killed)
		report(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
		       "lookups: %s (%s) is killed by SIGSYS: %s", what, who,
		       describe(status, desc, sizeof(desc)));
	else
		report(WIFEXITED(status) && WEXITSTATUS(status) == PROBE_OK,
		       "lookups: %s (%s) works: %s", what, who, describe(status, desc, sizeof(desc)));
}

static void expect_lookup(const char *what, enum stp_sandbox_mode mode, bool as_user,
			  int (*probe)(void), bool killed)
{
	expect_lookup_started(what, mode, as_user, NULL, probe, killed);
}

/* Thread TID of PID (0: the process's status) as confined. */
static void check_lookup_task(pid_t pid, pid_t tid, bool as_root)
{
	static const char *const zero_caps[] = { "CapInh", "CapPrm", "CapEff", "CapAmb" };
	const char *who = as_root ? "root" : "user";
	char v[128], task[32];

	if (tid)
		snprintf(task, sizeof(task), "thread %d", tid);
	else
		snprintf(task, sizeof(task), "the process");
	for (size_t i = 0; i < sizeof(zero_caps) / sizeof(zero_caps[0]); i++)
		report(proc_field(pid, tid, zero_caps[i], v, sizeof(v)) &&
		       !strcmp(v, "0000000000000000"), "lookups (%s), %s: %s is 0 (%s)",
		       who, task, zero_caps[i], v);
	if (as_root)
		report(proc_field(pid, tid, "CapBnd", v, sizeof(v)) &&
		       !strcmp(v, "0000000000000000"), "lookups (root), %s: CapBnd is 0 (%s)",
		       task, v);
	report(proc_field(pid, tid, "NoNewPrivs", v, sizeof(v)) && !strcmp(v, "1"),
	       "lookups (%s), %s: NoNewPrivs 1 (%s)", who, task, v);
	report(proc_field(pid, tid, "Seccomp", v, sizeof(v)) && !strcmp(v, "2"),
	       "lookups (%s), %s: Seccomp 2 (%s)", who, task, v);
	/* the uid stays: only the mount's owner may enter a FUSE mount */
	report(proc_field(pid, tid, "Uid", v, sizeof(v)) &&
	       !strcmp(v, as_root ? "0\t0\t0\t0" : "65534\t65534\t65534\t65534"),
	       "lookups (%s), %s: uid kept (%s)", who, task, v);
}

/* The process and each of its threads: the two started before the filter have it too. */
static void check_lookup_state(pid_t pid, bool as_root)
{
	char path[64];
	struct dirent *e;
	int tasks = 0;
	DIR *d;

	check_lookup_task(pid, 0, as_root);
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			check_lookup_task(pid, (pid_t)atoi(e->d_name), as_root);
			tasks++;
		}
	if (d)
		closedir(d);
	report(tasks == 3, "lookups (%s): 3 tasks, the streams' 2 threads among them (%d)",
	       as_root ? "root" : "user", tasks);
}

/* The confined child does its lookups, then waits while the parent reads its /proc. */
static void test_lookup_state(bool as_root)
{
	int ready[2], go[2], status;
	pid_t pid;
	char c, err[256];

	if (pipe(ready) || pipe(go)) {
		report(false, "pipe: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		if (!as_root && setresuid(65534, 65534, 65534))
			_exit(PROBE_ENTER_FAILED);
		if (confine_lookups(STP_SANDBOX_ON, start_early, NULL, err, sizeof(err)))
			_exit(PROBE_ENTER_FAILED);
		if (probe_lookup_beneath() != PROBE_OK)
			_exit(PROBE_WRONG);
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(PROBE_WRONG);
		_exit(PROBE_OK);
	}
	close(ready[1]);
	close(go[0]);
	if (read(ready[0], &c, 1) == 1)
		check_lookup_state(pid, as_root);
	else
		report(false, "lookups (%s): the child did not get ready", as_root ? "root" : "user");
	if (write(go[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	report(WIFEXITED(status) && WEXITSTATUS(status) == PROBE_OK,
	       "lookups (%s): the child exits 0 (status %#x)", as_root ? "root" : "user", status);
	close(ready[0]);
	close(go[1]);
}

static void test_lookups(void)
{
	for (int u = 0; u < 2; u++) {
		bool as_user = u;

		expect_lookup("openat2 beneath, fstat, read, close", STP_SANDBOX_ON, as_user,
			      probe_lookup_beneath, false);
		expect_lookup("malloc 8 MiB", STP_SANDBOX_ON, as_user, probe_lookup_malloc, false);
		expect_lookup("open /etc/passwd", STP_SANDBOX_ON, as_user, probe_open_passwd, true);
		expect_lookup("openat2 from AT_FDCWD", STP_SANDBOX_ON, as_user, probe_openat2_cwd, true);
		expect_lookup("stat /etc/passwd", STP_SANDBOX_ON, as_user, probe_stat_passwd, true);
		expect_lookup("socket", STP_SANDBOX_ON, as_user, probe_socket, true);
		expect_lookup("getpid", STP_SANDBOX_ON, as_user, probe_pid, true);
		/* the lookup streams are threads started before the filter (prime.c); no
		 * other thread, no process */
		expect_lookup_started("lookups in threads started before the filter",
				      STP_SANDBOX_ON, as_user, start_early, probe_early_threads,
				      false);
		expect_lookup("pthread_create once confined", STP_SANDBOX_ON, as_user,
			      probe_lookup_threads, true);
		expect_lookup("futex as glibc's locks use it", STP_SANDBOX_ON, as_user,
			      probe_futex_glibc, false);
		expect_lookup("futex(FUTEX_TRYLOCK_PI)", STP_SANDBOX_ON, as_user, probe_futex_pi,
			      true);
		expect_lookup("futex(FUTEX_CMP_REQUEUE)", STP_SANDBOX_ON, as_user,
			      probe_futex_requeue, true);
		expect_lookup("fork", STP_SANDBOX_ON, as_user, probe_fork, true);
		expect_lookup("clone without CLONE_THREAD (posix_spawn)", STP_SANDBOX_ON, as_user,
			      probe_vfork, true);
		expect_lookup("execve", STP_SANDBOX_ON, as_user, probe_execve, true);
		test_lookup_state(!as_user);
	}
	expect_lookup("socket under sandbox=log", STP_SANDBOX_LOG, false, probe_socket, false);
	expect_lookup("open under sandbox=off", STP_SANDBOX_OFF, false, probe_open_works, false);
	/* START runs in every mode */
	expect_lookup_started("lookups in threads started before the filter, sandbox=log",
			      STP_SANDBOX_LOG, false, start_early, probe_early_threads, false);
	expect_lookup_started("lookups in threads started, sandbox=off", STP_SANDBOX_OFF, false,
			      start_early, probe_early_threads, false);
}

static int make_scratch_file(void)
{
	char path[] = "/tmp/stipple-sandbox-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, scratch_text, sizeof(scratch_text) - 1) != sizeof(scratch_text) - 1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The host's tree is in view: a path stat with AT_EMPTY_PATH would find /etc/passwd. */
static int probe_host_path_stat(void)
{
	struct stat st;

	return fstatat(scratch_fd, "/etc/passwd", &st, AT_EMPTY_PATH) < 0 && errno == EACCES
		       ? PROBE_OK : PROBE_WRONG;
}

/* A user's sandbox entered where unshare is refused, then PROBE: the child's status. */
static int run_without_userns(int (*probe)(void), int *status)
{
	pid_t pid = fork();

	if (pid == 0) {
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

		if (setresuid(65534, 65534, 65534) || !ctx ||
		    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0) ||
		    seccomp_load(ctx))
			_exit(PROBE_ENTER_FAILED);
		struct stat st;

		if (enter(STP_SANDBOX_ON, NULL, 0))
			_exit(PROBE_ENTER_FAILED);
		/* kept (not fcntl, which the daemon's filter kills) */
		if (stp_fd_stat(scratch_fd, &st))
			_exit(PROBE_WRONG);
		_exit(probe());
	}
	return pid > 0 && waitpid(pid, status, 0) == pid ? 0 : -1;
}

/*
 * Where user namespaces are refused (here: a filter of the test's own answers EPERM to
 * unshare), a user's sandbox still loads its filter and keeps the host's tree in view;
 * where fstat has a call of its own, no descriptor's stat reaches that tree by a path.
 */
static void test_user_fallback(void)
{
	int status;
	char desc[64];

	if (run_without_userns(probe_socket, &status)) {
		report(false, "user fallback: fork/wait failed");
		return;
	}
	report(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
	       "without user namespaces a user's sandbox still kills socket(): %s",
	       describe(status, desc, sizeof(desc)));
	if (!stp_syscalls_fstat_pathless(seccomp_arch_native())) {
		tap_result(1, "host path by fstatat AT_EMPTY_PATH # SKIP no pathless fstat here");
		return;
	}
	for (int f = 0; f < 2; f++) {
		as_fetcher = f;
		if (run_without_userns(probe_host_path_stat, &status)) {
			report(false, "user fallback: fork/wait failed");
			continue;
		}
		report(WIFEXITED(status) && WEXITSTATUS(status) == PROBE_OK,
		       "without user namespaces the %s's fstatat(fd, \"/etc/passwd\", "
		       "AT_EMPTY_PATH) answers EACCES: %s", f ? "fetcher" : "daemon",
		       describe(status, desc, sizeof(desc)));
	}
	as_fetcher = false;
}

static bool users_may_unshare(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(setresuid(65534, 65534, 65534) || unshare(CLONE_NEWUSER) ? 1 : 0);
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

int main(void)
{
	struct passwd *pw;

	test_parse_mode();
	if (geteuid() != 0) {
		tap_result(1, "the sandbox itself # SKIP needs root");
		return tap_done();
	}
	pw = getpwnam("nobody");
	if (!pw || pw->pw_uid != 65534 || pw->pw_gid != 65534) {
		tap_result(1, "the sandbox itself # SKIP expects nobody = 65534");
		return tap_done();
	}
	user_namespaces = users_may_unshare();
	scratch_fd = make_scratch_file();
	if (scratch_fd < 0 || make_frame()) {
		perror("scratch file or zstd frame");
		return 1;
	}
	test_forbidden(false);
	test_allowed(false);
	test_forbidden(true);
	test_allowed(true);
	test_log_mode();
	test_fetcher(false);
	test_fetcher(true);
	test_fetcher_sends_no_fd(false);
	test_fetcher_sends_no_fd(true);
	test_confined_state(true);
	test_confined_state(false);
	/* the empty root entered ahead, as root's daemon does while it waits for its setup;
	 * a user's is still made by stp_sandbox_enter */
	ahead = true;
	test_confined_state(true);
	test_confined_state(false);
	ahead = false;
	test_user_fallback();
	test_refusals();
	test_given_ids();
	test_gid_checked();
	test_off();
	if (make_lookup_dir()) {
		perror("lookup directory");
		return 1;
	}
	test_lookups();
	remove_lookup_dir();
	return tap_done();
}
