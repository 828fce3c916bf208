/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's allow-lists by name, and the rules whose shape depends on the
 * architecture (see syscalls.h). libseccomp resolves a name on each architecture of a
 * filter, places a socket call's rule on socketcall too where the kernel routes through
 * it, and leaves out a call the architecture lacks: the lists name every variant.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "syscalls.h"

/*
 * The daemon: the FUSE loop (read a request from /dev/fuse, writev the reply, poll it
 * when the session ends), pread of the image and fadvise to read its metadata pages
 * ahead (meta.c), malloc and thread stacks (brk, the mmap family, madvise), locks and
 * condition variables (futex, some operations: stp_syscalls_allow_futex), thread start
 * and end (set_robust_list, rseq, rt_sigprocmask, exit; glibc installs its setxid
 * handler with rt_sigaction at the first pthread_create, and the loop wakes its threads
 * with a signal as it ends), sleeping and clocks, stdio on stderr (fstat), and sysinfo,
 * which glibc's qsort asks for the memory size (the warmer sorts its plan); the disk cache of a
 * URL mount (diskcache.c) writes blocks, finds holes and makes them (pwrite64, lseek;
 * fallocate, only to punch holes, is a rule of sandbox.c's), and ends the fetcher's
 * channels at umount (shutdown, remote.c). 32-bit variants: fadvise64_64 (i386), arm_fadvise64_64 (arm), _llseek,
 * fstat64, the *_time64 calls, and sigreturn, which returns from a handler installed
 * without SA_SIGINFO (libfuse's) on i386, arm, mipsel, ppc64el and s390x.
 */
const char *const stp_syscalls_daemon[] = {
	"read", "readv", "pread64", "preadv",
	"fadvise64", "fadvise64_64", "arm_fadvise64_64",
	"write", "writev",
	"close", "poll", "ppoll", "ppoll_time64", "fstat", "fstat64",
	"brk", "munmap", "madvise", "mremap",
	"set_robust_list", "rseq",
	"rt_sigprocmask", "rt_sigaction", "rt_sigreturn", "sigreturn",
	"restart_syscall",
	"sched_yield", "sched_getaffinity",
	"getpid", "gettid",
	"nanosleep", "clock_nanosleep", "clock_nanosleep_time64",
	"clock_gettime", "clock_gettime64",
	"gettimeofday", "sysinfo",
	"exit", "exit_group",
	"pwrite64", "lseek", "_llseek",
	"shutdown",
	NULL
};

/*
 * The fetcher (fetcher.c): libcurl and OpenSSL talking to the network through the
 * descriptors they make, and threads. arm's C library calls send and recv; i386 and
 * s390x reach every socket call through socketcall, where libseccomp checks the call
 * but cannot read its arguments. Not sendmsg nor sendmmsg (filters.c: they are refused).
 * sched_getaffinity: glibc's malloc (Debian 12's 2.36) counts the CPUs with it the first
 * time a thread finds the arenas busy, which a fetcher serving several channels at once
 * does; refused, it killed the fetcher and every read after it failed.
 */
const char *const stp_syscalls_fetcher[] = {
	"read", "readv", "write", "writev",
	"close", "poll", "ppoll", "ppoll_time64", "fstat", "fstat64",
	"connect", "getsockopt", "setsockopt", "getsockname",
	"getpeername", "sendto", "recvfrom", "recvmsg", "send", "recv",
	"shutdown", "pipe2",
	"getrandom", "uname",
	/* a published image's blocks in the store, through the descriptors handed over */
	"pread64", "pwrite64", "ftruncate", "ftruncate64",
	"brk", "munmap", "madvise", "mremap",
	"set_robust_list", "rseq",
	"rt_sigprocmask", "rt_sigaction", "rt_sigreturn", "sigreturn",
	"restart_syscall", "sched_yield", "sched_getaffinity", "getpid", "gettid",
	"nanosleep", "clock_nanosleep", "clock_nanosleep_time64",
	"clock_gettime", "clock_gettime64",
	"gettimeofday", "sysinfo", "exit", "exit_group",
	NULL
};

