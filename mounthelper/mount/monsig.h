/* SPDX-License-Identifier: MIT */
/*
 * The monitor's signals. While a mount is being made, SIGINT, SIGTERM and SIGHUP wait
 * (held), so that an interrupted mount never stays half made; SIGPIPE is ignored (a
 * broken stderr must not kill the monitor half way) and SIGCHLD is the default (waitpid
 * needs it). With -f the monitor then passes those three on to the daemon.
 *
 * Process-wide state (the mask, the handlers, one daemon to forward to): called from the
 * monitor's one thread only; the handler itself is async-signal-safe.
 */
#ifndef STP_MONSIG_H
#define STP_MONSIG_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* Holds the ending signals; the mask of before goes to *SAVED, for the daemon's exec
 * and for stp_monsig_forward. */
void stp_monsig_hold(sigset_t *saved);

/* From now on the ending signals go to the daemon (PIDFD, or PID when PIDFD is -1), and
 * the mask SAVED is restored so that they arrive. */
void stp_monsig_forward(pid_t pid, int pidfd, const sigset_t *saved);

/* Whether one of them was passed on since stp_monsig_forward. */
bool stp_monsig_forwarded(void);

#endif
