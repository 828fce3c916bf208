/* SPDX-License-Identifier: MIT */
/*
 * The block cache: decoded blocks held in least-recently-used order, up to a budget of
 * blocks. A block several threads want at once is decoded by one of them while the others
 * wait. Blocks in use are pinned and never evicted.
 *
 * Memory is bounded: at most BUDGET + EXTRA block buffers' worth of bytes exist at any
 * time, counting pinned blocks, blocks being decoded, idle cached blocks and the one
 * spare buffer kept for reuse; idle blocks are kept up to BUDGET buffers' worth. A buffer
 * is stp_image_block_buffer_size() bytes: a block decodes in place, its stored bytes read
 * into the buffer's end. A block whose frame ends in zero blocks over half of it (a cut
 * of mkstipple --cut-inside) is decoded up to them, and once whole keeps and counts only
 * the pages of its body: the rest of its buffer is unmapped, and readers copy zeros past
 * the body (stp_cache_copy, stp_cache_bytes), so reading it costs no memory; at most
 * 4096 blocks are kept (each is a mapping). Buffers are mapped and unmapped directly,
 * so resident memory follows the count; a decode makes the pages it will write resident
 * in one call rather than a fault per page. While the cache holds fewer buffers than its
 * budget, and that budget is at least 16 buffers (small blocks), a decoder thread with
 * nothing queued maps the spare ahead of the next miss, which then finds its pages ready. Idle blocks beyond BUDGET are evicted as soon as
 * they are released. A get that needs a buffer when all are pinned or loading waits
 * until a release frees one.
 *
 * Hence the caller's rule: pins held by threads that may wait for something else (a
 * get, a lock, or the kernel: a page-cache store waits for a page that a read in flight
 * holds locked, and that read may be waiting here) must, all together, stay below
 * BUDGET + EXTRA, so that a reader always finds a buffer in the end (the mount's count
 * is in warm.h and fill.h). No decode waits for such a thread, and a reader takes over
 * a decode that is queued or parked: a get waits only for buffers and for decodes that
 * end. A thread that holds
 * one pin at a time, and waits for nothing while it holds it, never waits for ever.
 * stp_cache_get_resident never allocates and never waits.
 *
 * A block is decoded as a stream (stp_image_decode_block_stream): each entry has a
 * watermark, the decoded bytes known so far, and a reader of bytes [0, END) of a block
 * being decoded is let go once the watermark passes END, while the decode goes on into
 * the same buffer; the block then stays whole in the cache. A block with a BCJ filter
 * stays filtered in its buffer until it is decompressed whole (zstd copies later matches
 * from the filtered bytes); meanwhile a reader let go early gets its bytes through
 * stp_cache_read, which unfilters a private copy of them (the watermark must pass END
 * plus the filter's 4 bytes of look-ahead). Then the filter is undone in place, step by
 * step, each step once no copy reads its bytes; copies of bytes ahead of the pass go on
 * meanwhile, and a reader of bytes it is about to change waits for it to pass them. A decode
 * that fails wakes every reader still waiting on it with its error, and the entry leaves
 * the cache: it is never served whole (a reader let go before keeps the bytes it could
 * read in place, and the buffer stays counted until the last holder releases it). A get
 * that misses decodes on its own thread until its
 * bytes are final; stp_cache_get_range then hands the rest of the block to a decoder
 * thread of the cache's own (at most 4, made on demand, taking no signals) and returns.
 * A reader of a block whose rest still waits for a decoder thread (all busy with other
 * blocks) takes that decode and goes on with it on its own thread up to its own bytes,
 * then queues what is left: it never waits behind other blocks' decodes.
 * That decode holds its buffer and waits for nothing, so the rule above and the bound
 * are those of a decode on the caller's thread.
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

/* A pinned decoded block: its first DIRECT bytes can be read at once: all SIZE bytes
 * when got through stp_cache_get, _get_decoded or _get_resident, and for
 * stp_cache_get_range (or stp_cache_wait) with END, at least END unless the block is
 * filtered and still decoding; stp_cache_read gives [0, END) either way. Read them with
 * stp_cache_copy or stp_cache_bytes, never from DATA directly: DATA holds the first BODY
 * bytes only (valid until stp_cache_release), and past BODY the block is zeros that no
 * memory holds. */
struct stp_block_ref {
	const uint8_t *data;
	size_t size;
	size_t body;
	size_t direct;
	uint64_t block;
	int fresh;   /* this get decoded the block (the others found it, or joined its decode) */
	void *entry; /* private */
};

