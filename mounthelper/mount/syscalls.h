/* SPDX-License-Identifier: MIT */
/*
 * The system calls the sandbox's filters allow (sandbox.c), by name, for every
 * architecture Debian builds libseccomp for: amd64, arm64, armel/armhf, i386, mips64el,
 * mipsel, ppc64el, s390x.
 *
 * A 32-bit C library reaches the kernel through other calls than a 64-bit one: mmap2,
 * _llseek, fcntl64, statx for fstat, the *_time64 calls (glibc 2.36 tries them first),
 * socketcall on i386 and s390x (libseccomp turns a socket call's rule into the
 * socketcall rule too, but cannot check what socketcall passes in memory). Each list names
 * every variant; a name that does not exist on the filter's architecture is skipped on
 * purpose (stp_syscalls_missing lists them), while a name libseccomp does not know at all
 * is an error.
 *
 * The rules with conditions that depend on the architecture live here too: where mmap's
 * protection is (s390x's mmap takes its arguments in memory; i386's old mmap too, and
 * glibc uses mmap2 there) and which argument of clone holds the flags (s390x swaps the
 * first two).
 *
 * All functions take a filter of ONE architecture (seccomp_init, perhaps with the native
 * architecture swapped for another by the tests) and return 0 or a negative errno from
 * libseccomp; -EINVAL when the filter holds several architectures or a name is unknown.
 * The lists are constant; the functions are thread-safe as libseccomp is on distinct
 * filters.
 */
#ifndef STP_SYSCALLS_H
#define STP_SYSCALLS_H

#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>

/* NULL-terminated lists of call names. */
extern const char *const stp_syscalls_daemon[];	/* the FUSE daemon, without condition */
extern const char *const stp_syscalls_fetcher[];	/* the fetcher of a URL mount */
extern const char *const stp_syscalls_lookup[];	/* the priming child */

/* Allows each call of NAMES that exists on the filter's architecture. */
int stp_syscalls_allow(scmp_filter_ctx ctx, const char *const *names);

/* mmap and mmap2 without PROT_EXEC and without MAP_SHARED (shared memory escapes
 * RLIMIT_DATA), writable or PROT_NONE only; mprotect only to PROT_READ|PROT_WRITE (a
 * mapping made read-only leaves RLIMIT_DATA's count). Other protections without
 * PROT_EXEC fail with EACCES (mmap: PROT_READ alone); PROT_EXEC falls to the filter's
 * default. On s390x mmap's arguments are in memory the filter cannot read: mmap is
 * allowed whatever it asks. i386's old mmap (arguments in memory) is not allowed. */
int stp_syscalls_allow_mapping(scmp_filter_ctx ctx);

/* The flags of glibc's pthread_create (2.36, and since 2.25), which clone3 falls back to
 * clone with. */
#define STP_SYSCALLS_THREAD_FLAGS                                                         \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM | \
	 CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)

/* clone only with exactly STP_SYSCALLS_THREAD_FLAGS in the low 32 bits of its flags,
 * which are all the kernel reads (a thread, never a process, no namespace, no ptrace or
 * vfork flag). */
int stp_syscalls_allow_threads(scmp_filter_ctx ctx);

/* futex and futex_time64 for FUTEX_WAIT, FUTEX_WAKE and FUTEX_WAIT_BITSET, private or
 * not, on either clock: what glibc's threads use. No priority-inheritance, requeue or
 * other operation. */
int stp_syscalls_allow_futex(scmp_filter_ctx ctx);

/* fstat as the C library makes it: newfstatat or fstatat64 (flags AT_EMPTY_PATH) or statx
 * (AT_EMPTY_PATH, with or without AT_NO_AUTOMOUNT), each from a descriptor (bit 31 of the
 * 32-bit dirfd clear: not AT_FDCWD). The path is in memory the filter cannot read: a path
 * given with AT_EMPTY_PATH is looked up, from a held directory or, absolute, from the
 * process's root. With PATHLESS, on an architecture whose fstat call fills the C
 * library's struct stat (stp_syscalls_fstat_pathless), these forms are answered EACCES
 * instead, and the process stats its descriptors by that call (stp_fd_stat, util.h),
 * which names no path; elsewhere they are allowed, and only an empty root keeps such a
 * lookup harmless. stat(2) and lstat(2) of a path fall to the default either way. Call it
 * before any errno rule on these calls: libseccomp 2.5.4 drops an allow rule added after
 * one. */
int stp_syscalls_allow_fstat(scmp_filter_ctx ctx, bool pathless);

/* Whether ARCH has an fstat call that fills the C library's struct stat (amd64, arm64,
 * ppc64el, s390x, riscv64): where stp_fd_stat uses it. */
bool stp_syscalls_fstat_pathless(uint32_t arch);

/* The same calls with any other flags answered with ERRNO (a name looked up by path). */
int stp_syscalls_refuse_path_stat(scmp_filter_ctx ctx, int errno_value);

/* Allows the calls named in NAMES (fcntl and fcntl64 alike) when argument ARG, compared
 * as 32 bits, is one of the N VALUES. */
int stp_syscalls_allow_values(scmp_filter_ctx ctx, const char *const *names, unsigned arg,
			      const int *values, size_t n);

/* Answers call NAME with ERRNO_VALUE when argument ARG (32 bits) is one of the N VALUES,
 * on the call itself only, not on socketcall, whose arguments the filter cannot read.
 * Where libseccomp multiplexes NAME through socketcall (socket on i386, mipsel, ppc64el,
 * s390x) it adds nothing: those values then fall to the default action. */
int stp_syscalls_refuse_values(scmp_filter_ctx ctx, const char *name, unsigned arg,
			       const int *values, size_t n, int errno_value);

/* The architecture of the filter (an SCMP_ARCH_* token), or 0 when it holds several. */
uint32_t stp_syscalls_filter_arch(scmp_filter_ctx ctx);

/*
 * Stores in OUT (up to MAX) the names of NAMES that do not exist on ARCH and are skipped
 * there. Returns how many there are (possibly more than MAX). Only the unit tests call
 * it (test_syscalls.c: every name skipped on an architecture is one that has no such
 * call there, not a typo); it lives here to share multiplexed() with the filter.
 */
size_t stp_syscalls_missing(uint32_t arch, const char *const *names, const char **out,
			    size_t max);

#endif
