/* SPDX-License-Identifier: MIT */
/*
 * record=: the hot list the daemon writes as the mount ends, opened by the monitor,
 * since the confined daemon can open nothing. As root the path is walked through no
 * symbolic link (a user who owns a directory on it could point it at any file for root
 * to truncate), and the file must be a regular file with no other hard link; the walk
 * runs in a child killed at the deadline, as a path on a file system that never answers
 * would hold the mount for good. The list is emptied only once the mount is live: a
 * mount that fails leaves the list of an earlier run as it was.
 *
 * Called from the monitor's one thread (monstate.h); not thread-safe (fork).
 */
#ifndef STP_MONRECORD_H
#define STP_MONRECORD_H

struct stp_mon;

/* Opens m->o->record (nothing without record=) into m->h.record_fd, for the daemon, and
 * m->record_fd, the monitor's copy to empty. 0, or a negative errno with the reason said
 * after m->prog: -ETIMEDOUT, -ELOOP (a symlink), -EMLINK, -EINVAL (not a regular file),
 * or the open's. */
int stp_monrecord_open(struct stp_mon *m);

/* The mount is live: the list emptied (a failure is a warning) and the monitor's copy
 * closed. Nothing when none is open. */
void stp_monrecord_empty(struct stp_mon *m);

#endif
