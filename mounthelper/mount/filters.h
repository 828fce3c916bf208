/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's three seccomp filters, built with libseccomp by the processes that are
 * not confined by them: the monitor builds the daemon's and the fetcher's while they
 * exec, and hands each its program (setup.h: FILTER), so that neither compiles nor probes
 * the kernel on its way to serving, and stipple-mountd links no libseccomp. The
 * priming child's is built by the monitor before it forks it. A reader's fetcher,
 * started by `stipple`, which links no libseccomp, builds its own.
 *
 * What each filter allows, and why: filters.c and syscalls.h. Every filter kills a call
 * of another ABI (i386's int 0x80, x32) in every mode; MODE's default action is
 * SCMP_ACT_KILL_PROCESS (STP_SANDBOX_ON) or SCMP_ACT_LOG (STP_SANDBOX_LOG).
 *
 * Functions return 0 or a negative errno with a one-line message in ERR (ERRLEN bytes,
 * may be NULL); they keep no state and are thread-safe as libseccomp is on distinct
 * filters.
 */
#ifndef STP_FILTERS_H
#define STP_FILTERS_H

#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox.h"

/* The three filters: the FUSE daemon's, a URL mount's fetcher's, the priming child's. */
enum stp_filter_kind { STP_FILTER_DAEMON, STP_FILTER_FETCHER, STP_FILTER_LOOKUP };

/*
 * Builds, without loading it, filter KIND as MODE's sandbox has it for architecture ARCH
 * (an SCMP_ARCH_* token; 0 for this process's), for the process PID (0: the caller),
 * the only one whose threads tgkill may reach. A test reads the filter of an
 * architecture it cannot run this way (seccomp_export_bpf); the argument values that
 * differ between architectures (ioctl numbers, O_ASYNC) are this build's. MODE must not
 * be STP_SANDBOX_OFF. 0 with *OUT for the caller to seccomp_release.
 */
int stp_filters_build(enum stp_filter_kind kind, enum stp_sandbox_mode mode, uint32_t arch,
		      pid_t pid, scmp_filter_ctx *out, char *err, size_t errlen);

/*
 * The same for this architecture, as the program the kernel loads: *OUT filled (the
 * caller frees it with stp_sandbox_prog_free), for PID (not 0: the process that will
 * load it) to install with stp_sandbox_enter or stp_sandbox_confine_lookups.
 */
int stp_filters_export(enum stp_filter_kind kind, enum stp_sandbox_mode mode, pid_t pid,
		       struct stp_sandbox_prog *out, char *err, size_t errlen);

#endif
