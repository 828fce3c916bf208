/* SPDX-License-Identifier: MIT */
/*
 * The inodes the kernel knows: one lookup count per image inode, as FUSE keeps it (a
 * lookup reply or a READDIRPLUS entry with attributes adds one, a forget takes its count
 * away). The kernel takes pages (fuse_lowlevel_notify_store) only for inodes it holds,
 * so warming and filling ask this table before they push, and watch it to learn when a
 * file becomes known (push what is resident) or is forgotten (drop what was kept for it).
 *
 * Watchers are added before the FUSE loop starts (stp_inodes_watch is not thread-safe
 * against the others). stp_inodes_lookup and stp_inodes_forget are thread-safe; they
 * call the watchers under the table's lock, so that a watcher sees the transitions of
 * an inode in the order they happened: a watcher must not call them back, and must never
 * wait on the kernel. stp_inodes_known is lock-free. Memory: 4 bytes an inode.
 */
#ifndef STP_INODES_H
#define STP_INODES_H

#include <stdbool.h>
#include <stdint.h>

struct stp_inode;
struct stp_superblock;
struct stp_inodes;

#define STP_INODES_WATCHERS 2u

/* Image inode INO became known (INODE: its record) or, with INODE NULL, was forgotten. */
typedef void (*stp_inodes_fn)(void *ctx, uint32_t ino, const struct stp_inode *inode);

/* What a table for an image with superblock SB allocates. */
uint64_t stp_inodes_memory(const struct stp_superblock *sb);
/* A table of NINODES inodes, none known; *out is the caller's. -ENOMEM. */
int stp_inodes_new(uint32_t ninodes, struct stp_inodes **out);
void stp_inodes_free(struct stp_inodes *t);

/* Calls FN(CTX, ...) at each transition from now on; -ENOSPC past STP_INODES_WATCHERS. */
int stp_inodes_watch(struct stp_inodes *t, stp_inodes_fn fn, void *ctx);

/* The kernel is being told of image inode INO (INODE): called before the reply, so that
 * a forget cannot come first. A count that would overflow stays (never forgotten). */
void stp_inodes_lookup(struct stp_inodes *t, uint32_t ino, const struct stp_inode *inode);
/* The kernel forgot NLOOKUP of its lookups of INO (or never got the reply). */
void stp_inodes_forget(struct stp_inodes *t, uint32_t ino, uint64_t nlookup);

/* Whether the kernel holds INO now (a hint: a forget may follow at once). NULL: none. */
bool stp_inodes_known(const struct stp_inodes *t, uint32_t ino);
/* Inodes the kernel holds now. */
uint64_t stp_inodes_count(struct stp_inodes *t);

#endif
