/* SPDX-License-Identifier: MIT */
/*
 * The block cache: decoded blocks held in least-recently-used order, up to a budget of
 * blocks. A block several threads want at once is decoded by one of them while the others
 * wait. Blocks in use are pinned and never evicted; the budget can be exceeded only by
 * pinned blocks.
 *
 * All functions are thread-safe. The cache does not own the image, which must outlive it.
 * Functions return 0 or a negative errno.
 */
#ifndef STP_CACHE_H
#define STP_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct stp_image;
struct stp_cache;

/* A pinned decoded block: data is valid until stp_cache_release(). */
struct stp_block_ref {
	const uint8_t *data;
	size_t size;
	uint64_t block;
	void *entry; /* private */
};

struct stp_cache_stats {
	uint64_t hits, misses, decoded, decoded_bytes, failures;
	uint64_t decode_ns;  /* time spent reading, checking and decoding blocks */
	uint32_t resident, pinned, budget;
};

/* BUDGET is in blocks, at least 1 (-EINVAL otherwise). *out is the caller's to free. */
int stp_cache_new(const struct stp_image *img, uint32_t budget, struct stp_cache **out);
void stp_cache_free(struct stp_cache *cache);

/* Pins block BLOCK, decoding it if needed (once, whoever asks). A block that failed to
 * decode is not cached: the next request tries again. -EUCLEAN, -EIO, -ENOMEM. */
int stp_cache_get(struct stp_cache *cache, uint64_t block, struct stp_block_ref *ref);
/* Pins block BLOCK only if it is decoded and resident: -ENOENT otherwise, never decodes. */
int stp_cache_get_resident(struct stp_cache *cache, uint64_t block, struct stp_block_ref *ref);
void stp_cache_release(struct stp_cache *cache, struct stp_block_ref *ref);
/* Drops block BLOCK once no one holds it (warming: its bytes are elsewhere now). A block
 * still being decoded is left alone. */
void stp_cache_drop(struct stp_cache *cache, uint64_t block);
/* True when BLOCK is decoded and resident (a hint: it may be evicted right after). */
int stp_cache_contains(struct stp_cache *cache, uint64_t block);
void stp_cache_stats(struct stp_cache *cache, struct stp_cache_stats *out);

#endif
