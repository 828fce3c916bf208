/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's seccomp filters, built (filters.h): the calls each allows by name come
 * from syscalls.c, the rules with conditions are here.
 */
#include "filters.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fuse.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "syscalls.h"
#include "util.h"

/*
 * Calls answered with an errno, or allowed only with some arguments (anything else falls
 * to the default action):
 *   - clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc fall
 *     back to clone, whose flags it can, and clone is allowed only with
 *     pthread_create's; futex only for the operations glibc's threads use;
 *   - opening a file fails with EACCES rather than killing: glibc opens a few system files
 *     lazily (malloc reads /proc/sys/vm/overcommit_memory the first time a thread's arena
 *     shrinks) and copes when it cannot; the daemon itself opens nothing once confined;
 *   - thread stacks and malloc never need PROT_EXEC: no page becomes executable;
 *   - tgkill (pthread_kill, abort) only reaches our own threads;
 *   - fallocate only punches holes (the disk cache's eviction): preallocation past EOF
 *     would take disk that RLIMIT_FSIZE, checked only when a file grows, never sees;
 *   - no ioctl and no prctl: they served libfuse's own loop alone (its clone_fd, and
 *     libfuse 3.17's names for its workers), and the daemon runs its own (serveloop.h).
 */
static int add_common_rules(scmp_filter_ctx ctx, pid_t pid, bool fuse)
{
	const struct {
		uint32_t action;
		int nr;
		unsigned int ncmp;
		struct scmp_arg_cmp cmp;
	} rules[] = {
		{ SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0, { 0 } },
		{ SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0, { 0 } },
		{ SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0, { 0 } },
		{ SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
		  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)pid) },
		{ SCMP_ACT_ALLOW, SCMP_SYS(fallocate), 1,
		  SCMP_A1_32(SCMP_CMP_EQ, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) },
	};
	int rc = stp_syscalls_allow_threads(ctx);

	if (!rc)
		rc = stp_syscalls_allow_futex(ctx);
	if (!rc)
		rc = stp_syscalls_allow_mapping(ctx);
	for (size_t i = 0; !rc && i < sizeof(rules) / sizeof(rules[0]); i++)
		if (fuse || rules[i].nr != SCMP_SYS(fallocate))
			rc = seccomp_rule_add_array(ctx, rules[i].action, rules[i].nr,
						    rules[i].ncmp, rules[i].ncmp ? &rules[i].cmp : NULL);
	return rc;
}

static int add_guarded_rules(scmp_filter_ctx ctx, pid_t pid)
{
	return add_common_rules(ctx, pid, true);
}

typedef int (*rules_fn)(scmp_filter_ctx ctx, pid_t pid);

/* The filter for ARCH alone (0: this process's): the native one swapped for it. */
static int set_filter_arch(scmp_filter_ctx ctx, uint32_t arch)
{
	int rc;

	if (!arch || arch == seccomp_arch_native())
		return 0;
	/* in this order: a filter's architectures must share a byte order (s390x) */
	rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
	return rc ? rc : seccomp_arch_add(ctx, arch);
}

/* A filter for ARCH denying by MODE's action, allowing CALLS outright and what RULES adds.
 * Another ABI (i386 int 0x80, x32) would bypass the rules: it is killed in every mode. */
static int new_filter(enum stp_sandbox_mode mode, uint32_t arch, pid_t pid,
		      const char *const *calls, rules_fn rules, scmp_filter_ctx *out, char *err,
		      size_t errlen)
{
	uint32_t deny = mode == STP_SANDBOX_LOG ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS;
	scmp_filter_ctx ctx = seccomp_init(deny);
	int rc;

	if (!ctx)
		return stp_errf(err, errlen, -ENOMEM, "seccomp_init failed");
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (!rc)
		rc = set_filter_arch(ctx, arch);
	if (!rc)
		rc = stp_syscalls_allow(ctx, calls);
	/* fstat (syscalls.h), before RULES: libseccomp 2.5.4 drops an allow rule added
	 * after an errno rule on the same call (fstatat64 on arm); only by the call that
	 * takes no path where there is one, but for the priming child, which looks up
	 * paths beneath its directory anyway */
	if (!rc)
		rc = stp_syscalls_allow_fstat(ctx, calls != stp_syscalls_lookup);
	if (!rc)
		rc = rules(ctx, pid);
	if (rc) {
		seccomp_release(ctx);
		return stp_errf(err, errlen, rc, "building the seccomp filter: %s", strerror(-rc));
	}
	*out = ctx;
	return 0;
}

