/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's seccomp filters on every architecture Debian 12 builds libseccomp for,
 * including those this machine cannot run: each filter is built for the architecture
 * (stp_filters_build), exported as the BPF program the kernel would run, and that
 * program is run here by a small interpreter of classic BPF on the calls the C library
 * (glibc 2.36) makes for the daemon, the fetcher and the priming child on that
 * architecture: the *_time64 calls, mmap2, _llseek, statx for fstat, fcntl64 and
 * socketcall where they apply. Each call is named as the kernel knows it there and its
 * number taken from libseccomp's tables; the verdict must be the one the sandbox means
 * (allowed, an errno, or killed).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/net.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "filters.h"
#include "sandbox.h"
#include "syscalls.h"

#include "check.h"

#define ALLOW SCMP_ACT_ALLOW
#define KILL SCMP_ACT_KILL_PROCESS
#define EACCES_ SCMP_ACT_ERRNO(EACCES)
#define ENOSYS_ SCMP_ACT_ERRNO(ENOSYS)
#define FD_EMPTY ((uint64_t)0x1000)	   /* AT_EMPTY_PATH */
#define FD_EMPTY_NOAUTO ((uint64_t)0x1800) /* | AT_NO_AUTOMOUNT, as glibc's statx fstat */
#define THREAD_FLAGS ((uint64_t)(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | \
				 CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |        \
				 CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID))

/* What glibc 2.36 calls on one architecture. */
struct arch {
	const char *name;	/* Debian's */
	uint32_t token;
	bool big_endian;
	bool time64;		/* 32-bit: clock_gettime64, futex_time64, ... */
	bool wide;		/* 64-bit registers */
	bool statx_fstat;	/* fstat through statx (32-bit time in struct stat) */
	bool socketcall;	/* socket calls through socketcall (__ASSUME_SOCKETCALL) */
	int clone_flags_arg;	/* s390x: 1 */
	const char *mmap, *lseek, *fadvise, *fcntl, *fstatfs;
};

static const struct arch arches[] = {
	{ "amd64", SCMP_ARCH_X86_64, false, false, true, false, false, 0,
	  "mmap", "lseek", "fadvise64", "fcntl", "fstatfs" },
	{ "arm64", SCMP_ARCH_AARCH64, false, false, true, false, false, 0,
	  "mmap", "lseek", "fadvise64", "fcntl", "fstatfs" },
	{ "armel/armhf", SCMP_ARCH_ARM, false, true, false, true, false, 0,
	  "mmap2", "_llseek", "arm_fadvise64_64", "fcntl64", "fstatfs64" },
	{ "i386", SCMP_ARCH_X86, false, true, false, true, true, 0,
	  "mmap2", "_llseek", "fadvise64_64", "fcntl64", "fstatfs64" },
	{ "mips64el", SCMP_ARCH_MIPSEL64, false, false, true, true, false, 0,
	  "mmap", "lseek", "fadvise64", "fcntl", "fstatfs" },
	{ "mipsel", SCMP_ARCH_MIPSEL, false, true, false, true, true, 0,
	  "mmap2", "_llseek", "fadvise64", "fcntl64", "fstatfs64" },
	{ "ppc64el", SCMP_ARCH_PPC64LE, false, false, true, false, true, 0,
	  "mmap", "lseek", "fadvise64", "fcntl", "fstatfs" },
	{ "s390x", SCMP_ARCH_S390X, true, false, true, false, true, 1,
	  "mmap", "lseek", "fadvise64", "fcntl", "fstatfs" },
};

/* ---- a classic BPF interpreter over struct seccomp_data, in the target's byte order */

struct data {
	unsigned char bytes[64]; /* nr, arch, instruction_pointer, args[6] */
	bool big_endian;
};

static void put(struct data *d, size_t off, uint64_t v, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		size_t shift = 8 * (d->big_endian ? len - 1 - i : i);

		d->bytes[off + i] = (unsigned char)(v >> shift);
	}
}

static uint32_t load32(const struct data *d, uint32_t off)
{
	uint32_t v = 0;

	if (off > sizeof(d->bytes) - 4)
		return 0;
	for (size_t i = 0; i < 4; i++) {
		size_t shift = 8 * (d->big_endian ? 3 - i : i);

		v |= (uint32_t)d->bytes[off + i] << shift;
	}
	return v;
}