/* The priming child: reads and writes on what it holds, fstat and fstatfs (it checks,
 * confined, that the mount is a FUSE one), memory, poll, the clock, and exit. Its lookup
 * streams' threads were started before the filter (prime.c): what is left is their
 * start, which may come after it (set_robust_list, rseq, rt_sigprocmask), their join
 * and end; futex, openat2 and faccessat2 beneath the root it holds come in filters.c. */
const char *const stp_syscalls_lookup[] = {
	"read", "write", "close", "fstat", "fstat64",
	"fstatfs", "fstatfs64",
	"brk", "munmap", "mremap", "madvise",
	"set_robust_list", "rseq", "rt_sigprocmask",
	"poll", "ppoll", "ppoll_time64", "clock_gettime", "clock_gettime64",
	"rt_sigreturn", "sigreturn", "restart_syscall",
	"exit", "exit_group",
	NULL
};

/* libseccomp's pseudo numbers of the calls it multiplexes through socketcall
 * (__PNR_socket -101 to __PNR_sendmmsg -120). */
#define PNR_SOCKET_FIRST (-120)
#define PNR_SOCKET_LAST (-101)

/* The architectures Debian 12 builds libseccomp for, and the 31-bit s390; a filter may
 * also be for this machine's, whatever it is. */
static const uint32_t known_arches[] = {
	SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32, SCMP_ARCH_AARCH64, SCMP_ARCH_ARM,
	SCMP_ARCH_MIPSEL, SCMP_ARCH_MIPSEL64, SCMP_ARCH_MIPSEL64N32, SCMP_ARCH_PPC64LE,
	SCMP_ARCH_S390X, SCMP_ARCH_S390,
};

uint32_t stp_syscalls_filter_arch(scmp_filter_ctx ctx)
{
	uint32_t native = seccomp_arch_native(), found = 0;

	for (size_t i = 0; i < sizeof(known_arches) / sizeof(known_arches[0]); i++)
		if (known_arches[i] != native && seccomp_arch_exist(ctx, known_arches[i]) == 0) {
			if (found)
				return 0;
			found = known_arches[i];
		}
	/* this machine's own, even one not listed (riscv64) */
	if (seccomp_arch_exist(ctx, native) == 0)
		return found ? 0 : native;
	return found;
}

/* The rule for NAME, resolved by libseccomp on the filter's architecture. */
static int rule_add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned int n,
		    const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return -EINVAL;
	return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

int stp_syscalls_allow(scmp_filter_ctx ctx, const char *const *names)
{
	int rc = 0;

	for (size_t i = 0; !rc && names[i]; i++)
		rc = rule_add(ctx, SCMP_ACT_ALLOW, names[i], 0, NULL);
	return rc;
}

/* Mappings neither executable nor shared: RLIMIT_DATA, the bound the budget counts,
 * counts private writable mappings only, so MAP_SHARED|MAP_ANONYMOUS memory (shmem)
 * would be bounded by nothing (MAP_SHARED_VALIDATE has the MAP_SHARED bit too). Nor may
 * a mapping stop being writable: pages written then made read-only (or PROT_NONE) by
 * mprotect leave the count and stay resident. Once confined, glibc only ever makes
 * reserved PROT_NONE space writable (thread stacks, malloc's heaps; measured with
 * strace on a mount and a URL mount), so mprotect is allowed to PROT_READ|PROT_WRITE
 * only; anything else not executable is answered EACCES (a caller copes). Read-only
 * private mappings go uncounted too (their read faults make pages, or page tables): mmap
 * makes them for no one (the cache maps nothing past a cut's body). */