/*
 * The fetcher's filter (fetcher.c): libcurl and OpenSSL talking to the network through
 * the descriptors they make, and threads; no FUSE ioctl, no file opened; writing only
 * through the store's descriptors the monitor hands it (read-only for a file that holds a
 * block already: store.h), and no file grown past the largest block of the index.
 * Sockets only of the Internet families (and socketpair, libcurl's wakeup), so that no
 * Unix socket names a path; name resolution and the CA store were done before. A Unix
 * or netlink socket is refused (EAFNOSUPPORT), any other family kills (but where socket
 * goes through socketcall, on i386, mipsel, ppc64el and s390x, the filter cannot see the
 * family). The
 * calls: stp_syscalls_fetcher.
 *
 * It sends no descriptor: sendmsg and sendmmsg, the only calls that can attach one, are
 * answered ENOSYS (libcurl and OpenSSL send with send and sendto; OpenSSL's sendmsg is for
 * kernel TLS and DTLS, neither used). Names are resolved before the filter is loaded
 * (fetcherd.c, resolve_entry): glibc's resolver sends its A and AAAA queries with
 * sendmmsg and has no fallback on Linux, so a lookup under this filter would fail.
 * A descriptor attached to a message the monitor reads, even by read(2), is closed by
 * the monitor, or by the kernel in its name, and the last close of a TCP socket left
 * with unsent data and SO_LINGER waits for as long as that asks: hours, beyond every
 * deadline of the mount (review 10 #1).
 */
/*
 * fcntl: what libcurl and OpenSSL ask on their sockets (strace of a fetch, HTTP and
 * HTTPS: F_GETFL, then F_SETFL O_NONBLOCK; the C library F_GETFD), and nothing that
 * reaches other processes: F_SETOWN or F_SETFL O_ASYNC would let a compromised fetcher
 * signal every process of its uid (every root mount's daemon), F_SETSIG, F_SETLEASE and
 * F_NOTIFY the same. Any other command falls to the default action.
 */
static int add_fcntl_rules(scmp_filter_ctx ctx)
{
	static const char *const fcntls[] = { "fcntl", "fcntl64", NULL };
	static const int plain[] = { F_GETFD, F_SETFD, F_GETFL };
	const struct scmp_arg_cmp setfl[] = { SCMP_A1_32(SCMP_CMP_EQ, F_SETFL),
					      SCMP_A2(SCMP_CMP_MASKED_EQ, O_ASYNC, 0) };
	int rc = stp_syscalls_allow_values(ctx, fcntls, 1, plain, sizeof(plain) / sizeof(plain[0]));

	for (size_t i = 0; !rc && fcntls[i]; i++)
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name(fcntls[i]),
					    2, setfl);
	return rc;
}

/*
 * Internet sockets of TCP or UDP only (protocol 0 or named), stream or datagram
 * (SOCK_NONBLOCK and SOCK_CLOEXEC aside): libcurl's connections, its probe of IPv6 (a
 * datagram socket) and the C library's address sorting. Any other protocol, a
 * sequenced-packet type (SCTP) or a raw one falls to the default: asking for one would
 * have the kernel load its module (sctp, l2tp_ip), code the fetcher has no use for.
 * Where socket goes through socketcall, libseccomp can check only which call it is: the
 * family's rule (stp_syscalls_allow_values) becomes that.
 */
static int add_socket_rules(scmp_filter_ctx ctx)
{
	static const int families[] = { AF_INET, AF_INET6 };
	static const char *const socket_call[] = { "socket", NULL };
	static const struct {
		int type, proto;
	} kinds[] = { { SOCK_STREAM, 0 }, { SOCK_STREAM, IPPROTO_TCP },
		      { SOCK_DGRAM, 0 }, { SOCK_DGRAM, IPPROTO_UDP } };
	int rc = 0;

	if (seccomp_syscall_resolve_name_arch(stp_syscalls_filter_arch(ctx), "socket") < 0)
		return stp_syscalls_allow_values(ctx, socket_call, 0, families,
						 sizeof(families) / sizeof(families[0]));
	for (size_t f = 0; !rc && f < sizeof(families) / sizeof(families[0]); f++)
		for (size_t k = 0; !rc && k < sizeof(kinds) / sizeof(kinds[0]); k++)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
					      SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)families[f]),
					      SCMP_A1_32(SCMP_CMP_MASKED_EQ, 0xf,
							 (uint32_t)kinds[k].type),
					      SCMP_A2_32(SCMP_CMP_EQ, (uint32_t)kinds[k].proto));
	return rc;
}

