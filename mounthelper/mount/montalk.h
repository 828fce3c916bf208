/* SPDX-License-Identifier: MIT */
/*
 * The monitor's side of the conversation with the daemon, on the socket it was exec'd
 * with (monproto.h): the SETUP that hands the mount over (setup.h), then the daemon's
 * messages until it says the mount is live or failed, then its priming plan. The daemon's
 * LOG lines, and the text of a FAILED, are relayed to stderr (monlog.h) as they come.
 * Nothing here kills, reaps or unmounts: the caller (monmount.c) does, from what these
 * return.
 *
 * After the SETUP, the daemon is given its seccomp filter, built here (filters.h). The socket and BUF stay the caller's. Called from the monitor's one thread; not
 * thread-safe (stderr).
 */
#ifndef STP_MONTALK_H
#define STP_MONTALK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "diskcache.h"
#include "fetcher.h"

struct stp_mount_opts;
struct stp_prime_list;
struct stp_pubkey;

/* What the monitor opened and worked out for the daemon (-1: no such descriptor). It
 * stays the monitor's: sending copies the descriptors, the caller closes its own. */
struct stp_handover {
	uint64_t mem_limit;         /* the daemon's RLIMIT_DATA */
	int image_fd, record_fd;
	int record_done_fd;         /* record=: the daemon's end of its "whole" socket */
	int fuse_fd;                /* /dev/fuse of the mount made */
	struct stp_fetcher fetcher; /* a URL: the fetcher and the daemon's ends of its channels */
	struct stp_diskcache_file cache; /* a URL: the disk cache file (fd -1: none) */
	struct stp_pubkey *keys;    /* verify: the keys the image may be signed by */
	unsigned nkeys;
	bool sandbox_ids;           /* root's daemon: the sandbox user, looked up */
	uid_t sandbox_uid;
	gid_t sandbox_gid;
};

/* Closes H's descriptors and its ends of the fetcher's channels (the fetcher itself
 * stays: stp_fetcher_stop), wipes the cache's tag key and frees the keys. Idempotent. */
void stp_montalk_release(struct stp_handover *h);

/* After the SETUP, unless the sandbox is off: the FILTER the daemon PID loads as it
 * confines itself, built here (filters.h) while the daemon takes the mount over, so
 * that it neither compiles a filter nor probes the kernel. 0, or a negative errno: the
 * socket's, or the build's, said after PROG. */
int stp_montalk_send_filter(int fd, const struct stp_mount_opts *o, const char *prog,
			    pid_t pid);

/* Sends the SETUP for a mount of O (messages prefixed with PROG) with H's descriptors
 * on FD. The daemon is told no secret: the image as messages name it (stp_monlog_image:
 * no URL query), no proxy=, netrc= or ca=. 0 or a negative errno (-ENOMEM, or the socket's). */
int stp_montalk_send_setup(int fd, const struct stp_mount_opts *o, const char *prog,
			   const struct stp_handover *h);

/* Reads the daemon's messages on FD into BUF (STP_MSG_MAX bytes) until DEADLINE_NS
 * (CLOCK_MONOTONIC). 0: the mount is live. A negative errno: the daemon's own (it said
 * FAILED and why), or -ETIMEDOUT (said after PROG: stp_montalk_say_late). STP_MONTALK_LOST: the
 * daemon closed its end or broke the protocol (nothing said: the caller knows whether it
 * died). */
#define STP_MONTALK_LOST 1
int stp_montalk_wait_live(int fd, int64_t deadline_ns, const char *prog,
			  const struct stp_mount_opts *o, uint8_t *buf);

/* After LIVE: the priming plan, added to *LIST (the caller frees it), up to its end. 0,
 * -ETIMEDOUT, -EPROTO or the socket's error. */
int stp_montalk_receive_plan(int fd, int64_t deadline_ns, uint8_t *buf,
			     struct stp_prime_list **list);

/* How long, in seconds, the daemon of a mount of O has from the hand-over to go live and
 * be primed: STP_MOUNT_DEADLINE_MS, and for a URL twice timeout= more (the metadata comes
 * over the network, within timeout= a read). */
unsigned stp_montalk_deadline_s(const struct stp_mount_opts *o);

/* Why the daemon ended before LIVE, said after PROG: GONE (it was reaped, with wait
 * STATUS) or it only broke off. */
void stp_montalk_say_lost(const char *prog, bool gone, int status);

/* Root's daemon runs as the sandbox user (sandbox.h): its ids looked up into H while the
 * daemon starts, so that the daemon makes no lookup of its own (the name service loads
 * modules and reads files). 0 (nothing to do for a user, or with the sandbox off), or a
 * negative errno with the reason said after PROG. */
int stp_montalk_sandbox_ids(struct stp_handover *h, const struct stp_mount_opts *o,
			    const char *prog);

/* "PROG: IMAGE: the daemon did not answer within N s", N that deadline. */
void stp_montalk_say_late(const char *prog, const struct stp_mount_opts *o);

#endif
