/* SPDX-License-Identifier: MIT */
/*
 * What the monitor needs libcrypto for (struct stp_monitor_checks, below), kept apart
 * so that mount.stipple, which serves a local image without verify=, links none of it:
 * verify='s key files, and a URL's source, disk cache and store.
 *
 * mount.stipple-checked (mount_helper.c built with STP_HELPER_CHECKS) passes this table
 * to the monitor; mount.stipple passes NULL and execs mount.stipple-checked, with the
 * same arguments, for a URL or verify= (stp_mountopts_needs_checks). Both programs are
 * the same monitor: the privileged calls stay in monitor.c.
 */
#ifndef STP_MONCHECKS_H
#define STP_MONCHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct stp_diskcache_file;
struct stp_diskcache_id;
struct stp_imgsrc;
struct stp_pubkey;
struct stp_superblock;

/* What the monitor needs libcrypto for, each a module's own function (monchecks.h):
 * verify='s key files (trustkeys.h), and a URL's source (remote.h), its disk cache
 * (diskcache.h, cachedir.h) and its store (store.h). mount.stipple-checked has them;
 * mount.stipple passes NULL, having exec'd the former for a URL or verify=
 * (stp_mountopts_needs_checks), so that a local mount starts without libcrypto. */
struct stp_monitor_checks {
	int (*take_key)(const char *prog, int fd, const char *shown, struct stp_pubkey *key);
	int (*remote_open)(const int *fds, unsigned n, uint64_t size, unsigned silence_s,
			   const char *name, bool own, struct stp_imgsrc **out);
	char *(*cache_default_dir)(void);
	int (*cache_open_file)(const char *dir, const struct stp_diskcache_id *id,
			       uint64_t limit, const char *prog, struct stp_diskcache_file *out);
	int (*store_attach)(const char *dir, uint64_t limit, const char *prog, int ctl,
			    const struct stp_superblock *sb, uint64_t offered, uint64_t file_max,
			    pid_t fetcher);
};


/* monchecks.c's, linked by mount.stipple-checked only. Its take_key reads the key file
 * FD (a negative errno: its open failed) named SHOWN into KEY and closes FD: a regular
 * file of at most 64 KiB holding a PEM Ed25519 public key. 0, or a negative errno with
 * the reason said after PROG. */
extern const struct stp_monitor_checks stp_monitor_checks;

#endif
