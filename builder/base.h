/* SPDX-License-Identifier: MIT */
/*
 * mkstipple --base OLD: the files that did not change since OLD keep their place. Each
 * cold file of the new tree whose bytes equal those of the file at its path in OLD is
 * kept; the OLD blocks that hold kept files are carried into the new image as they are
 * stored (not compressed again), so a published release shares them with OLD. A block
 * whose kept bytes fall below BASE_LIVE_NUM / BASE_LIVE_DEN of its data (up to the zeros
 * that end it) is not carried: its kept files are packed again, and its dead bytes go.
 *
 * OLD is untrusted: a file is kept only when OLD lays it out as mkstipple does (its
 * extents in file and stream order, apart, cut only at holes and blocks), so that the
 * comparison decodes each block about once (past twice OLD's blocks, OLD is refused) and
 * the new image's extents are mkstipple's. Every carried block is decoded while its files
 * are compared; what is copied is the stored bytes that were decoded, found so again by
 * their SHA-256 and table entry. A file's extents are read and checked once per OLD
 * inode, however many paths hard-link it, and whether they were taken or refused: what
 * is held is bounded by OLD's extent table, and the walks for shared cuts reuse it.
 * What is kept depends only on OLD's bytes, the tree and the options that shape the
 * image, never on --threads or --memory.
 *
 * Not thread-safe (main thread). Functions report their errors naming OLD and return 0
 * or -errno.
 */
#ifndef MKSTP_BASE_H
#define MKSTP_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "order.h"
#include "pack.h"
#include "tree.h"

/* A carried block holds at least as many live bytes as dead ones (those of files that
 * changed or went, in this release or an earlier one): however long a chain of releases,
 * its carried blocks hold at most twice the data of their live files (mkstipple(1),
 * --base). */
#define BASE_LIVE_NUM 1u
#define BASE_LIVE_DEN 2u

struct base;

/* Opens OLD and checks that its blocks can be carried into an image built with O:
 * the same block size, no dictionary, filters relative to each block, and --no-bcj
 * only when OLD has no filtered block. *OUT is the caller's (base_close). */
int base_open(const char *old, const struct pack_opts *o, struct base **out);

/* Finds the cold files among ORDER[NHOT..*COUNT) that OLD holds at their path with the
 * same bytes, chooses the OLD blocks to carry, removes the kept files' pieces from ORDER
 * (*COUNT shrinks) and fills *CARRY (valid until base_close) for pack_files. */
int base_match(struct base *b, struct piece *order, size_t nhot, size_t *count,
	       struct pack_carry *carry);

/* Once pack_files has placed the carried blocks: gives each kept file its extents in
 * the new stream. */
int base_place(struct base *b);

/* Feeds FN(CTX, BYTES, LEN) the bytes of the regular file that OLD holds at F's path,
 * in order, holes as zeros, each run valid during the call only; FN returns 0 to go on,
 * or an error that ends the walk. Returns 1 when OLD has no regular file there, 0 after
 * the walk, FN's error, or -errno for OLD (reported). A file that lies partly in OLD's
 * hot region is walked too (in file order, its hot blocks decoded as often as the walk
 * comes back to them). Also 1, with nothing (or part) fed, for a file OLD lays out
 * unlike mkstipple or holds at more than twice F's size plus a block, and once the walks
 * have decoded twice OLD's blocks: a hostile OLD costs no more than that. */
typedef int (*base_bytes_fn)(void *ctx, const uint8_t *bytes, size_t len);
int base_old_bytes(struct base *b, const struct node *f, base_bytes_fn fn, void *ctx);

/* 1 when OLD's hot region was cut by content (mkstipple --cut-inside), its blocks
 * padded where its files say: the new hot region is then cut so too, else at fixed
 * sizes, as OLD's, so that unchanged hot blocks come out the same. */
int base_hot_cut(const struct base *b);

/* One line saying what was carried, for the summary. */
void base_print(const struct base *b, FILE *out);

void base_close(struct base *b);

#endif