struct stp_cache_stats {
	uint64_t hits, misses, decoded, decoded_bytes, failures;
	uint64_t decode_ns;  /* time spent reading, checking and decoding blocks */
	uint64_t waits;      /* gets that waited for a buffer */
	uint64_t early;      /* gets let go before their block was decoded whole */
	uint64_t ahead;      /* decodes queued by stp_cache_read_ahead */
	uint32_t resident, pinned, budget;
	uint32_t buffers;      /* block buffers that exist now, the spare included */
	uint32_t peak_buffers; /* the most that ever existed at once */
	uint32_t max_buffers;  /* BUDGET + EXTRA: the bound on both */
	uint32_t parked;       /* decodes parked now (stp_cache_prefix): 0 or 1 */
	uint32_t joining;      /* gets waiting now on a block another thread decodes (tests
				* wait for it instead of for a time) */
};

/* The memory one block buffer maps, for an image with superblock SB: what every cache
 * entry holds, whatever its block's size. Pure. */
struct stp_superblock;
uint64_t stp_cache_buffer_bytes(const struct stp_superblock *sb);
/* The budget a reader uses unless told otherwise, on a machine of RAM bytes of memory
 * (0: not known): eight blocks, or, when the blocks are smaller, as many buffers as fit
 * in stp_cache_default_bytes(RAM), but no more than the image has blocks (and at most
 * STP_CACHE_DEFAULT_MAX). An image of small blocks is built for random reads: it keeps
 * at least as many decoded bytes as one of the default 32 MiB, and, where memory allows,
 * a larger tree whole (a block decoded once is read many times). Pure. */
#define STP_CACHE_DEFAULT_BLOCKS 8u
#define STP_CACHE_DEFAULT_BYTES (256ull << 20)
#define STP_CACHE_DEFAULT_SHARE 32u     /* of the machine's memory, when that is more */
#define STP_CACHE_DEFAULT_MAX 16384u    /* buffers: each is a mapping of its own */
uint32_t stp_cache_default_budget(const struct stp_superblock *sb, uint64_t ram);
/* The bytes of buffers a default budget may hold on a machine of RAM bytes of memory:
 * STP_CACHE_DEFAULT_BYTES, or a STP_CACHE_DEFAULT_SHARE-th of RAM when that is more. Pure. */
uint64_t stp_cache_default_bytes(uint64_t ram);
/* This machine's memory in bytes (sysinfo), 0 when it cannot be known. */
uint64_t stp_cache_machine_memory(void);

/* BUDGET: idle decoded blocks kept, at least 1 (-EINVAL otherwise). EXTRA: buffers
 * allowed beyond the budget for blocks pinned or decoded at once, e.g. one per thread that
 * decodes while the budget is full of pinned blocks (the total is capped at UINT32_MAX).
 * *out is the caller's to free. */
int stp_cache_new(const struct stp_image *img, uint32_t budget, uint32_t extra,
		  struct stp_cache **out);
/* No block may be pinned any more. */
void stp_cache_free(struct stp_cache *cache);

/* Pins block BLOCK, decoding it if needed (once, whoever asks), waiting for a buffer when
 * all BUDGET + EXTRA are pinned or loading (see the rule above). A block that failed to
 * decode is not cached: the next request tries again. -EINVAL (no such block), -EUCLEAN,
 * -EIO, -ENOMEM. */
int stp_cache_get(struct stp_cache *cache, uint64_t block, struct stp_block_ref *ref);
/* stp_cache_get, but it returns as soon as bytes [0, END) of the block can be read with
 * stp_cache_read (END is cut to the block's size); a decode it starts goes on on a
 * decoder thread after that. FUSE reads use it; a reader that joins a decode started by
 * stp_cache_get (warming) is let go the same way. */
int stp_cache_get_range(struct stp_cache *cache, uint64_t block, size_t end,
			struct stp_block_ref *ref);
/* Decodes block BLOCK on the caller's thread until bytes [0, END) can be read with
 * stp_cache_read, then parks the rest of its decode, unless the block is cached or being
 * decoded already (nothing is done then). The parked entry keeps its buffer (its stored
 * bytes, checked before any byte was decoded, and the bytes decoded so far) and its zstd
 * state: a get of bytes below END is served from it without decoding, and one of bytes
 * past END goes on with the decode from where it stopped, on the reader's thread up to its
 * own bytes and then on a decoder thread, as a miss would. stp_cache_get_decoded and
 * _get_resident do not see it. It counts as a pinned block (a full buffer) until then,
 * and a get that finds no buffer free and no idle block to evict takes its buffer, the
 * decoded bytes lost. One decode is parked at a time: a second goes on to the end on a
 * decoder thread. Errors as stp_cache_get. */
