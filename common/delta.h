/* SPDX-License-Identifier: MIT */
/*
 * Delta blocks of a published release (stipple(5), PUBLISHED INDEX, Delta entry): a
 * block's content rebuilt from the content of one or two blocks of an earlier release.
 * A block's content is its stored bytes decoded as one zstd frame without a dictionary
 * (before any BCJ filter is undone), so that it can be had from a block file alone. A
 * delta is a zstd frame compressed with the bases' contents, one after the other, as
 * its prefix (zstd's "reference prefix"), in long mode, its window the prefix and the
 * content together and never over 1 << STP_DELTA_WINDOW_LOG_MAX.
 *
 * Nothing here trusts its input: every decode is bounded by the capacity it is given and
 * by the window, and says -EUCLEAN when the bytes are not one frame that fills exactly
 * what they claim. Nothing is hashed here: the caller checks what a delta rebuilt
 * against the index's content SHA-256 before any of it is used. Functions return 0 or a
 * negative errno, allocate only zstd contexts (freed before they return), print nothing
 * and are thread-safe.
 */
#ifndef STP_DELTA_H
#define STP_DELTA_H

#include <stdbool.h>
#include <stddef.h>

/* The largest window a delta may ask of its decoder: two bases and a block of 1 GiB. */
#define STP_DELTA_WINDOW_LOG_MAX 31

/* Whether STORED (LEN bytes) is exactly one zstd frame, the only kind of block a delta
 * rebuilds and a content hash covers (a block may hold a skippable or a second frame). */
bool stp_delta_one_frame(const void *stored, size_t len);

/* The content of the stored block at STORED (LEN bytes, a zstd frame without a
 * dictionary) into OUT (CAP bytes): *OUTLEN bytes. -EUCLEAN: not one such frame, or
 * content past CAP. -ENOMEM. */
int stp_delta_content(const void *stored, size_t len, void *out, size_t cap, size_t *outlen);

/* The delta of CONTENT (LEN bytes) against PREFIX (PLEN bytes) at zstd LEVEL into OUT
 * (CAP bytes): *OUTLEN bytes. -ENOSPC when it does not fit CAP (a caller that only
 * wants a delta smaller than the full block passes that size). -ENOMEM, -EINVAL. */
int stp_delta_make(const void *content, size_t len, const void *prefix, size_t plen, int level,
		   void *out, size_t cap, size_t *outlen);

/* Rebuilds from DELTA (DLEN bytes) and PREFIX (PLEN bytes) exactly WANT bytes into OUT
 * (WANT bytes or more). -EUCLEAN: the delta is not one frame, asks for a larger window
 * than PLEN + WANT allow, or decodes to another length. -ENOMEM. */
int stp_delta_apply(const void *delta, size_t dlen, const void *prefix, size_t plen,
		    void *out, size_t want);

/* stp_delta_apply, telling STEP(CTX, N) as it goes that the first N bytes of OUT are
 * written for good (about every STP_DELTA_STEP bytes, and once at the end with WANT), so
 * that the caller may hash them meanwhile. STEP is called on this thread. */
typedef void (*stp_delta_step)(void *ctx, size_t n);
#define STP_DELTA_STEP ((size_t)128 << 10)
int stp_delta_apply_steps(const void *delta, size_t dlen, const void *prefix, size_t plen,
			  void *out, size_t want, stp_delta_step step, void *ctx);

#endif
