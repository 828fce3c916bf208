/* SPDX-License-Identifier: MIT */
/*
 * Hashing beside the caller: a verified read hashes a block's stored bytes on a second
 * thread while its own thread decodes them from the same buffer, and a rebuild from a
 * delta hashes the content as it is written, so that verification costs little more
 * than the decode. Neither thread writes the buffer; the decoded
 * bytes are used only once the hash is known to match.
 *
 * Each calling thread gets its own helper thread, made at its first stp_hasher_start
 * and joined when the calling thread exits; so the functions are thread-safe, and a
 * thread has at most one hash in flight. If the helper cannot be made, the hash is
 * computed in stp_hasher_start itself: slower, never wrong.
 */
#ifndef STP_HASHER_H
#define STP_HASHER_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

/* Starts the SHA-256 of LEN bytes at P (stp_sign_hash), which stay unchanged and alive
 * until stp_hasher_wait returns. A thread calls stp_hasher_wait before starting again. */
void stp_hasher_start(const void *p, size_t len);
/* As stp_hasher_start, for LEN bytes at P still being written from the start on: the
 * helper hashes them as stp_hasher_ready says they are final, so that the hash ends
 * soon after the last of them. The caller must say all LEN ready (even after a failure,
 * when the hash is of no use) before stp_hasher_wait. */
void stp_hasher_follow(const void *p, size_t len);
/* The first N bytes of the followed job are final and stay unchanged until the wait. */
void stp_hasher_ready(size_t n);
/* Waits for the hash started last by this thread and stores it in OUT. */
void stp_hasher_wait(uint8_t out[STP_SIG_HASH_SIZE]);

#endif
