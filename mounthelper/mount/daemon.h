/* SPDX-License-Identifier: MIT */
/*
 * The mount daemon: opens the image, mounts it, confines itself, and serves requests until
 * the mount goes away (umount, fusermount3 -u, or SIGTERM/SIGINT/SIGHUP).
 *
 * Not thread-safe: called once, from main, before any thread exists.
 */
#ifndef STP_DAEMON_H
#define STP_DAEMON_H

struct stp_mount_opts;

/* Serves OPTS (after stp_mountopts_finish). Messages go to stderr prefixed with PROG.
 *
 * In the background (the default) the process forks; the parent returns 0 only once the
 * daemon reports the mount live, or a negative errno when the image, the mount point, the
 * mount or the sandbox failed (the reason already printed). The daemon never returns.
 *
 * With opts->foreground, no fork: returns when the mount ends, 0 or a negative errno. */
int stp_daemon_run(const struct stp_mount_opts *opts, const char *prog);

/* Only the checks: the image opens and the mount point is a directory (helper -f). */
int stp_daemon_check(const struct stp_mount_opts *opts, const char *prog);

#endif