/* The filter's verdict (SECCOMP_RET_* with its data), or 0xffffffff for a program the
 * interpreter does not understand. */
static uint32_t run_bpf(const struct sock_filter *prog, size_t n, const struct data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	for (size_t pc = 0; pc < n; pc++) {
		const struct sock_filter *f = &prog[pc];
		uint32_t src = BPF_SRC(f->code) == BPF_X ? x : f->k;
		bool jump;

		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
			if (BPF_MODE(f->code) == BPF_ABS && BPF_SIZE(f->code) == BPF_W)
				a = load32(d, f->k);
			else if (BPF_MODE(f->code) == BPF_MEM && f->k < BPF_MEMWORDS)
				a = mem[f->k];
			else if (BPF_MODE(f->code) == BPF_IMM)
				a = f->k;
			else
				return 0xffffffff;
			continue;
		case BPF_LDX:
			if (BPF_MODE(f->code) == BPF_MEM && f->k < BPF_MEMWORDS)
				x = mem[f->k];
			else if (BPF_MODE(f->code) == BPF_IMM)
				x = f->k;
			else
				return 0xffffffff;
			continue;
		case BPF_ST:
		case BPF_STX:
			if (f->k >= BPF_MEMWORDS)
				return 0xffffffff;
			mem[f->k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
			continue;
		case BPF_ALU:
			switch (BPF_OP(f->code)) {
			case BPF_AND: a &= src; break;
			case BPF_OR: a |= src; break;
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_LSH: a <<= src & 31; break;
			case BPF_RSH: a >>= src & 31; break;
			case BPF_NEG: a = -a; break;
			default: return 0xffffffff;
			}
			continue;
		case BPF_JMP:
			if (BPF_OP(f->code) == BPF_JA) {
				pc += f->k;
				continue;
			}
			switch (BPF_OP(f->code)) {
			case BPF_JEQ: jump = a == src; break;
			case BPF_JGT: jump = a > src; break;
			case BPF_JGE: jump = a >= src; break;
			case BPF_JSET: jump = (a & src) != 0; break;
			default: return 0xffffffff;
			}
			pc += jump ? f->jt : f->jf;
			continue;
		case BPF_RET:
			return BPF_RVAL(f->code) == BPF_A ? a : f->k;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				x = a;
			else
				a = x;
			continue;
		}
		return 0xffffffff;
	}
	return 0xffffffff; /* ran off the end */
}

/* ---- filters and probes */

struct filter {
	struct sock_filter *prog;
	size_t n;
	const struct arch *arch;
};

static uint32_t swap32(uint32_t v)
{
	return v >> 24 | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | v << 24;
}

static bool export_filter(enum stp_filter_kind which, const struct arch *arch,
			  struct filter *out)
{
	scmp_filter_ctx ctx = NULL;
	char err[256];
	long size = 0;
	FILE *f;
	int rc = stp_filters_build(which, STP_SANDBOX_ON, arch->token, 0, &ctx, err, sizeof(err));

	CHECK(rc == 0, "%s: building filter %d: %s", arch->name, which, err);
	if (rc)
		return false;
	if (getenv("STP_TEST_PFC"))
		seccomp_export_pfc(ctx, 2);
	f = tmpfile();
	rc = f ? seccomp_export_bpf(ctx, fileno(f)) : -errno;
	seccomp_release(ctx);
	if (!rc && (fseek(f, 0, SEEK_END) || (size = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET)))
		rc = -EIO;
	out->n = rc ? 0 : (size_t)size / sizeof(struct sock_filter);
	out->prog = calloc(out->n + 1, sizeof(struct sock_filter));
	if (!rc && (!out->prog || fread(out->prog, sizeof(struct sock_filter), out->n, f) != out->n))
		rc = -EIO;
	if (f)
		fclose(f);
	/* exported in the byte order of the machine that will load it */
	for (size_t i = 0; !rc && arch->big_endian && i < out->n; i++) {
		out->prog[i].code = (uint16_t)(out->prog[i].code >> 8 | out->prog[i].code << 8);
		out->prog[i].k = swap32(out->prog[i].k);
	}
	CHECK(rc == 0, "%s: seccomp_export_bpf: %d", arch->name, rc);
	out->arch = arch;
	return rc == 0 && out->n > 0;
}