int stp_cache_prefix(struct stp_cache *cache, uint64_t block, size_t end);
/* Waits until bytes [0, END) of REF's block, pinned by a get, can be read with
 * stp_cache_read, and updates ref->direct. 0, or the error of a decode that failed
 * meanwhile (REF must still be released). */
int stp_cache_wait(struct stp_cache *cache, struct stp_block_ref *ref, size_t end);
/* Copies bytes [FROM, FROM + LEN) of REF's block to DST; they must lie below the END of
 * the get or wait that let REF go. Below ref->direct stp_cache_copy; else, while the block
 * is filtered, an unfiltered copy made from a restart point just before FROM
 * (stp_image_decode_copy), or, once the filter is being undone in place (or where no
 * restart point lies near), a wait for that pass to reach them. 0, -ENOMEM, or the error
 * of a decode that failed before the bytes could be copied. */
int stp_cache_read(struct stp_cache *cache, const struct stp_block_ref *ref, size_t from,
		   size_t len, void *dst);
/* Copies bytes [FROM, FROM + LEN) of REF's block, below ref->direct, to DST: zeros past
 * ref->body. Never waits. */
void stp_cache_copy(const struct stp_block_ref *ref, size_t from, size_t len, void *dst);
/* Bytes [FROM, FROM + LEN) of REF's block, below ref->direct, in place: returns where
 * the first *N of them lie (0 < *N <= LEN when LEN > 0), in the block's buffer, or past
 * its body in a run of zeros the cache shares (read-only, never freed); the caller goes
 * on from FROM + *N. Valid while REF is pinned. Never waits. */
const uint8_t *stp_cache_bytes(const struct stp_block_ref *ref, size_t from, size_t len,
			       size_t *n);
/* Takes N bytes at BYTES, which stp_cache_feed numbers OFF: 0 to go on, anything else
 * ends the feed and is returned by it. */
typedef int (*stp_cache_sink_fn)(void *ctx, uint64_t off, const uint8_t *bytes, size_t n);
/* Hands bytes [FROM, FROM + LEN) of REF's block, below ref->direct, to SINK in place, in
 * order, as stp_cache_bytes cuts them; the first is numbered OFF (a file offset, say), the
 * others on from it. Returns 0 or SINK's value. Never waits. */
int stp_cache_feed(const struct stp_block_ref *ref, size_t from, size_t len, uint64_t off,
		   stp_cache_sink_fn sink, void *ctx);
/* Pins block BLOCK if it is resident or being decoded, waiting for its decode to end
 * (which waits for nothing); -ENOENT when it is neither, or parked (also when the decode
 * waited for parks: stp_cache_prefix's), the decode's error when that failed. Never
 * decodes, never takes a buffer. */
int stp_cache_get_decoded(struct stp_cache *cache, uint64_t block, struct stp_block_ref *ref);
/* Pins block BLOCK only if it is decoded whole and resident: -ENOENT otherwise, never
 * decodes. */
int stp_cache_get_resident(struct stp_cache *cache, uint64_t block, struct stp_block_ref *ref);
void stp_cache_release(struct stp_cache *cache, struct stp_block_ref *ref);
/* A read began at the start of block BLOCK - 1, which decodes to less than a buffer (a
 * --cut-inside cut, ending in zero blocks): BLOCK, the next cut of a file read in order,
 * is queued for a decoder thread, unless it is cached or being decoded, or no buffer is
 * free without waiting for a pinned one. Blocks that decode whole are left alone (their
 * own decode runs ahead of their reader already). Never waits for a decode. */
void stp_cache_read_ahead(struct stp_cache *cache, uint64_t block);
/* Drops block BLOCK once no one holds it (warming: its bytes are elsewhere now). A block
 * still being decoded is left alone. */
void stp_cache_drop(struct stp_cache *cache, uint64_t block);
/* True when BLOCK is decoded whole and resident (a hint: it may be evicted right
 * after). */
int stp_cache_contains(struct stp_cache *cache, uint64_t block);
void stp_cache_stats(struct stp_cache *cache, struct stp_cache_stats *out);

/* For tests: FN(CTX, BLOCK, N) is called on the decoding thread, outside the lock, just
 * before BLOCK's watermark moves to N (not at the end of the decode), and for a filtered
 * block, once it is decompressed whole, before each step of the unfilter in place, with
 * N the bytes unfiltered so far (0 first, when copies of any byte are still let go). It
 * may block, which holds that decode there. Set it before any get; not thread-safe. */
typedef void (*stp_cache_observer_fn)(void *ctx, uint64_t block, size_t n);
void stp_cache_set_observer(struct stp_cache *cache, stp_cache_observer_fn fn, void *ctx);

#endif
