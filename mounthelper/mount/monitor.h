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

/* record=: the hot list is written under a new name TEMP in its directory, and renamed
 * over its own only once whole, so that a crash or a full disk never leaves a cut list
 * there and no existing file is ever written. The directory PATH, O_PATH, as root through
 * no symbolic link anywhere (-ELOOP); TEMP made beneath it O_EXCL, not through a link,
 * 0644, for writing; then either fsync'd and renamed over NAME, the directory then
 * fsync'd as far as it can be (0 once renamed), or removed. */
int stp_monitor_open_record_dir(const char *path);
int stp_monitor_record_create(int dir_fd, const char *temp);
int stp_monitor_record_place(int dir_fd, int fd, const char *temp, const char *name);
int stp_monitor_record_drop(int dir_fd, const char *temp);

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

/* SIG to the process PIDFD, or to PID (when above 0) only without a pidfd or when the
 * kernel has no pidfd_send_signal: a reaped process's number may be another's by now. 0,
 * or a negative errno (-ESRCH once the process is gone). Async-signal-safe; sets errno. */
int stp_monitor_signal(int pidfd, pid_t pid, int sig);

/* Undoes our mount: root detaches BASE beneath PARENT_FD (no program run), a user runs
 * fusermount3 -u -z on MOUNTPOINT, the one libfuse runs. */
void stp_monitor_unmount(int parent_fd, const char *base, const char *mountpoint);

/* A program of ours at PATH (progpath.h: fixed when built), mount.stipple-checked or
 * stipple-readers, exec'd with ARGV in place of this one; returns a negative errno only
 * when the exec fails. */
int stp_monitor_exec_own(const char *path, char *const argv[]);

/* -N: the mount namespace of PATH (/proc/PID/ns/mnt or a bind of one) entered. */
int stp_monitor_enter_namespace(const char *path);

/* The watcher's drop, in its own process: as root, the bounding set emptied, the
 * securebits that would give uid 0 its capabilities back locked on, no_new_privs, and
 * CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH and CAP_KILL kept alone (watcher.h); with
 * RECORD_DIR (record='s directory, else -1) the file-system uid becomes the directory's
 * owner, for record='s rename. 0, or the negative errno of the first step that failed.
 * Nothing to drop for a user. */
int stp_monitor_drop_to_watcher(int record_dir);

/* /proc/PID/NAME, read-only: a child's limits (fetcher.c), a fetcher's start (store.c). */
int stp_monitor_open_proc(pid_t pid, const char *name);

/*
 * The disk cache's folder and the block store (cachedir.c and store.c choose the names,
 * the owner checks, the budgets and what to evict). NAME is a name beneath the directory
 * AT (AT_FDCWD: a path), never followed when it is a symbolic link; each returns a
 * descriptor (the caller's), 0, or a negative errno.
 */
/* mkdir 0700; an existing NAME is no error (the caller checks what it opens). */
int stp_monitor_cache_mkdir(int at, const char *name);
/* NAME, a directory, to list and lock: -ENOTDIR (or -ELOOP) for anything else. */
int stp_monitor_cache_open_dir(int at, const char *name);
/* NAME opened with FLAGS' access mode, without waiting (a FIFO); with O_CREAT in FLAGS,
 * made anew only (O_EXCL, 0600). */
int stp_monitor_cache_open(int at, const char *name, int flags);
/* The file FD is open on, opened again read-write (a file the caller made empty). */
int stp_monitor_cache_reopen_rw(int fd);
/* unlinkat, renameat within AT. */
int stp_monitor_cache_remove(int at, const char *name);
int stp_monitor_cache_rename(int at, const char *from, const char *to);
/* NAME removed only when an exclusive lock on it is had at once, so never while a mount
 * holds it, and only while NAME is still the file locked: 0, -EWOULDBLOCK when held,
 * -EAGAIN when another mount has put a new file under that name meanwhile. */
int stp_monitor_cache_remove_unused(int at, const char *name);
/* FD's times set to now (its LRU order), and its extended attribute XATTR set to "1". */
int stp_monitor_cache_touch(int fd);
int stp_monitor_cache_mark(int fd, const char *xattr);

#endif