static int add_fetcher_rules(scmp_filter_ctx ctx, pid_t pid)
{
	static const int refused[] = { AF_UNIX, AF_NETLINK };
	static const int named[] = { SCMP_SYS(access), SCMP_SYS(faccessat),
				     SCMP_SYS(faccessat2), SCMP_SYS(readlink), SCMP_SYS(readlinkat) };
	/* the only calls that pass descriptors (SCM_RIGHTS): see above */
	static const int unsent[] = { SCMP_SYS(sendmsg), SCMP_SYS(sendmmsg) };
	int rc = add_socket_rules(ctx);

	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				      SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX));
	/* the C library's resolver tries netlink and nscd's Unix socket: a refusal, which
	 * it survives (a name not resolved before confinement then fails to resolve); on
	 * socket itself only, as socketcall's family cannot be read */
	if (!rc)
		rc = stp_syscalls_refuse_values(ctx, "socket", 0, refused,
						sizeof(refused) / sizeof(refused[0]), EAFNOSUPPORT);
	/* and it looks at files by name (resolv.conf, nsswitch.conf): refused, not fatal */
	if (!rc)
		rc = stp_syscalls_refuse_path_stat(ctx, EACCES);
	for (size_t i = 0; !rc && i < sizeof(named) / sizeof(named[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), named[i], 0);
	for (size_t i = 0; !rc && i < sizeof(unsent) / sizeof(unsent[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), unsent[i], 0);
	if (!rc)
		rc = add_fcntl_rules(ctx);
	/* its own RLIMIT_FSIZE, RLIMIT_DATA and RLIMIT_AS, lowered to the largest block and
	 * to what it serves once the index is read; the hard limits go with them, and
	 * without CAP_SYS_RESOURCE they cannot be raised again */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
				      SCMP_A0_32(SCMP_CMP_EQ, 0), SCMP_A1_32(SCMP_CMP_EQ, RLIMIT_FSIZE));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
				      SCMP_A0_32(SCMP_CMP_EQ, 0), SCMP_A1_32(SCMP_CMP_EQ, RLIMIT_DATA));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
				      SCMP_A0_32(SCMP_CMP_EQ, 0), SCMP_A1_32(SCMP_CMP_EQ, RLIMIT_AS));
	return rc ? rc : add_common_rules(ctx, pid, false);
}

/*
 * The priming child's filter: lookups beneath a directory it holds, fstat, the pipe, and
 * the futex operations of its lookup streams' threads, which it started before the
 * filter (prime.c): no clone of any kind, so it can make no thread or process.
 * openat2 passes RESOLVE_BENEATH in memory the filter cannot read, so that part is the
 * caller's; the filter refuses a lookup from the working directory (dirfd AT_FDCWD or any
 * negative value: bit 31 of the 32-bit fd set) and every other way to name a file.
 */
static int add_lookup_rules(scmp_filter_ctx ctx, pid_t pid)
{
	const struct scmp_arg_cmp fd_nonneg = SCMP_A0_32(SCMP_CMP_MASKED_EQ, 0x80000000u, 0);
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat2), 1, fd_nonneg);

	/* access(2) on a descriptor of a file beneath the root, once (prime.c:
	 * settle_first_requests) */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(faccessat2), 1, fd_nonneg);
	if (!rc)
		rc = stp_syscalls_allow_futex(ctx);
	return rc ? rc : stp_syscalls_allow_mapping(ctx);
}

int stp_filters_build(enum stp_filter_kind kind, enum stp_sandbox_mode mode, uint32_t arch,
		      pid_t pid, scmp_filter_ctx *out, char *err, size_t errlen)
{
	if (!pid)
		pid = getpid();
	switch (kind) {
	case STP_FILTER_FETCHER:
		return new_filter(mode, arch, pid, stp_syscalls_fetcher, add_fetcher_rules, out,
				  err, errlen);
	case STP_FILTER_LOOKUP:
		return new_filter(mode, arch, pid, stp_syscalls_lookup, add_lookup_rules, out,
				  err, errlen);
	default:
		return new_filter(mode, arch, pid, stp_syscalls_daemon, add_guarded_rules, out,
				  err, errlen);
	}
}

/* libseccomp 2.5 exports a program only to a descriptor: a memory file, read back. */
static int read_back(int fd, struct stp_sandbox_prog *out)
{
	off_t size = lseek(fd, 0, SEEK_END);
	size_t n = size > 0 ? (size_t)size / sizeof(struct sock_filter) : 0;

	if (size < 0)
		return -errno;
	if (!n || n > STP_SANDBOX_PROG_MAX || n * sizeof(struct sock_filter) != (size_t)size)
		return -E2BIG;
	out->insns = malloc((size_t)size);
	if (!out->insns)
		return -ENOMEM;
	if (pread(fd, out->insns, (size_t)size, 0) != size) {
		stp_sandbox_prog_free(out);
		return -EIO;
	}
	out->n = (uint32_t)n;
	return 0;
}

int stp_filters_export(enum stp_filter_kind kind, enum stp_sandbox_mode mode, pid_t pid,
		       struct stp_sandbox_prog *out, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	int fd, rc = stp_filters_build(kind, mode, 0, pid, &ctx, err, errlen);

	*out = (struct stp_sandbox_prog){ 0 };
	if (rc)
		return rc;
	fd = memfd_create("stipple-filter", MFD_CLOEXEC);
	rc = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
	if (!rc)
		rc = read_back(fd, out);
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return rc ? stp_errf(err, errlen, rc, "exporting the seccomp filter: %s", strerror(-rc))
		  : 0;
}
