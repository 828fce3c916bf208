/* SPDX-License-Identifier: MIT */
/*
 * The monitor's privileged calls, each of them (monitor.c lists them with what each is
 * for): the monitor's other modules (monmount.c, which orders a mount, and the mon*.c
 * modules, mountpoint.c, monsig.c) make none of their own, as OpenSSH's unprivileged
 * side asks its monitor. The callers check the arguments and say what failed; these only
 * make the call, and return a descriptor or pid (the caller owns it), or a negative errno.
 *
 * Called from the monitor's one thread, which runs with privilege (root, or a user's
 * mount.stipple); not thread-safe (vfork, fork, fchdir). stp_monitor_signal is also
 * async-signal-safe.
 */
#ifndef STP_MONITOR_H
#define STP_MONITOR_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

struct fuse_session;

/* PATH opened O_PATH, to exec later: the program the path names now. */
int stp_monitor_open_program(const char *path);

/* vfork, then in the child: the mask MASK, SOCK on STP_MONITOR_FD (progpath.h), every
 * other descriptor but stdio closed (OTHER first), an empty environment, and execveat of
 * PROG_FD with ARGV. The child's pid. */
pid_t stp_monitor_spawn_daemon(int prog_fd, int sock, int other, char *const argv[],
			       const sigset_t *mask);

/* fork, then in the child: no signal blocked, CTL on STP_MONITOR_FD, nothing else but
 * stdio open, execve of PATH with ARGV and ENV. The child's pid. */
pid_t stp_monitor_spawn_fetcher(const char *path, int ctl, char *const argv[], char *const env[]);

/* The image, read-only, only when a regular file or a block device (stp_open_if: -EINVAL
 * for anything else, which is not opened). */
int stp_monitor_open_image(const char *path);

/* The trusted keys folder (trustkeys.h), and key file NAME beneath DIR_FD (AT_FDCWD: a
 * path of verify=) with STP_TRUSTKEYS_OPEN_FLAGS. */
int stp_monitor_open_keys_dir(void);
int stp_monitor_open_key(int dir_fd, const char *name);

/* The hot list record= names, for writing, created 0644 if missing, without waiting
 * (-EINVAL for a FIFO no one reads) and, as root, through no symbolic link anywhere on its
 * path (-ELOOP). The caller checks what it opened. */
int stp_monitor_open_record(const char *path);

/* NAME beneath directory AT, O_PATH, not followed if a link (the link itself: _node;
 * -ENOTDIR: _dir, which opens a directory only). */
int stp_monitor_open_node(int at, const char *name);
int stp_monitor_open_dir(int at, const char *name);

/* The mount itself, libfuse's way (root: mount(2) on /dev/fuse; a user: fusermount3) on
 * TARGET: a copy of the session's descriptor (close on exec, above 2). *MOUNTED says
 * whether the mount was made, even when the copy failed. */
int stp_monitor_fuse_mount(struct fuse_session *se, const char *target, bool *mounted);

/* A detached clone of the mount tree at DIR_FD (open_tree): CAP_SYS_ADMIN (-EPERM
 * without), Linux 5.2 (-ENOSYS before). */
int stp_monitor_clone_tree(int dir_fd);

/* SIG to the process PIDFD (or, without one, or when it fails, to PID). */
void stp_monitor_signal(int pidfd, pid_t pid, int sig);

/* Undoes our mount: root detaches BASE beneath PARENT_FD (no program run), a user runs
 * fusermount3 -u -z on MOUNTPOINT, the one libfuse runs. */
void stp_monitor_unmount(int parent_fd, const char *base, const char *mountpoint);

#endif