int stp_syscalls_allow_mapping(scmp_filter_ctx ctx)
{
	const uint32_t exec_write = PROT_EXEC | PROT_WRITE;
	const struct scmp_arg_cmp private = SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_SHARED, 0);
	const struct scmp_arg_cmp writable[] = { SCMP_A2(SCMP_CMP_MASKED_EQ, exec_write, PROT_WRITE),
						 private };
	const struct scmp_arg_cmp unwritable[] = { SCMP_A2(SCMP_CMP_MASKED_EQ, exec_write, 0),
						   private };
	const struct scmp_arg_cmp none[] = { SCMP_A2(SCMP_CMP_EQ, PROT_NONE), private };
	const struct scmp_arg_cmp read[] = { SCMP_A2(SCMP_CMP_EQ, PROT_READ), private };
	uint32_t arch = stp_syscalls_filter_arch(ctx);
	int rc;

	if (!arch)
		return -EINVAL;
	rc = rule_add(ctx, SCMP_ACT_ALLOW, "mprotect", 1, writable);
	if (!rc)
		rc = rule_add(ctx, SCMP_ACT_ERRNO(EACCES), "mprotect", 1, unwritable);
	for (int i = 0; !rc && i < 2; i++) {
		const char *name = i ? "mmap" : "mmap2";

		if (i && (arch == SCMP_ARCH_X86 || arch == SCMP_ARCH_S390X || arch == SCMP_ARCH_S390))
			break;
		rc = rule_add(ctx, SCMP_ACT_ALLOW, name, 2, writable);
		if (!rc)
			rc = rule_add(ctx, SCMP_ACT_ALLOW, name, 2, none);
		if (!rc)
			rc = rule_add(ctx, SCMP_ACT_ERRNO(EACCES), name, 2, read);
	}
	if (rc || (arch != SCMP_ARCH_S390X && arch != SCMP_ARCH_S390))
		return rc;
	return rule_add(ctx, SCMP_ACT_ALLOW, "mmap", 0, NULL);
}

int stp_syscalls_allow_threads(scmp_filter_ctx ctx)
{
	uint32_t arch = stp_syscalls_filter_arch(ctx);
	bool s390 = arch == SCMP_ARCH_S390X || arch == SCMP_ARCH_S390;
	/* the low 32 bits, as the kernel reads them (lower_32_bits in kernel/fork.c): glibc
	 * passes an int, whose upper half the 64-bit ABIs leave undefined */
	const struct scmp_arg_cmp thread = SCMP_CMP(s390 ? 1 : 0, SCMP_CMP_MASKED_EQ,
						    0xffffffffu, STP_SYSCALLS_THREAD_FLAGS);

	if (!arch)
		return -EINVAL;
	return rule_add(ctx, SCMP_ACT_ALLOW, "clone", 1, &thread);
}

/* What glibc's locks, condition variables, barriers, joins, semaphores and malloc ask
 * (2.36, nptl and lowlevellock; its requeue and FUTEX_WAKE_OP helpers have no caller):
 * every other operation falls to the default, the PI family above all (rt_mutex and
 * requeue-PI, where the kernel's futex bugs have been). */
static const uint32_t futex_ops[] = {
	FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET,
};

int stp_syscalls_allow_futex(scmp_filter_ctx ctx)
{
	static const char *const names[] = { "futex", "futex_time64" };
	const uint32_t cmd = ~(uint32_t)(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(names) / sizeof(names[0]); i++)
		for (size_t k = 0; !rc && k < sizeof(futex_ops) / sizeof(futex_ops[0]); k++) {
			const struct scmp_arg_cmp op =
				SCMP_CMP32(1, SCMP_CMP_MASKED_EQ, cmd, futex_ops[k]);

			rc = rule_add(ctx, SCMP_ACT_ALLOW, names[i], 1, &op);
		}
	return rc;
}

bool stp_syscalls_fstat_pathless(uint32_t arch)
{
	return arch == SCMP_ARCH_X86_64 || arch == SCMP_ARCH_AARCH64 || arch == SCMP_ARCH_PPC64LE ||
	       arch == SCMP_ARCH_PPC64 || arch == SCMP_ARCH_S390X || arch == SCMP_ARCH_RISCV64;
}

