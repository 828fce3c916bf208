/* SPDX-License-Identifier: MIT */
/*
 * The confined daemon, in stipple-mountd (mountd.c), which the monitor execs over the
 * connection it mounted: it confines itself first, then
 * opens the image from the descriptor it was handed (the first time any byte past the
 * superblock is parsed; with keys, verified: the signature is checked before the metadata
 * is parsed, and every block as it is decoded), builds the cache, starts warming, tells the monitor the mount is
 * live (monproto.h), sends the priming plan, and serves requests until the mount goes
 * away (umount, fusermount3 -u, or SIGTERM/SIGINT/SIGHUP).
 *
 * Not thread-safe: called from one thread, before any other exists.
 */
#ifndef STP_DAEMON_H
#define STP_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "diskcache.h"

struct stp_mount_opts;
struct stp_superblock;
struct stp_pubkey;
struct stp_daemon;
struct stp_image;
struct stp_imgsrc;
struct fuse_session;

/* What the monitor hands the daemon (setup.h). The daemon owns the descriptors from
 * stp_daemon_serve on; the keys stay the caller's. */
struct stp_daemon_fds {
	int image;    /* the image, opened read-only, superblock checked */
	int record;   /* the hot list to write at the end, or -1 */
	int record_done; /* a socket to say the list is whole on, or -1 (monrecord.h) */
	int monitor;  /* this end of the monitor's socket */
	const struct stp_pubkey *keys; /* verify: the image must be signed by one of these */
	unsigned nkeys;                /* 0: no verification */
	/* A URL (image -1): the daemon's ends of the fetcher's channels (remote.h), the size
	 * of the file at the URL, and the disk cache file (diskcache.h) or -1. */
	const int *chans;
	unsigned nchans;
	uint64_t url_size;
	struct stp_diskcache_file cache;
	/* root: the sandbox user's ids, looked up by the monitor (HAS_IDS false: none) */
	bool has_ids;
	uid_t uid;
	gid_t gid;
	/* the failed-read outlet (readfail.h), opened before the empty root (mountd.c); the
	 * daemon's from stp_daemon_serve on. NULL: opened there. */
	struct stp_readfail *readfail;
	/* the seccomp filter the monitor built for this daemon (FILTER: setup.h), taken
	 * after the SETUP; empty only with the sandbox off */
	const struct stp_sandbox_prog *filter;
};

struct stp_diskcache;
struct stp_image;
struct stp_imgsrc;

/* What opens a URL or a signed image, in stipple-mountd-checked only (daemonchecks.h).
 * Called from the daemon's one thread, before any other starts; not thread-safe. */
struct stp_daemon_checks {
	/* Before confinement, and before the empty root (mountd.c calls it as soon as it
	 * starts): OpenSSL's set-up (it may read its configuration). */
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
	/* At umount or SIGTERM, from the ending thread (ending.h): a URL's reads give up on the
	 * fetcher, which then ends, so that neither waits for a transfer that never ends.
	 * SRC is the URL's source (an stp_imgsrc, stp_remote_halt). Thread-safe. */
	void (*halt_url)(void *src);
};

/* Exit statuses of the daemon process. */
#define STP_DAEMON_UNMOUNTED 0 /* the host unmounted it: nothing left to do */
#define STP_DAEMON_FAILED 1    /* it failed, or a signal ended it: the mount may be left */

/* A daemon for OPTS whose session is created but not mounted (mountd.c gives it the
 * connection the monitor mounted: stp_daemon_session). Messages are prefixed with PROG.
 * CHECKS: what opens a URL or a signed image (daemonchecks.h), NULL in stipple-mountd.
 * -EINVAL when libfuse refuses the options (said on stderr), -ENOMEM. */
int stp_daemon_new(const struct stp_mount_opts *opts, const char *prog,
		   const struct stp_daemon_checks *checks, struct stp_daemon **out);
struct fuse_session *stp_daemon_session(struct stp_daemon *d);
/* The options D serves (stp_daemon_new's OPTS). */
const struct stp_mount_opts *stp_daemon_opts(const struct stp_daemon *d);

/* The mount cannot go live: ERR and the formatted reason, prefixed with PROG, go to the
 * monitor (or stderr once it is gone), which prints it and unmounts. Returns ERR. */
int stp_daemon_fail(struct stp_daemon *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Why the image could not be opened (ERR, from the library), through stp_daemon_fail. */
int stp_daemon_open_failed(struct stp_daemon *d, int err);

/* Confines the process (keeping FDS and the session's), allows it at most MEM_LIMIT bytes
 * of data (RLIMIT_DATA; 0: no limit), then serves the mounted session until it ends, and
 * frees D. Failures before the mount is live are sent to the monitor. Returns the exit
 * status for the process: one of the two above. */
int stp_daemon_serve(struct stp_daemon *d, const struct stp_daemon_fds *fds, uint64_t mem_limit);

/* Frees a daemon that was never served. */
void stp_daemon_free(struct stp_daemon *d);

#endif
