/* SPDX-License-Identifier: MIT */
/*
 * The watcher: what of the monitor outlives a live mount. A process of its own, in a
 * session of its own, with /dev/null for stdio (0 to 2 kept open), "/" for its
 * directory, the mask of before the mount, SIGINT and SIGHUP ignored, and no descriptor
 * but those it is given (and its mount table, polled). As
 * root it keeps only CAP_SYS_ADMIN (umount2), CAP_DAC_READ_SEARCH (to reach a mount
 * point beneath a parent only its owner may search, a user's 0700 home) and CAP_KILL (to
 * end the daemon and the fetcher, which run as the sandbox's user), and with record=
 * CAP_DAC_OVERRIDE and CAP_FOWNER (to rename the finished list into a directory root
 * does not own, as the monitor could open it there: monrecord.h), with an empty
 * bounding set, SECBIT_NOROOT and SECBIT_NO_SETUID_FIXUP locked on and no_new_privs: it
 * drops privilege and can never regain any, not even by an exec; a root watcher that
 * cannot drop all of it exits at once. It is forked while the daemon opens the image,
 * drops at once, and stays only when the monitor then tells it, on a socket of its own,
 * that the mount is live. The fork is in monmount.c, the drop and the signals in monitor.c
 * (stp_monitor_drop_to_watcher, stp_monitor_signal); this file holds the rest. It
 * waits for the daemon to end, then the monitor's
 * check-and-unmount runs, so that a daemon that dies later takes its mount with it
 * instead of leaving one that answers ENOTCONN, and record='s list is put in place.
 *
 * It also ends what a mount leaves behind (review 8 #3): a confined process turned
 * hostile could stay after its mount, keeping its share of cache_size= charged, its
 * store files locked and its memory. Once the mount's FUSE connection has ended (the
 * watcher holds the same /dev/fuse file as the daemon, and looks at it when the mount
 * table changes, and once a minute for a mount detached lazily), the daemon gets
 * STP_WATCHER_GRACE_MS to exit, then SIGKILL; once the daemon has ended, so does the
 * fetcher. Signals go through pidfds opened while each was the monitor's unreaped child,
 * so a reused pid is never hit.
 *
 * Called from the monitor's one thread, before it returns; not thread-safe (fork).
 */
#ifndef STP_WATCHER_H
#define STP_WATCHER_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* What an honest daemon or fetcher may take to exit once its work is gone: a SIGKILL
 * then is a crash, which both survive (the disk cache and the store are checked), but
 * only a hostile one should meet it. */
#define STP_WATCHER_GRACE_MS 5000

/* What the watcher watches: the daemon's pidfd, the fetcher's and the copy of the mount's
 * /dev/fuse descriptor (each -1: none); and record='s word from the daemon (-1: none):
 * once it can be read (the list is whole, or the daemon has gone), RECORD_CAME(CTX) is
 * called, once, and closes it (monrecord.h), while waiting for the daemon to end. */
struct stp_watched {
	int daemon, fetcher, fuse;
	int record;
	void (*record_came)(void *ctx);
	void *ctx;
};

/* In the watcher's process, which the monitor forked (monmount.c, with the drop that
 * leaves it CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH and CAP_KILL only, after this; with
 * record= also what renaming the finished list takes): out of the caller's session,
 * terminal and directory, no descriptor but W's and the NKEEP of KEEP (any -1: none; at
 * most 6), SIGINT and SIGHUP ignored, MASK restored. */
void stp_watcher_detach(const struct stp_watched *w, const int *keep, unsigned nkeep,
			const sigset_t *mask);

/* In the monitor: the watcher PID stays when the mount is LIVE, once it has said on GO
 * that it dropped privilege (one that could not has exited, silently); else it exits
 * and is reaped. *GO is closed (-1 after). Nothing when *GO is -1 (no watcher). */
void stp_watcher_release(int *go, pid_t pid, bool live);

/* Returns once W's daemon has ended (false), or the FUSE connection W->fuse has (true:
 * the mount has gone, whatever the daemon does). Without W->fuse, only the former. The
 * connection is looked at when the mount table changes and IN_TABLE(CTX) says the mount
 * is no longer at its mount point, and once a minute. */
bool stp_watcher_wait(struct stp_watched *w, bool (*in_table)(void *), void *ctx);

/* Ends the process of PIDFD (-1: nothing): GRACE_MS for it to exit by itself, then
 * SIGKILL; returns once it has gone, or the signal could not be sent. W's record word is
 * taken meanwhile (W NULL: none). */
void stp_watcher_end(struct stp_watched *w, int pidfd, unsigned grace_ms);

/* The word between the monitor and its watcher, on their socket FD: one byte, or none.
 * Whether it was sent; whether it came (end of file: it did not). */
bool stp_watcher_send_word(int fd);
bool stp_watcher_word_came(int fd);

#endif
