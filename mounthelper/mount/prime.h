/* SPDX-License-Identifier: MIT */
/*
 * Priming: once a mount with warming is live, every file of the hot region, in the
 * order the files come in the region, then the names of the image's lookup table (those
 * a recorded start-up looked up, found or not, in its order) are looked up through the
 * mount before mount returns. The
 * kernel then knows those files before the application starts: its lookups of them are
 * answered from the dentry cache, and the warmer can push their pages into the page cache
 * as soon as their blocks are decoded (the kernel takes pages only for inodes it knows).
 *
 * Two halves, on either side of the trust boundary:
 *   - the plan: the confined daemon, which alone reads the image, lists the hot files
 *     (inode and path) and sends them to the monitor (monproto.h, PRIME messages);
 *   - the lookups: the monitor, which has a path to the mount (the daemon's root is an
 *     empty tmpfs), forks a child that confines itself (stp_sandbox_confine_lookups: no
 *     capability, no_new_privs, a filter of its own) before its first lookup, resolves
 *     each path beneath the mount's root with no symlink, ".." or other mount followed,
 *     checks the inode found, and is killed at a deadline. Only lookups are made (openat2
 *     with O_PATH, then fstat), never a read.
 *
 * Not thread-safe: one call at a time per plan or list. Functions return 0 or a negative
 * errno.
 */
#ifndef STP_PRIME_H
#define STP_PRIME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox.h"

struct stp_image;
struct stp_mount_opts;

/* Whether a mount with these options primes: warming on and storing pages (priming only
 * lets the kernel take them; never while recording, whose list would then hold priming's
 * lookups), not asked not to, and a mounting process waits for it (not -f). The monitor
 * and the daemon decide alike from the same options. */
int stp_prime_wanted(const struct stp_mount_opts *o);

/* Daemon side. Lists IMG's looked-up names and hot files and sends them to FD as PRIME
 * messages, then PRIME_END. The work is linear in the metadata (treewalk.h): each name
 * of the lookup table is read once, and found by the tree walk that names the files. A
 * damaged record of the table is skipped (the image reports it), the rest sent.
 * -EUCLEAN when the walk found the image damaged (PRIME_END is still sent), -ENOMEM, or
 * a send error. */
int stp_prime_send_plan(const struct stp_image *img, int fd);

/* The same in steps, so that the daemon walks the image before it says LIVE: the plan
 * is built (its error kept for the send, which returns it after PRIME_END), sent, and
 * freed. *OUT is NULL only on -ENOMEM; the send and the free take NULL. */
struct stp_prime_plan;
int stp_prime_plan_build(const struct stp_image *img, struct stp_prime_plan **out);
int stp_prime_plan_send(const struct stp_prime_plan *p, int fd);
void stp_prime_plan_free(struct stp_prime_plan *p);

/* Monitor side: the files to look up, as received. */
struct stp_prime_list;

/* Adds the entries of one PRIME payload to *L (allocated on first use). Each entry must be
 * a relative path of at most PATH_MAX - 1 bytes without NUL or empty component; -EPROTO
 * otherwise. Past STP_PRIME_MAX_FILES entries or STP_PRIME_MAX_BYTES of paths, more are
 * dropped: priming only saves time. */
int stp_prime_list_add(struct stp_prime_list **l, const void *payload, size_t len);
void stp_prime_list_free(struct stp_prime_list *l);

/* The number of files in L (NULL: none). */
size_t stp_prime_list_count(const struct stp_prime_list *l);

#define STP_PRIME_MAX_FILES (1u << 20)
#define STP_PRIME_MAX_BYTES (64u << 20)
/* The paths of the lookup table's names sent, at most (STP_LOOKUP_MAX of them, each in a
 * directory whose path may be long, could otherwise come to 256 MiB). */
#define STP_PRIME_NAME_BYTES (8u << 20)
/* The inode of an entry whose path must not exist. */
#define STP_PRIME_MISSING UINT32_MAX

/* Priming runs in a child of the monitor's (monprime.c opens MOUNTPOINT O_PATH as ROOT,
 * makes the DONE_FD pipe, forks, and kills the child at the deadline). In the child,
 * stp_prime_look_up confines itself first (MODE as the daemon's sandbox, with FILTER,
 * the lookup filter the monitor built before the fork: filters.h), checks,
 * confined, that ROOT is the root of a FUSE mount, looks up the files of L beneath it
 * (in two threads at once where it may run on two CPUs: the second started once its
 * capabilities are gone and before the filter, which then allows no clone) and
 * exits with one of the statuses below; a lookup that fails is not an error, the
 * first that shows the mount gone or not the image's ends the lookups. DONE_FD is the
 * write end of a pipe: its closing at exit tells the monitor. No lookup starts at or
 * after STOP_NS (CLOCK_MONOTONIC, from stp_prime_stop_ns): the names left are not primed,
 * and the child exits STP_PRIME_LOOKED_UP. */
enum { STP_PRIME_LOOKED_UP = 0, STP_PRIME_NOT_CONFINED = 1, STP_PRIME_NOT_OURS = 2 };
_Noreturn void stp_prime_look_up(const struct stp_prime_list *l, int root, int done_fd,
				 enum stp_sandbox_mode mode,
				 const struct stp_sandbox_prog *filter, int64_t stop_ns);

/* The lookups' own budget: priming only saves time, and a mount must not be undone
 * because a large lookup table (up to 65536 names, a few ms each when the metadata
 * exceeds meta_cache=) takes longer than the mount's deadline. */
#define STP_PRIME_BUDGET_MS 3000

/* When the lookups stop: STP_PRIME_BUDGET_MS from now, or half the time left before
 * the mount's DEADLINE_NS if that comes first, so that the child has ended, lookups
 * answered, well before the deadline that would undo the mount. */
int64_t stp_prime_stop_ns(int64_t deadline_ns);

/* Waits for DONE_FD (the pipe's read end) to be closed by the child, until DEADLINE_NS
 * (CLOCK_MONOTONIC): 0, or -ETIMEDOUT. */
int stp_prime_wait_done(int done_fd, int64_t deadline_ns);

/* What the child's wait STATUS means: 0, -EPERM (it could not confine itself and looked
 * nothing up) or -ESTALE (not our mount). */
int stp_prime_status(int status);

#endif
