/* SPDX-License-Identifier: MIT */
/*
 * The messages between the privileged monitor and the programs it execs (stipple-mountd,
 * stipple-fetcher), as OpenSSH's monitor protocol does between its halves: typed and
 * bounded. Each is one datagram on a SOCK_SEQPACKET socket pair: a 32-bit type in host
 * order, then its payload. The monitor sends first (SANDBOX to a daemon, then SETUP); the
 * rest go the other way, and the monitor trusts nothing in them: the daemon has parsed
 * the untrusted image, the fetcher has talked to a server.
 *
 *   SANDBOX    uint32 mode  monitor -> daemon, before SETUP: confine files now (setup.h)
 *   FILTER     insns        monitor -> daemon after SETUP, -> fetcher before SETUP: the
 *                           seccomp program it loads as it confines itself (setup.h)
 *   SETUP      fields       monitor -> program: its options and descriptors (setup.h)
 *   HELLO      struct       fetcher: the URL probed (fetcher.c)
 *   LOG        text         a diagnostic for the user (the daemon has no terminal)
 *   FAILED     int32 errno (negative), text: the mount cannot go live; the daemon exits
 *   LIVE       (none)       the image opened and checked, the mount serves
 *   PRIME      entries      part of the priming plan (prime.h)
 *   PRIME_END  (none)       the plan is complete
 *   BLOCKS     struct       fetcher: a batch of a published image's block hashes (fetcher.h)
 *   STORE      struct, fds  monitor -> fetcher: their files in the store, one answer a batch
 *
 * Functions return 0 or a negative errno; they keep no state and are thread-safe (a
 * datagram is written whole).
 */
#ifndef STP_MONPROTO_H
#define STP_MONPROTO_H

#include <stddef.h>
#include <stdint.h>

enum stp_msg_type {
	STP_MSG_SETUP = 1,
	STP_MSG_HELLO,
	STP_MSG_LOG,
	STP_MSG_FAILED,
	STP_MSG_LIVE,
	STP_MSG_PRIME,
	STP_MSG_PRIME_END,
	STP_MSG_BLOCKS,
	STP_MSG_STORE,
	STP_MSG_ROOM,
	STP_MSG_SANDBOX,
	STP_MSG_RECORD,    /* the monitor's record= opener to the monitor */
	STP_MSG_FILTER,
};

/* The largest payload. */
#define STP_MSG_MAX 65536u

/* Sends one message. -EMSGSIZE when LEN exceeds STP_MSG_MAX; a write error (-EPIPE once
 * the monitor has gone: SIGPIPE must be ignored). */
int stp_msg_send(int fd, uint32_t type, const void *payload, size_t len);

/* The same with NFDS descriptors attached (SCM_RIGHTS; at most STP_MSG_FDS_MAX). */
#define STP_MSG_FDS_MAX 32u
int stp_msg_send_fds(int fd, uint32_t type, const void *payload, size_t len, const int *fds,
		     unsigned nfds);

/* The same for the monitor, whose peer (a daemon or fetcher turned hostile) may read
 * nothing: waits for room in the socket until DEADLINE_NS (CLOCK_MONOTONIC) only, then
 * -ETIMEDOUT, nothing sent. NFDS may be 0. Uses sendmsg, which the confined programs'
 * filters refuse. */
int stp_msg_send_fds_by(int fd, int64_t deadline_ns, uint32_t type, const void *payload,
			size_t len, const int *fds, unsigned nfds);

/* Sends FAILED with ERR and the formatted text. */
int stp_msg_send_failed(int fd, int err, const char *text);

/* Waits for the next message until DEADLINE_NS (CLOCK_MONOTONIC; one already passed
 * takes only what is queued). On success *TYPE is
 * its type and its payload fills BUF (CAP >= STP_MSG_MAX bytes), *LEN bytes. -ETIMEDOUT;
 * -EPIPE when the daemon closed its end (or died); -EPROTO for a datagram too short or
 * too long. */
int stp_msg_recv(int fd, int64_t deadline_ns, uint32_t *type, void *buf, size_t cap,
		 size_t *len);

/* The type of the next message into *TYPE, the message left queued: waits as
 * stp_msg_recv. -ETIMEDOUT, -EPIPE, -EPROTO for a datagram shorter than a type. */
int stp_msg_peek_type(int fd, int64_t deadline_ns, uint32_t *type);

/* The same, taking up to MAXFDS descriptors attached into FDS (*NFDS of them, close on
 * exec, the caller's even when it fails); more than MAXFDS: -EPROTO, none kept. */
int stp_msg_recv_fds(int fd, int64_t deadline_ns, uint32_t *type, void *buf, size_t cap,
		     size_t *len, int *fds, unsigned maxfds, unsigned *nfds);

#endif
