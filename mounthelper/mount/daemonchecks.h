/* SPDX-License-Identifier: MIT */
/*
 * What the daemon needs libcrypto for, kept apart so that the daemon of a plain local
 * image links none of it: a URL's source with its disk cache (HMAC-tagged: diskcache.h)
 * and a signed image checked against the monitor's keys (verify=; common/sigblock.c).
 *
 * stipple-mountd-checked (mountd.c built with STP_MOUNTD_CHECKS) has these;
 * stipple-mountd has none (NULL), and refuses a URL or keys with -EPROTONOSUPPORT. The
 * monitor runs the former for a URL or verify= (progpath.h). The table's type is the
 * daemon's (daemon.h), so that the daemon needs nothing from this file.
 */
#ifndef STP_DAEMONCHECKS_H
#define STP_DAEMONCHECKS_H

#include "daemon.h"

/* daemonchecks.c's, linked by stipple-mountd-checked only. */
extern const struct stp_daemon_checks stp_daemon_checks;

#endif