/* The number of call NAME on ARCH. Where the kernel has both socketcall and a direct
 * socket call, libseccomp's name lookup gives a pseudo number: the direct one is found by
 * number. Negative when there is none. */
static int direct_nr(uint32_t arch, const char *name)
{
	int nr = seccomp_syscall_resolve_name_arch(arch, name);

	for (int i = 0; nr < 0 && i < 6000; i++) {
		char *found = seccomp_syscall_resolve_num_arch(arch, i);

		if (found && !strcmp(found, name))
			nr = i;
		free(found);
	}
	return nr;
}

/* The verdict on call NAME with ARGS, as the kernel would give it on the filter's arch. */
static uint32_t verdict(const struct filter *flt, const char *name, const uint64_t *args)
{
	struct data d = { .big_endian = flt->arch->big_endian };
	int nr = direct_nr(flt->arch->token, name);

	CHECK(nr >= 0, "%s: the call %s does not exist there", flt->arch->name, name);
	put(&d, 0, (uint32_t)nr, 4);
	put(&d, 4, flt->arch->token, 4);
	for (int i = 0; i < 6; i++)
		put(&d, 16 + 8 * (size_t)i, args ? args[i] : 0, 8);
	return run_bpf(flt->prog, flt->n, &d);
}

static void expect(const struct filter *flt, const char *what, const char *name,
		   const uint64_t *args, uint32_t want)
{
	uint32_t got = verdict(flt, name, args);

	CHECK(got == want, "%s: %s (%s): verdict %#x, want %#x", flt->arch->name, what, name,
	      got, want);
}

#define ARGS(...) ((const uint64_t[6]){ __VA_ARGS__ })

static const char *t64(const struct arch *a, const char *name64, const char *name32)
{
	return a->time64 ? name32 : name64;
}

/* What every confined process needs: memory, the clock, fstat, signals' return, exit;
 * a stat of a path gets PATH_STAT. With OWN_FSTAT (the daemon and the fetcher), where
 * glibc's fstat is newfstatat with 64-bit times the kernel's fstat call fills the same
 * struct: only that call is allowed, as newfstatat's "" is memory the filter cannot read. */
