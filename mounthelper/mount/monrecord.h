/* SPDX-License-Identifier: MIT */
/*
 * record=: the hot list the daemon writes as the mount ends, opened by the monitor,
 * since the confined daemon can open nothing. The list is written under a new name in
 * the same directory (NAME.tmp.RANDOM, made O_EXCL) and renamed over NAME only once the
 * daemon has said it is whole and has ended, after an fsync: a mount that fails, a daemon
 * that crashes or is killed, a full disk, all leave the list of an earlier run as it was
 * and remove the new one (the daemon waits, after its word, until the list is in place,
 * so that it is there once the daemon has exited); no existing file is ever opened for writing, so a hard link
 * planted at NAME gets nothing. As root the directory is reached through no symbolic
 * link (a user who owns a directory on the path could point it anywhere); NAME, if it
 * exists, must be a regular file, not a link. The walk runs in a child killed at the
 * deadline, as a path on a file system that never answers would hold the mount for good.
 * The rename is made by whoever outlives the daemon: the watcher, or the monitor with -f.
 *
 * Called from the monitor's one thread (monstate.h), or the watcher's; not thread-safe.
 */
#ifndef STP_MONRECORD_H
#define STP_MONRECORD_H

struct stp_mon;

/* Opens m->o->record's directory and makes the new list (nothing without record=) into
 * m->rec, with copies for the daemon in m->h (the list and the pipe's write end). 0, or a
 * negative errno with the reason said after m->prog: -ETIMEDOUT, -ELOOP (a symlink),
 * -EINVAL (NAME not a regular file), or the open's. */
int stp_monrecord_open(struct stp_mon *m);

/* Once the daemon's word can be read (m->rec.done_fd polls readable), or the daemon has
 * ended: the new list renamed over NAME if the daemon said it was whole (else removed,
 * with a message), and m->rec closed, which lets the daemon go on. Nothing when none is
 * open. _await first waits for the word, without a pidfd to poll beside it. */
void stp_monrecord_finish(struct stp_mon *m);
void stp_monrecord_await(struct stp_mon *m);

/* The mount failed: the new list removed, m->rec closed. */
void stp_monrecord_drop(struct stp_mon *m);

/* m->rec's descriptors closed, the new list left for the watcher to finish. */
void stp_monrecord_close(struct stp_mon *m);

/* The descriptors the watcher keeps to finish the list: three, -1 for none. */
void stp_monrecord_fds(const struct stp_mon *m, int out[3]);

#endif
