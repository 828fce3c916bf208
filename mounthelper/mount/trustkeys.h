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

struct stp_mount_opts;
struct stp_pubkey;
struct stp_superblock;

/* The keys O asks for into *KEYS (the caller frees it), *NKEYS of them; none without
 * verify. 0, or a negative errno with the reason said after PROG. */
int stp_trustkeys_read(const struct stp_mount_opts *o, const char *prog,
		       struct stp_pubkey **keys, unsigned *nkeys);

/* All the superblock SB can tell: with verify, 0 when it has the signed bit, else
 * -ENOKEY with the reason said after PROG; 0 without verify. */
int stp_trustkeys_check_signed(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			       const char *prog);

#endif
