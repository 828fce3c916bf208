/* SPDX-License-Identifier: MIT */
/*
 * The hand-over: what the monitor tells a program it execs (stipple-mountd, the daemon;
 * stipple-fetcher, the fetcher of a URL mount) in one SETUP message (monproto.h), with
 * the descriptors it hands over attached (SCM_RIGHTS).
 *
 * The payload is a list of fields, each a 32-bit tag, a 32-bit length and that many
 * bytes, in host order (both ends are the same machine). Strings carry no NUL and are at
 * most STP_SETUP_STR_MAX bytes; numbers are exactly 4 or 8 bytes; a flag is one byte, 0
 * or 1. A field given twice, a tag not known, a length that does not fit its kind, more
 * than STP_SETUP_KEYS_MAX keys or STP_SETUP_FDS_MAX descriptors: the whole message is
 * refused with -EPROTO. A field left out keeps the value stp_setup_init gave it: zero,
 * NULL, false (the sender sends every option it has).
 *
 * The descriptors are listed by role (STP_FD_*), in the order they are attached.
 *
 * Functions return 0 or a negative errno; they keep no state and are thread-safe.
 */
#ifndef STP_SETUP_H
#define STP_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diskcache.h"
#include "mountopts.h"
#include "sign.h"

/* How long a mount may take to go live, or be refused, and then be primed: the monitor's
 * deadline, which the exec'd programs' wait for their setup shares. */
#define STP_MOUNT_DEADLINE_MS 10000

#define STP_SETUP_STR_MAX 4096u
#define STP_SETUP_KEYS_MAX 64u
#define STP_SETUP_FDS_MAX 24u

/* What each descriptor handed over is. */
enum stp_fd_role {
	STP_FD_FUSE = 1, /* /dev/fuse of the mount the monitor made */
	STP_FD_IMAGE,    /* the image, read-only, superblock checked */
	STP_FD_RECORD,   /* the hot list to write when the mount ends */
	STP_FD_CACHE,    /* a URL's disk cache file */
	STP_FD_CHAN,     /* a channel to the fetcher (fetcher.h); repeated */
	STP_FD_RECORD_DONE, /* record=: a socket to say the list is whole on (monrecord.h) */
};

struct stp_setup {
	struct stp_mount_opts opts; /* decoded: its strings are the setup's (stp_setup_free);
				     * the daemon's has no secret (stp_montalk_send_setup) */
	char *prog;                 /* the front end's name, prefixed to messages */
	uint64_t mem_limit;         /* the daemon's RLIMIT_DATA, 0: none */
	uint64_t url_size;          /* a URL: the size of the file at it */
	struct stp_diskcache_file cache; /* its fd is set from the descriptors (-1: none) */
	struct stp_pubkey keys[STP_SETUP_KEYS_MAX]; /* verify: the keys the image may be signed by */
	uint32_t nkeys;
	uint32_t roles[STP_SETUP_FDS_MAX]; /* the role of each descriptor attached */
	uint32_t nroles;
	/* root's daemon: the sandbox user's ids, looked up by the monitor (sandbox.h) */
	bool sandbox_ids;
	uint32_t sandbox_uid, sandbox_gid;
};

/* An empty setup: every field zero, no keys, no descriptors, no cache file. */
void stp_setup_init(struct stp_setup *s);
/* Frees S's strings (set to NULL) and wipes its cache tag key; the rest is left. */
void stp_setup_free(struct stp_setup *s);

/* What a sender starts from: a setup, allocated (it is large, and holds keys), with the
 * options O and PROG, whose strings stay the caller's and must outlive it. NULL when out
 * of memory. stp_setup_discard wipes and frees it, never the borrowed strings. */
struct stp_setup *stp_setup_new(const struct stp_mount_opts *o, const char *prog);
void stp_setup_discard(struct stp_setup *s);

/* Encodes S into BUF (CAP bytes), *LEN bytes. -EMSGSIZE when it does not fit,
 * -ENAMETOOLONG for a string over STP_SETUP_STR_MAX (the decoder would refuse it). */
