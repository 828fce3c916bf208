/* SPDX-License-Identifier: MIT */
/*
 * What the daemon needs libcrypto for, kept apart so that the daemon of a plain local
 * image links none of it: a URL's source with its disk cache (HMAC-tagged: diskcache.h)
 * and a signed image checked against the monitor's keys (verify=; common/sigblock.c).
 * Starting a program linked with libcrypto costs about 3.5 ms of CPU more here (its
 * relocations), most of issue 30's budget for the exec'd daemon.
 *
 * stipple-mountd-checked (mountd.c built with STP_MOUNTD_CHECKS) has these;
 * stipple-mountd has none (NULL), and refuses a URL or keys with -EPROTONOSUPPORT. The
 * monitor runs the former for a URL or verify= (progpath.h). Called from the daemon's one
 * thread, before any other starts; not thread-safe.
 */
#ifndef STP_DAEMONCHECKS_H
#define STP_DAEMONCHECKS_H

#include "daemon.h"

struct stp_diskcache;
struct stp_image;
struct stp_imgsrc;

struct stp_daemon_checks {
	/* Before confinement: OpenSSL's set-up (it may read its configuration). */
	int (*init)(void);
	/* A URL: the source through the fetcher's channels in FDS, and its disk cache
	 * (*CACHE NULL: none, or one that cannot be used). 0 or a negative errno. */
	int (*open_url)(struct stp_daemon *d, const struct stp_daemon_fds *fds,
			struct stp_imgsrc **src, struct stp_diskcache **cache);
	/* verify=: SRC (taken over) opened verified with the key among FDS's that its
	 * signature block names. A failure is told to the monitor (stp_daemon_fail). */
	int (*open_verified)(struct stp_daemon *d, const struct stp_daemon_fds *fds,
			     struct stp_imgsrc *src, struct stp_image **img);
	/* The image open: the blocks CACHE may hold, by their checksums. */
	void (*expect_blocks)(struct stp_diskcache *cache, const struct stp_image *img);
};

/* daemonchecks.c's, linked by stipple-mountd-checked only. */
extern const struct stp_daemon_checks stp_daemon_checks;

#endif
