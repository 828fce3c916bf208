/* SPDX-License-Identifier: MIT */
/*
 * The block store's ledger (store.h): what the store holds, in bytes, without listing it.
 * Each fan-out directory's bytes as last listed (less what was removed since), and for
 * each live mount a group: the ROOM it was told, its fetcher, and the files it was handed
 * writable (pending: not counted in their directories while that mount may write them).
 * It also holds the store's key, which places a block in its fan-out directory.
 *
 * The ledger makes no call on a path: store.c opens, locks, renames and removes every
 * file of the store (monitor.c names it), and hands this module descriptors to read or
 * write. Its file's bytes are not trusted: stp_ledger_read checks them before any is used.
 *
 * A ledger is its caller's (stp_ledger_free frees what it holds). Not thread-safe: store.c
 * uses one under the blocks directory's exclusive flock only.
 */
#ifndef STP_LEDGER_H
#define STP_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

#define STP_LEDGER_KEY_SIZE 32u
#define STP_LEDGER_FANOUT 256u
/* Files handed writable to live mounts that the ledger follows: past them, none more. */
#define STP_LEDGER_PENDING_MAX (1u << 18)

/* A file handed writable to a mount (GROUP: the attach that did), not counted in its
 * directory's bytes until that mount has ended: it may still be written. */
struct stp_ledger_pending {
	uint8_t sha[32];
	uint32_t group;
};

/* A mount's charge: the ROOM it was told (or what its writable files hold, if more),
 * until its fetcher (PID, started at START: /proc's starttime; 0: not known) has ended
 * and no file it was handed is held. */
struct stp_ledger_group {
	uint64_t room, start;
	uint32_t pid, pad;
};

struct stp_ledger {
	uint8_t key[STP_LEDGER_KEY_SIZE];
	bool known;                   /* every directory's bytes are in DIR */
	uint64_t dir[STP_LEDGER_FANOUT];
	struct stp_ledger_group *g;   /* per group: its mount's charge and fetcher */
	uint32_t ngroups;
	struct stp_ledger_pending *p; /* in hash order, but while an attach adds to it */
	uint32_t npend;
	uint64_t total;               /* DIR's and the groups' ROOM's sum */
};

/* What settling found of a group (stp_ledger_settle). */
enum stp_ledger_state {
	STP_LEDGER_OVER = 0,  /* none of its files is held: its mount has ended */
	STP_LEDGER_HELD = 1,  /* a file of it is held: its mount may still write */
	STP_LEDGER_ENDED = 2, /* its fetcher has ended: it writes no more, whoever holds */
};

/* The fan-out directory (0 to 255) of the block hashing to SHA: the first byte of
 * SHA-256(key, SHA). A publisher chooses the blocks, so their hashes; not knowing the key,
 * she cannot choose where they lie, and each directory stays a fair 256th of the store. */
unsigned stp_ledger_fanout(const struct stp_ledger *l, const uint8_t sha[32]);

/* Whether SHA's file is among the first N pending ones (N <= npend, in hash order). */
bool stp_ledger_pending_in(const struct stp_ledger *l, uint32_t n, const uint8_t sha[32]);

/* Whether SHA's file is pending (the pending files in hash order). */
bool stp_ledger_is_pending(const struct stp_ledger *l, const uint8_t sha[32]);

/* Directory D now holds BYTES; the total follows. */
void stp_ledger_set_dir(struct stp_ledger *l, unsigned d, uint64_t bytes);

/* BYTES were removed from directory D (never below 0). */
void stp_ledger_remove(struct stp_ledger *l, unsigned d, uint64_t bytes);

/* The ledger held by FD, a file of LEN bytes, into L (empty but for its key): when FD
 * holds one whole and sound, L is filled and known; else L is left empty (not known: the
 * next trim lists the store whole). Reads FD with pread only. */
void stp_ledger_read(struct stp_ledger *l, int fd, uint64_t len);

/* Drops the groups left without a pending file, numbering the rest from 0, then writes L
 * into FD (empty, opened for writing): 0, or a negative errno. */
int stp_ledger_write(struct stp_ledger *l, int fd);

/* A group for a mount whose fetcher is PID (0: not known), started at START, with room
 * for up to WANT pending files (as many as the ledger can still follow): its number into
 * *GROUP, the pending files before it into *EARLIER, and the files it may be handed into
 * *ROOM_FOR. 0 or -ENOMEM. */
int stp_ledger_add_group(struct stp_ledger *l, uint32_t pid, uint64_t start, uint64_t want,
			 uint32_t *group, uint32_t *earlier, uint64_t *room_for);

/* SHA's file handed writable to GROUP, within the room stp_ledger_add_group made. */
void stp_ledger_add_pending(struct stp_ledger *l, const uint8_t sha[32], uint32_t group);

/* Puts the pending files in hash order (after an attach added to them). */
void stp_ledger_sort(struct stp_ledger *l);

/* Counts what the mounts that ended wrote, given each group's STATE (ngroups of them) and
 * each pending file's BYTES (npend: 0 when it is gone): the files of groups not HELD leave
 * the ledger, and unless a HELD group shares one, their bytes go to their directories; the
 * groups left without a file are dropped, and their room given back. */
void stp_ledger_settle(struct stp_ledger *l, const uint8_t *state, const uint64_t *bytes);

/* Frees what L holds (not L). */
void stp_ledger_free(struct stp_ledger *l);

#endif