int stp_setup_encode(const struct stp_setup *s, uint8_t *buf, size_t cap, size_t *len);

/* Whether every string of O fits a SETUP (at most STP_SETUP_STR_MAX bytes): checked
 * before mounting. 0, or -ENAMETOOLONG with a message naming the option in ERR (CAP
 * bytes). */
int stp_setup_check_opts(const struct stp_mount_opts *o, char *err, size_t cap);

/* Decodes BUF (LEN bytes, untrusted) into S, which stp_setup_init prepared: -EPROTO as
 * above, -ENOMEM. On failure S holds what was decoded, for stp_setup_free. */
int stp_setup_decode(const uint8_t *buf, size_t len, struct stp_setup *s);

/* Sends S on the monitor socket FD with the descriptors FDS (S->nroles of them). */
int stp_setup_send(int fd, const struct stp_setup *s, const int *fds);

/* Receives the SETUP on FD until DEADLINE_NS (CLOCK_MONOTONIC) into S (initialised
 * here), its descriptors into FDS (STP_SETUP_FDS_MAX slots; the caller owns them, close
 * on exec). -EPROTO for another message or a bad one (no descriptor is then left open,
 * nor a string of S: stp_setup_free), -ETIMEDOUT, -EPIPE. On success S's strings are the
 * caller's, for stp_setup_free (the daemon and the fetcher keep them for their life). */
int stp_setup_recv(int fd, int64_t deadline_ns, struct stp_setup *s, int *fds);

/* SANDBOX, the message a daemon gets before its SETUP: the sandbox mode alone (a 32-bit
 * enum stp_sandbox_mode), so that it confines its files while the monitor checks and
 * mounts (sandbox.h: stp_sandbox_enter_empty_root). The SETUP's mode must then be the
 * same. Send: 0 or the socket's negative errno. Decode (LEN bytes, untrusted): exactly 4
 * bytes holding a known mode, else -EPROTO. Receive: until DEADLINE_NS, -EPROTO for
 * another message or a bad one (descriptors attached are refused), -ETIMEDOUT, -EPIPE. */
int stp_setup_send_sandbox(int fd, enum stp_sandbox_mode mode);
int stp_setup_decode_sandbox(const uint8_t *buf, size_t len, enum stp_sandbox_mode *mode);
int stp_setup_recv_sandbox(int fd, int64_t deadline_ns, enum stp_sandbox_mode *mode);

/* FILTER, the seccomp program a program loads as it confines itself (sandbox.h), built
 * by the monitor for that program's pid (filters.h): the instructions alone, 8 bytes
 * each in host order. The monitor sends it to a daemon after its SETUP (unless the mode
 * is off), and to a fetcher before its SETUP. Send: 0 or the socket's negative errno.
 * Decode (LEN bytes, untrusted): 1 to STP_SANDBOX_PROG_MAX whole instructions, copied
 * into *PROG (for stp_sandbox_prog_free), else -EPROTO (or -ENOMEM); the kernel checks
 * the rest as it loads it. Receive: until DEADLINE_NS, -EPROTO for another message or a
 * bad one, -ETIMEDOUT, -EPIPE. */
int stp_setup_send_filter(int fd, const struct stp_sandbox_prog *prog);
int stp_setup_decode_filter(const uint8_t *buf, size_t len, struct stp_sandbox_prog *prog);
int stp_setup_recv_filter(int fd, int64_t deadline_ns, struct stp_sandbox_prog *prog);

/* Adds FD (none when negative) with ROLE to S's list and to FDS, the array sent with it;
 * nothing past STP_SETUP_FDS_MAX. */
void stp_setup_add_fd(struct stp_setup *s, int *fds, int fd, enum stp_fd_role role);

/* The first descriptor with ROLE among S's FDS, or -1. */
int stp_setup_fd(const struct stp_setup *s, const int *fds, enum stp_fd_role role);

/* Whether FD is a socket the monitor could have left there (SOCK_SEQPACKET): a program
 * run by hand has none. */
bool stp_setup_is_socket(int fd);

#endif