static void expect_basics(const struct filter *flt, uint32_t path_stat, bool own_fstat)
{
	const struct arch *a = flt->arch;
	uint64_t rw = PROT_READ | PROT_WRITE, rx = PROT_READ | PROT_EXEC;

	expect(flt, "malloc", a->mmap, ARGS(0, 1 << 20, rw, MAP_PRIVATE | MAP_ANONYMOUS), ALLOW);
	/* s390x passes mmap's arguments in memory: the filter cannot see PROT_EXEC there */
	expect(flt, "an executable mapping", a->mmap, ARGS(0, 4096, rx), a->token == SCMP_ARCH_S390X ? ALLOW : KILL);
	expect(flt, "mprotect PROT_EXEC", "mprotect", ARGS(0, 4096, rx), KILL);
	/* shared memory is beyond RLIMIT_DATA, the bound the budget counts (review 4 #5) */
	expect(flt, "a shared anonymous mapping", a->mmap,
	       ARGS(0, 1 << 20, rw, MAP_SHARED | MAP_ANONYMOUS), a->token == SCMP_ARCH_S390X ? ALLOW : KILL);
	expect(flt, "a MAP_SHARED_VALIDATE mapping", a->mmap,
	       ARGS(0, 1 << 20, rw, MAP_SHARED_VALIDATE | MAP_ANONYMOUS), a->token == SCMP_ARCH_S390X ? ALLOW : KILL);
	expect(flt, "a thread's stack", a->mmap,
	       ARGS(0, 1 << 20, rw, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE), ALLOW);
	expect(flt, "a PROT_NONE reservation (glibc's stacks and heaps)", a->mmap,
	       ARGS(0, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE), ALLOW);
	/* read-only private memory is beyond RLIMIT_DATA too: no filter maps it, the
	 * daemon's included (its cache maps nothing past a cut's body: review 5 #2) */
	expect(flt, "a read-only private mapping", a->mmap,
	       ARGS(0, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS), a->token == SCMP_ARCH_S390X ? ALLOW : EACCES_);
	expect(flt, "mprotect PROT_READ|PROT_WRITE", "mprotect", ARGS(0, 4096, rw), ALLOW);
	expect(flt, "mprotect PROT_READ", "mprotect", ARGS(0, 4096, PROT_READ), EACCES_);
	expect(flt, "munmap", "munmap", NULL, ALLOW);
	expect(flt, "clock_gettime", t64(a, "clock_gettime", "clock_gettime64"), NULL, ALLOW);
	own_fstat = own_fstat && !a->statx_fstat; /* amd64, arm64, ppc64el, s390x */
	if (own_fstat) {
		expect(flt, "fstat by its own call", "fstat", ARGS(3), ALLOW);
		expect(flt, "fstat by newfstatat", "newfstatat", ARGS(3, 0, 0, FD_EMPTY), EACCES_);
		expect(flt, "fstat by statx", "statx", ARGS(3, 0, FD_EMPTY_NOAUTO, 0x7ff), EACCES_);
	} else if (a->statx_fstat) {
		expect(flt, "fstat", "statx", ARGS(3, 0, FD_EMPTY_NOAUTO, 0x7ff), ALLOW);
	} else {
		expect(flt, "fstat", "newfstatat", ARGS(3, 0, 0, FD_EMPTY), ALLOW);
	}
	if (a->time64)
		expect(flt, "fstat without statx", "fstatat64", ARGS(3, 0, 0, FD_EMPTY), ALLOW);
	if (a->statx_fstat)
		expect(flt, "stat of a path", "statx", ARGS((uint32_t)-100, 0, 0, 0x7ff), path_stat);
	else
		expect(flt, "stat of a path", "newfstatat", ARGS((uint32_t)-100, 0, 0, 0), path_stat);
	expect(flt, "return from a signal", "rt_sigreturn", NULL, ALLOW);
	if (seccomp_syscall_resolve_name_arch(a->token, "sigreturn") >= 0)
		expect(flt, "return from a non-SA_SIGINFO handler", "sigreturn", NULL, ALLOW);
	expect(flt, "exit_group", "exit_group", NULL, ALLOW);
	expect(flt, "execve", "execve", NULL, KILL);
	expect(flt, "ptrace", "ptrace", NULL, KILL);
}

/* futex: what glibc's locks, condition variables and joins ask, and nothing of the
 * priority-inheritance or requeue families. */
