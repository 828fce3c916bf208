/* SPDX-License-Identifier: MIT */
/*
 * The monitor's entry (monmount.c orders a mount; monitor.c makes its privileged calls,
 * every one): the only code of a mount that runs with privilege, shared by mount.stipple
 * and `stipple mount` (which execs mount.stipple), and by mount.stipple-checked, which
 * mount.stipple execs for a URL or verify= (struct stp_monitor_checks below). It opens the image and checks its
 * 256-byte superblock field by field (nothing more of the image is parsed here; with
 * verify it reads the public keys, and refuses a superblock without the signed bit),
 * checks the mount point, opens the hot list to record into, and mounts. The daemon,
 * stipple-mountd (progpath.h), is started (vfork, exec) first, so that its start overlaps
 * those steps; once mounted, the monitor hands it the FUSE connection, the image and its
 * options (setup.h), and the daemon confines itself before it reads any other byte of
 * the image. It reads the daemon's messages (monproto.h) with a deadline,
 * unmounts after a failure, and runs the priming lookups in a confined child of its own
 * (prime.h).
 *
 * Called once from main, before any thread exists; not thread-safe.
 */
#ifndef STP_MONMOUNT_H
#define STP_MONMOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct stp_mount_opts;

/* What the monitor needs libcrypto for: monchecks.h defines it. */
struct stp_monitor_checks;

/* Both below: CHECKS (monchecks.h), or NULL, which refuses a URL or verify= with
 * -EPROTONOSUPPORT (said after PROG). */

/* Mounts OPTS (after stp_mountopts_finish). Messages go to stderr prefixed with PROG.
 * In the background (the default) it returns 0 once the daemon reports the mount live
 * and priming is done, or a negative errno with the reason printed: the image, the mount
 * point, the mount, the sandbox or the daemon failed, or it did not answer within the
 * deadline (it is then killed and the mount undone). With opts->foreground it stays
 * until the daemon exits, and unmounts unless the host already did. */
int stp_monmount_mount(const struct stp_mount_opts *opts, const char *prog,
		       const struct stp_monitor_checks *checks);

/* Only the checks the monitor makes (mount(8)'s -f, fake): the keys, the superblock,
 * the memory the mount may need, the mount point. 0 or a negative errno, the reason printed. */
int stp_monmount_check(const struct stp_mount_opts *opts, const char *prog,
		       const struct stp_monitor_checks *checks);

#endif
