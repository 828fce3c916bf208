/* SPDX-License-Identifier: MIT */
/*
 * verify's public keys, read before the image as the caller's own configuration: the file
 * verify=PUBKEY names, or every *.pub of STP_TRUSTED_KEYS_DIR in name order (1 to 64 of
 * them). Each is a regular file of at most 64 KiB, reached without following a symbolic
 * link, holding a PEM Ed25519 public key; the image's signature is checked by the daemon.
 *
 * Not thread-safe (scandir, messages on stderr).
 */
#ifndef STP_TRUSTKEYS_H
#define STP_TRUSTKEYS_H

#include <dirent.h>
#include <fcntl.h>

struct stp_mount_opts;
struct stp_pubkey;
struct stp_superblock;

/* The monitor opens each key file (monitor.c: stp_monitor_open_key, with
 * STP_TRUSTKEYS_OPEN_FLAGS: a symbolic link is refused) and the folder; this file lists
 * the folder, and monchecks.h's take_key checks and parses each file (libcrypto). */
#define STP_TRUSTKEYS_OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK)

/* The *.pub names of the trusted keys folder, DIRFD (a negative errno: its open failed),
 * in name order into *OUT, which stp_trustkeys_names_free frees whatever the result. 0
 * when there are 1 to 64; else a negative errno with the reason said after PROG. */
struct stp_trustkeys_names {
	struct dirent **names;
	unsigned n;
};
int stp_trustkeys_list(const char *prog, int dirfd, struct stp_trustkeys_names *out);
void stp_trustkeys_names_free(struct stp_trustkeys_names *l);

/* All the superblock SB can tell: with verify, 0 when it has the signed bit, else
 * -ENOKEY with the reason said after PROG; 0 without verify. */
int stp_trustkeys_check_signed(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			       const char *prog);

#endif
