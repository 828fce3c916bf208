/* SPDX-License-Identifier: MIT */
/*
 * `stipple publish --base OLD`: delta files for the blocks of a new image that OLD, the
 * previous release's one-file image, does not hold (stipple(5), PUBLISHED INDEX, Delta
 * entry; common/delta.h). A mount that holds OLD's blocks in its store fetches the delta
 * instead of the full block.
 *
 * The bases of a block are the one or two blocks of OLD that hold the most bytes of the
 * same files at about the same file offsets (paths matched by a 64-bit hash: a collision
 * only costs a worse base, as every delta is checked by its content's SHA-256 before it
 * is used). Only zstd blocks without a dictionary take part, as targets or bases.
 * OLD is not trusted for more than that: its bytes only make a prefix, and a delta is
 * kept only when, applied again here, it rebuilds the block's content exactly.
 *
 * The deltas are made on a pool of threads, each block's by one thread with buffers of
 * its own, so that the deltas, and the index that lists them, are the same whatever the
 * number of threads; each thread holds at most one delta at a time, so that memory is
 * bounded by the threads (about five blocks and a zstd state each). The functions below
 * are called from one thread. They report their errors (naming OLD or IMAGE) and return
 * 0 or a negative errno.
 */
#ifndef STP_PUBDELTA_H
#define STP_PUBDELTA_H

#include <stddef.h>
#include <stdint.h>

#include "pubindex.h"

struct stp_image;
struct pubdelta;

/* A block of the new image that wants a delta, and the SHA-256 of its stored bytes
 * (they must still hash to it when the delta is made). */
struct pubdelta_want {
	uint64_t block;
	uint8_t sha256[STP_PUBINDEX_HASH_LEN];
};

/* Opens OLD, a one-file image or a published index with its block files beside it
 * (its checksums, and an index's block hashes, checked as each block is read), and
 * maps the files of both images to their blocks. LEVEL: the zstd level of the deltas;
 * THREADS: how many make them. *OUT the caller's. */
struct stp_cli;
int pubdelta_open(const struct stp_cli *cli, const char *old, struct stp_image *img, int level,
		  unsigned threads, struct pubdelta **out);

/* Whether OLD holds a block whose stored bytes hash to SHA. */
int pubdelta_old_has(const struct pubdelta *d, const uint8_t sha[STP_PUBINDEX_HASH_LEN]);

/* Starts the threads on the N blocks of WANT, in increasing block order (WANT stays the
 * caller's, and must live until pubdelta_close). */
int pubdelta_start(struct pubdelta *d, const struct pubdelta_want *want, size_t n);

/* The delta of the next block of WANT, in WANT's order, once made, into *DELTA
 * (pubdelta's, valid until the next call) and *ENT, when one pays: it is at most 3/4 of
 * the block's stored bytes. Returns 1 with a delta, 0 without (none pays, or the block
 * cannot have one), or a negative errno. */
int pubdelta_next(struct pubdelta *d, const uint8_t **delta, struct stp_pubindex_delta *ent);

/* Stops the threads (each after the delta it is making) and frees D. */
void pubdelta_close(struct pubdelta *d);

#endif
