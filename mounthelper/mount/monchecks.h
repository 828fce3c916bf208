/* SPDX-License-Identifier: MIT */
/*
 * What the monitor needs libcrypto for (monitor.h: struct stp_monitor_checks), kept apart
 * so that mount.stipple, which serves a local image without verify=, links none of it:
 * verify='s key files, and a URL's source, disk cache and store.
 *
 * mount.stipple-checked (mount_helper.c built with STP_HELPER_CHECKS) passes this table
 * to the monitor; mount.stipple passes NULL and execs mount.stipple-checked, with the
 * same arguments, for a URL or verify= (stp_mountopts_needs_checks). Both programs are
 * the same monitor: the privileged calls stay in monitor.c, cachedir.c and store.c.
 */
#ifndef STP_MONCHECKS_H
#define STP_MONCHECKS_H

#include "monitor.h"

/* monchecks.c's, linked by mount.stipple-checked only. Its take_key reads the key file
 * FD (a negative errno: its open failed) named SHOWN into KEY and closes FD: a regular
 * file of at most 64 KiB holding a PEM Ed25519 public key. 0, or a negative errno with
 * the reason said after PROG. */
extern const struct stp_monitor_checks stp_monitor_checks;

#endif
