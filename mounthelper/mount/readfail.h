/* SPDX-License-Identifier: MIT */
/*
 * Failed reads on a mount, made visible: each one is counted (stipple status shows the
 * count), and logged, rate-limited, with the image, the file's path, the offset and the
 * cause. The lines go to syslog (or the journal, which listens there) through a datagram
 * socket connected to STP_READFAIL_SOCKET before the sandbox is entered: the confined
 * daemon may write(2) on it, but may open or connect nothing, so glibc's syslog(), which
 * reconnects, is not used. Each line is also handed to stp_log (a foreground mount's
 * terminal). With no listener at mount time, reads are still counted and handed to
 * stp_log.
 *
 * The rate limit is the kernel's printk_ratelimit: at most STP_READFAIL_BURST lines every
 * STP_READFAIL_INTERVAL_S seconds; the first line let through after some were held back
 * is preceded by one saying how many were ("N messages suppressed").
 *
 * stp_readfail_open() runs before the sandbox (it opens the socket); the returned outlet
 * is the caller's (stp_readfail_close), and its socket must be kept open by the sandbox
 * (stp_readfail_fd). stp_readfail_note() and stp_readfail_stats() are thread-safe and
 * take a NULL outlet (nothing is counted). A note that is let through finds the file's
 * path by walking the tree, holding no lock (other failing reads do not wait for it),
 * and gives up after 100,000 entries, naming the inode number instead; a held-back one
 * costs a short lock and a clock read.
 */
#ifndef STP_READFAIL_H
#define STP_READFAIL_H

#include <stddef.h>
#include <stdint.h>

struct stp_image;
struct stp_readfail;

#ifndef STP_READFAIL_SOCKET
#define STP_READFAIL_SOCKET "/dev/log"
#endif
#define STP_READFAIL_BURST 10u
#define STP_READFAIL_INTERVAL_S 5u

struct stp_readfail_stats {
	uint64_t failures;   /* reads answered with an error */
	uint64_t logged;     /* lines let through (sent, or handed to stp_log) */
	uint64_t suppressed; /* lines held back by the rate limit */
	uint64_t unsent;     /* lines the socket did not take (no listener, full, gone) */
};

/* Opens the outlet, connected to the datagram socket at SOCKET_PATH (STP_READFAIL_SOCKET
 * normally). A socket that cannot be reached is no error: the outlet then counts and
 * hands lines to stp_log alone. -ENOMEM. */
int stp_readfail_open(const char *socket_path, struct stp_readfail **out);
/* The socket the sandbox must keep, or -1. */
int stp_readfail_fd(const struct stp_readfail *rf);
void stp_readfail_close(struct stp_readfail *rf);

/* A read of LEN bytes at OFF of image inode INO of IMG failed with ERR (negative errno);
 * BLOCK is the stored block it failed on, or UINT64_MAX when none was (an extent). */
void stp_readfail_note(struct stp_readfail *rf, const struct stp_image *img, uint32_t ino,
		       uint64_t off, size_t len, int err, uint64_t block);

void stp_readfail_stats(struct stp_readfail *rf, struct stp_readfail_stats *out);

/* Why the source's read failed in this thread (the fetcher's reason, naming a published
 * block's URL, say), or NULL to forget it: the next note in this thread ends with it, in
 * parentheses, and forgets it. Thread-local, so thread-safe. */
void stp_readfail_set_cause(const char *why);

#endif