static void expect_futex(const struct filter *flt)
{
	const char *name = t64(flt->arch, "futex", "futex_time64");
	static const struct { const char *what; uint64_t op; uint32_t want; } ops[] = {
		{ "FUTEX_WAIT", FUTEX_WAIT, ALLOW },
		{ "FUTEX_WAKE_PRIVATE", FUTEX_WAKE_PRIVATE, ALLOW },
		{ "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME",
		  FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, ALLOW },
		{ "FUTEX_WAKE_BITSET (no caller in glibc)", FUTEX_WAKE_BITSET, KILL },
		{ "FUTEX_LOCK_PI_PRIVATE", FUTEX_LOCK_PI_PRIVATE, KILL },
		{ "FUTEX_UNLOCK_PI", FUTEX_UNLOCK_PI, KILL },
		{ "FUTEX_TRYLOCK_PI", FUTEX_TRYLOCK_PI, KILL },
		{ "FUTEX_WAIT_REQUEUE_PI", FUTEX_WAIT_REQUEUE_PI, KILL },
		{ "FUTEX_CMP_REQUEUE_PI", FUTEX_CMP_REQUEUE_PI, KILL },
		{ "FUTEX_LOCK_PI2", 13, KILL },
		{ "FUTEX_CMP_REQUEUE", FUTEX_CMP_REQUEUE, KILL },
		{ "FUTEX_REQUEUE", FUTEX_REQUEUE, KILL },
		{ "FUTEX_WAKE_OP", FUTEX_WAKE_OP, KILL },
		{ "FUTEX_WAIT with an unknown flag", FUTEX_WAIT | 0x40, KILL },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		expect(flt, ops[i].what, name, ARGS(0x1000, ops[i].op), ops[i].want);
	if (flt->arch->time64)
		expect(flt, "futex without time64, FUTEX_LOCK_PI", "futex",
		       ARGS(0x1000, FUTEX_LOCK_PI), KILL);
}

/* pthread_create's flags exactly: no other thread-making clone */
static const struct { const char *what; uint64_t flags; uint32_t want; } clones[] = {
	{ "clone(CLONE_THREAD) alone", CLONE_THREAD | CLONE_SIGHAND | CLONE_VM, KILL },
	{ "a thread clone with CLONE_PTRACE", THREAD_FLAGS | CLONE_PTRACE, KILL },
	{ "a thread clone with CLONE_NEWNET", THREAD_FLAGS | CLONE_NEWNET, KILL },
	{ "a thread clone with CLONE_VFORK", THREAD_FLAGS | CLONE_VFORK, KILL },
	{ "a thread clone with a signal", THREAD_FLAGS | SIGCHLD, KILL },
	/* the kernel reads 32 bits; the ABIs leave an int's upper half undefined */
	{ "a thread clone, bits above 31 set", THREAD_FLAGS | (1ull << 32), ALLOW },
};

static void expect_threads(const struct filter *flt)
{
	const struct arch *a = flt->arch;
	uint64_t thread[6] = { 0 }, process[6] = { 0 };

	thread[a->clone_flags_arg] = THREAD_FLAGS;
	process[a->clone_flags_arg] = SIGCHLD;
	expect(flt, "pthread_create", "clone", thread, ALLOW);
	expect(flt, "fork", "clone", process, KILL);
	expect(flt, "clone3", "clone3", NULL, ENOSYS_);
	for (size_t i = 0; i < sizeof(clones) / sizeof(clones[0]); i++) {
		if ((clones[i].flags >> 32) && !a->wide)
			continue; /* a 32-bit register has no bit 32 */
		thread[a->clone_flags_arg] = clones[i].flags;
		expect(flt, clones[i].what, "clone", thread, clones[i].want);
	}
	expect_futex(flt);
	expect(flt, "set_robust_list", "set_robust_list", NULL, ALLOW);
	expect(flt, "rseq", "rseq", NULL, ALLOW);
	expect(flt, "prctl(PR_SET_NAME)", "prctl", ARGS(PR_SET_NAME), KILL); /* no thread named */
	expect(flt, "prctl(PR_SET_DUMPABLE)", "prctl", ARGS(PR_SET_DUMPABLE, 1), KILL);
	expect(flt, "nanosleep", t64(a, "clock_nanosleep", "clock_nanosleep_time64"), NULL, ALLOW);
	expect(flt, "ppoll", t64(a, "ppoll", "ppoll_time64"), NULL, ALLOW);
}

static void test_daemon(const struct arch *a)
{
	struct filter flt;

	if (!export_filter(STP_FILTER_DAEMON, a, &flt))
		return;
	expect_basics(&flt, KILL, true);
	expect_threads(&flt);
	static const char *const plain[] = { "read", "readv", "pread64", "preadv", "write",
		"writev", "close", "brk", "madvise", "mremap", "rt_sigprocmask", "rt_sigaction",
		"restart_syscall", "sched_yield", "sched_getaffinity", "getpid", "gettid",
		"gettimeofday", "sysinfo", "exit", "pwrite64", NULL };
	for (size_t i = 0; plain[i]; i++)
		expect(&flt, "daemon", plain[i], NULL, ALLOW);
	/* only the disk cache's hole punching: preallocation past EOF escapes RLIMIT_FSIZE
	 * (review 4 #7) */
	expect(&flt, "fallocate(PUNCH_HOLE|KEEP_SIZE)", "fallocate",
	       ARGS(3, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), ALLOW);
	expect(&flt, "fallocate(KEEP_SIZE)", "fallocate", ARGS(3, FALLOC_FL_KEEP_SIZE, 0, 1u << 30), KILL);
	expect(&flt, "fallocate(0)", "fallocate", ARGS(3, 0, 0, 1u << 30), KILL);
	expect(&flt, "lseek (diskcache holes)", a->lseek, NULL, ALLOW);
	expect(&flt, "posix_fadvise (meta.c)", a->fadvise, NULL, ALLOW);
	expect(&flt, "opening a file", "openat", NULL, EACCES_);
	if (seccomp_syscall_resolve_name_arch(a->token, "open") >= 0)
		expect(&flt, "open", "open", NULL, EACCES_);
	if (a->token == SCMP_ARCH_X86)
		expect(&flt, "i386's old mmap (arguments in memory)", "mmap", ARGS(0, 4096, 3), KILL);
	if (!a->socketcall)
		expect(&flt, "socket", "socket", ARGS(AF_INET, 1), KILL);
	else
		expect(&flt, "socket through socketcall", "socketcall", ARGS(SYS_SOCKET), KILL);
	expect(&flt, "kill", "kill", NULL, KILL);
	free(flt.prog);
}

static void test_fetcher(const struct arch *a)
{
	struct filter flt;

	if (!export_filter(STP_FILTER_FETCHER, a, &flt))
		return;
	expect_basics(&flt, EACCES_, true);
	expect_threads(&flt);
	expect(&flt, "fcntl(F_GETFL)", a->fcntl, ARGS(3, F_GETFL), ALLOW);
	expect(&flt, "fcntl(F_SETLEASE)", a->fcntl, ARGS(3, F_SETLEASE), KILL);
	if (!a->socketcall) {
		expect(&flt, "socket(AF_INET)", "socket", ARGS(AF_INET, 1), ALLOW);
		expect(&flt, "socket(AF_UNIX)", "socket", ARGS(AF_UNIX, 1), SCMP_ACT_ERRNO(EAFNOSUPPORT));
		expect(&flt, "socket(AF_PACKET)", "socket", ARGS(AF_PACKET, 3), KILL);
		/* TCP and UDP only: another protocol would have the kernel load its module */
		expect(&flt, "socket(AF_INET, SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC, TCP)", "socket",
		       ARGS(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP), ALLOW);
		expect(&flt, "socket(AF_INET6, SOCK_DGRAM, 0)", "socket",
		       ARGS(AF_INET6, SOCK_DGRAM, 0), ALLOW);
		expect(&flt, "socket(AF_INET6, SOCK_DGRAM, UDP)", "socket",
		       ARGS(AF_INET6, SOCK_DGRAM, IPPROTO_UDP), ALLOW);
		expect(&flt, "socket(AF_INET, SOCK_STREAM, SCTP)", "socket",
		       ARGS(AF_INET, SOCK_STREAM, IPPROTO_SCTP), KILL);
		expect(&flt, "socket(AF_INET, SOCK_SEQPACKET, 0)", "socket",
		       ARGS(AF_INET, SOCK_SEQPACKET, 0), KILL);
		expect(&flt, "socket(AF_INET6, SOCK_DGRAM, L2TP)", "socket",
		       ARGS(AF_INET6, SOCK_DGRAM, 115), KILL);
		expect(&flt, "socket(AF_INET, SOCK_STREAM, UDP)", "socket",
		       ARGS(AF_INET, SOCK_STREAM, IPPROTO_UDP), KILL);
		expect(&flt, "connect", "connect", NULL, ALLOW);
	}
	expect(&flt, "getrandom", "getrandom", NULL, ALLOW);
	/* glibc's malloc, when a thread finds its arenas busy: refused, it killed the fetcher */
	expect(&flt, "sched_getaffinity", "sched_getaffinity", NULL, ALLOW);
	/* glibc's socket calls go through socketcall: its arguments are in memory */
	static const struct { const char *what; uint32_t call; bool allowed; } multiplexed[] = {
		{ "socketcall(SYS_SOCKET)", SYS_SOCKET, true },
		{ "socketcall(SYS_CONNECT)", SYS_CONNECT, true },
		{ "socketcall(SYS_SENDTO)", SYS_SENDTO, true },
		{ "socketcall(SYS_RECVFROM)", SYS_RECVFROM, true },
		{ "socketcall(SYS_SEND)", SYS_SEND, true },
		{ "socketcall(SYS_ACCEPT)", SYS_ACCEPT, false },
	};
	for (size_t i = 0; a->socketcall && i < sizeof(multiplexed) / sizeof(multiplexed[0]); i++)
		expect(&flt, multiplexed[i].what, "socketcall", ARGS(multiplexed[i].call),
		       multiplexed[i].allowed ? ALLOW : KILL);
	if (a->token == SCMP_ARCH_ARM) {
		expect(&flt, "send", "send", NULL, ALLOW);
		expect(&flt, "recv", "recv", NULL, ALLOW);
	}
	/* no descriptor goes out (review 10 #1), by either way of making the call */
	if (a->socketcall) {
		expect(&flt, "socketcall(SYS_SENDMSG)", "socketcall", ARGS(SYS_SENDMSG),
		       SCMP_ACT_ERRNO(ENOSYS));
		expect(&flt, "socketcall(SYS_SENDMMSG)", "socketcall", ARGS(SYS_SENDMMSG),
		       SCMP_ACT_ERRNO(ENOSYS));
	} else {
		expect(&flt, "sendmsg", "sendmsg", NULL, SCMP_ACT_ERRNO(ENOSYS));
		expect(&flt, "sendmmsg", "sendmmsg", NULL, SCMP_ACT_ERRNO(ENOSYS));
	}
	expect(&flt, "FUSE ioctl", "ioctl", NULL, KILL);
	free(flt.prog);
}

static void test_lookup(const struct arch *a)
{
	struct filter flt;
	uint64_t thread[6] = { 0 };

	if (!export_filter(STP_FILTER_LOOKUP, a, &flt))
		return;
	expect_basics(&flt, KILL, false);
	expect(&flt, "openat2 beneath a held directory", "openat2", ARGS(3), ALLOW);
	expect(&flt, "openat2 from the working directory", "openat2", ARGS((uint32_t)-100), KILL);
	expect(&flt, "fstatfs", a->fstatfs, NULL, ALLOW);
	expect(&flt, "getpid", "getpid", NULL, KILL);
	/* its streams' threads were started before the filter (prime.c): no clone at all */
	thread[a->clone_flags_arg] = THREAD_FLAGS;
	expect(&flt, "pthread_create", "clone", thread, KILL);
	expect(&flt, "clone3", "clone3", NULL, KILL);
	expect(&flt, "rt_sigaction", "rt_sigaction", NULL, KILL);
	expect(&flt, "set_robust_list (a thread's start)", "set_robust_list", NULL, ALLOW);
	expect(&flt, "rt_sigprocmask (a thread's start)", "rt_sigprocmask", NULL, ALLOW);
	expect_futex(&flt);
	free(flt.prog);
}

/* The names each list skips on each architecture, for the log; some must be skipped. */
static void test_missing_names(void)
{
	const char *out[64];

	for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++) {
		size_t n = stp_syscalls_missing(arches[i].token, stp_syscalls_daemon, out, 64);

		printf("# %s: the daemon's list skips", arches[i].name);
		for (size_t j = 0; j < n && j < 64; j++)
			printf(" %s", out[j]);
		printf("\n");
		CHECK(n > 0 && n < 20, "%s: %zu names skipped", arches[i].name, n);
	}
	CHECK(stp_syscalls_missing(SCMP_ARCH_X86_64, (const char *const[]){ "mmap2", "_llseek",
		"clock_gettime64", "read", NULL }, out, 64) == 3);
	CHECK(stp_syscalls_missing(SCMP_ARCH_X86, (const char *const[]){ "send", "newfstatat",
		NULL }, out, 64) == 1 && !strcmp(out[0], "newfstatat"),
	      "i386 multiplexes send through socketcall; it has no newfstatat");
}

/* Each filter on architecture A, one TAP result each. */
static void run_arch(const struct arch *a)
{
	static const struct { void (*test)(const struct arch *); const char *what; } filters[] = {
		{ test_daemon, "the daemon's filter" },
		{ test_fetcher, "the fetcher's filter" },
		{ test_lookup, "the priming child's filter" },
	};
	char name[96];

	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		int before = failures;

		filters[i].test(a);
		snprintf(name, sizeof(name), "%s: %s", a->name, filters[i].what);
		tap_result(failures == before, name);
	}
}

int main(void)
{
	for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++)
		run_arch(&arches[i]);
	RUN(test_missing_names);
	return tap_done();
}
