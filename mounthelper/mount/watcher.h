/* SPDX-License-Identifier: MIT */
/*
 * The watcher: what of the monitor outlives a live mount. A process of its own, in a
 * session of its own, with /dev/null for stdio (0 to 2 kept open), "/" for its directory, the mask of before
 * the mount, SIGINT and SIGHUP ignored, and no descriptor but the two it is given. As
 * root it keeps only CAP_SYS_ADMIN (umount2) and CAP_DAC_READ_SEARCH (to reach a mount
 * point beneath a parent only its owner may search, a user's 0700 home), with an empty
 * bounding set, SECBIT_NOROOT and SECBIT_NO_SETUID_FIXUP locked on and no_new_privs: it
 * drops privilege and can never regain any, not even by an exec (as root, ENDED must
 * exec nothing all the same). A root watcher that cannot drop all of it exits at once. It waits for the daemon to end, then runs the
 * caller's check-and-unmount, so that a daemon that dies later takes its mount with it
 * instead of leaving one that answers ENOTCONN.
 *
 * Called from the monitor's one thread, before it returns; not thread-safe (fork).
 */
#ifndef STP_WATCHER_H
#define STP_WATCHER_H

#include <signal.h>

/* Forks the watcher, which keeps PIDFD (the daemon's) and KEEP_FD (the caller's, -1:
 * none), restores MASK, waits for PIDFD to become readable, calls ENDED(ARG) and exits 0.
 * ARG, and what it points to, is the child's copy. 0 in the caller, or a negative errno
 * when fork failed. */
int stp_watcher_leave(int pidfd, int keep_fd, const sigset_t *mask,
		      void (*ended)(void *arg), void *arg);

#endif