int stp_syscalls_allow_fstat(scmp_filter_ctx ctx, bool pathless)
{
	static const char *const at_calls[] = { "newfstatat", "fstatat64" };
	static const uint32_t statx_flags[] = { AT_EMPTY_PATH, AT_EMPTY_PATH | AT_NO_AUTOMOUNT };
	struct scmp_arg_cmp cmp[2] = { SCMP_A0_32(SCMP_CMP_MASKED_EQ, 0x80000000u, 0) };
	uint32_t arch = stp_syscalls_filter_arch(ctx), action = SCMP_ACT_ALLOW;
	int rc = 0;

	if (!arch)
		return -EINVAL;
	if (pathless && stp_syscalls_fstat_pathless(arch))
		action = SCMP_ACT_ERRNO(EACCES);
	cmp[1] = SCMP_A3_32(SCMP_CMP_EQ, AT_EMPTY_PATH);
	for (size_t i = 0; !rc && i < sizeof(at_calls) / sizeof(at_calls[0]); i++)
		rc = rule_add(ctx, action, at_calls[i], 2, cmp);
	for (size_t i = 0; !rc && i < sizeof(statx_flags) / sizeof(statx_flags[0]); i++) {
		cmp[1] = SCMP_A2_32(SCMP_CMP_EQ, statx_flags[i]);
		rc = rule_add(ctx, action, "statx", 2, cmp);
	}
	return rc;
}

int stp_syscalls_refuse_path_stat(scmp_filter_ctx ctx, int errno_value)
{
	const struct scmp_arg_cmp at_path = SCMP_A3_32(SCMP_CMP_NE, AT_EMPTY_PATH);
	const struct scmp_arg_cmp statx_path =
		SCMP_A2_32(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, 0);
	uint32_t action = SCMP_ACT_ERRNO((uint16_t)errno_value);
	/* where fstat's own forms are refused too (stp_syscalls_allow_fstat), every form:
	 * libseccomp 2.5.4 merges the two conditional rules wrongly (it killed fstatat of
	 * a path with AT_EMPTY_PATH) */
	unsigned n = stp_syscalls_fstat_pathless(stp_syscalls_filter_arch(ctx)) ? 0 : 1;
	int rc = rule_add(ctx, action, "newfstatat", n, &at_path);

	if (!rc)
		rc = rule_add(ctx, action, "fstatat64", n, &at_path);
	if (!rc)
		rc = rule_add(ctx, action, "statx", n, &statx_path);
	return rc;
}

int stp_syscalls_allow_values(scmp_filter_ctx ctx, const char *const *names, unsigned arg,
			      const int *values, size_t n)
{
	int rc = 0;

	for (size_t i = 0; !rc && names[i]; i++)
		for (size_t v = 0; !rc && v < n; v++) {
			const struct scmp_arg_cmp cmp =
				SCMP_CMP32(arg, SCMP_CMP_EQ, (uint32_t)values[v]);

			rc = rule_add(ctx, SCMP_ACT_ALLOW, names[i], 1, &cmp);
		}
	return rc;
}

int stp_syscalls_refuse_values(scmp_filter_ctx ctx, const char *name, unsigned arg,
			       const int *values, size_t n, int errno_value)
{
	uint32_t arch = stp_syscalls_filter_arch(ctx);
	int rc = 0;

	if (!arch)
		return -EINVAL;
	/* Where libseccomp multiplexes the call (i386, mipsel, ppc64el, s390x), an exact rule
	 * cannot be placed, and a plain one would refuse through socketcall every socket
	 * the fetcher needs: nothing is added, and the call itself falls to the default. */
	if (seccomp_syscall_resolve_name_arch(arch, name) < 0)
		return 0;
	/* exact: not turned into a socketcall rule, which would refuse every socket */
	for (size_t v = 0; !rc && v < n; v++)
		rc = seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO((uint16_t)errno_value),
					    seccomp_syscall_resolve_name(name), 1,
					    SCMP_CMP32(arg, SCMP_CMP_EQ, (uint32_t)values[v]));
	return rc;
}

static bool multiplexed(uint32_t arch, int nr)
{
	return nr >= PNR_SOCKET_FIRST && nr <= PNR_SOCKET_LAST &&
	       seccomp_syscall_resolve_name_arch(arch, "socketcall") >= 0;
}

size_t stp_syscalls_missing(uint32_t arch, const char *const *names, const char **out,
			    size_t max)
{
	size_t n = 0;

	for (size_t i = 0; names[i]; i++) {
		int nr = seccomp_syscall_resolve_name_arch(arch, names[i]);

		if (nr >= 0 || multiplexed(arch, nr))
			continue;
		if (n < max)
			out[n] = names[i];
		n++;
	}
	return n;
}
