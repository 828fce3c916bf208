/* SPDX-License-Identifier: MIT */
/*
 * The messages the confined daemon sends the privileged monitor while a mount starts, as
 * OpenSSH's monitor protocol does between its two halves: typed, bounded, one way. Each
 * is one datagram on a SOCK_SEQPACKET socket pair: a 32-bit type in host order, then its
 * payload. The monitor trusts nothing in them: the daemon has parsed the untrusted image.
 *
 *   MOUNTED    (none)       the FUSE mount exists: after any failure it must be unmounted
 *   LOG        text         a diagnostic for the user (the daemon has no terminal)
 *   FAILED     int32 errno (negative), text: the mount cannot go live; the daemon exits
 *   LIVE       (none)       the image opened and checked, the mount serves
 *   PRIME      entries      part of the priming plan (prime.h)
 *   PRIME_END  (none)       the plan is complete
 *
 * Functions return 0 or a negative errno; they keep no state and are thread-safe (a
 * datagram is written whole).
 */
#ifndef STP_MONPROTO_H
#define STP_MONPROTO_H

#include <stddef.h>
#include <stdint.h>

enum stp_msg_type {
	STP_MSG_MOUNTED = 1,
	STP_MSG_LOG,
	STP_MSG_FAILED,
	STP_MSG_LIVE,
	STP_MSG_PRIME,
	STP_MSG_PRIME_END,
};

/* The largest payload. */
#define STP_MSG_MAX 65536u

/* Sends one message. -EMSGSIZE when LEN exceeds STP_MSG_MAX; a write error (-EPIPE once
 * the monitor has gone: SIGPIPE must be ignored). */
int stp_msg_send(int fd, uint32_t type, const void *payload, size_t len);

/* Sends FAILED with ERR and the formatted text. */
int stp_msg_send_failed(int fd, int err, const char *text);

/* Waits for the next message until DEADLINE_NS (CLOCK_MONOTONIC; one already passed
 * takes only what is queued). On success *TYPE is
 * its type and its payload fills BUF (CAP >= STP_MSG_MAX bytes), *LEN bytes. -ETIMEDOUT;
 * -EPIPE when the daemon closed its end (or died); -EPROTO for a datagram too short or
 * too long. */
int stp_msg_recv(int fd, int64_t deadline_ns, uint32_t *type, void *buf, size_t cap,
		 size_t *len);

#endif
