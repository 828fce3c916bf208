/* SPDX-License-Identifier: MIT */
/*
 * A published image (stipple(5), PUBLISHED INDEX; `stipple publish`) read at its URL:
 * the URL names an index, and this presents the one-file image it stands for (the
 * "virtual image"): stipple-fetcher serves it on its channels, to a mount's daemon or
 * to a reader, which read it as any image at a URL. [0, 256) and [tail_offset,
 * image_size) come from the index, held in memory; each block from DIR/blocks/HH/H64 beside the
 * index, fetched whole and checked against its SHA-256 before a byte of it is used. A
 * block that does not match is refused: the read fails (-EIO) with a reason naming the
 * block's URL, and no byte of it is served.
 *
 * The store (mounthelper/mount/store.h; the fetcher only): the monitor hands the fetcher, for each block it can, a
 * descriptor of that block's file in its owner's store. A block is read from there first
 * and checked against its hash like a fetched one (a file that does not match is
 * counted and fetched again); a fetched block is written there whole, when its file is
 * empty (a file holding bytes is read-only to the fetcher: store.h).
 *
 * Blocks being fetched are bounded in memory (STP_PUBLISHED_BUFFERS_MAX bytes at once); a
 * block is fetched by one thread at a time, so that two reads of it fetch it once when
 * there is a store. All functions but load and free are thread-safe. They return 0 or a
 * negative errno with WHY (WHYLEN bytes) saying it in words.
 */
#ifndef STP_PUBLISHED_H
#define STP_PUBLISHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stp_http;
struct stp_http_tick;
struct stp_published;

/* An index is at most this long: the metadata and the block table of a very large tree. */
#define STP_PUBLISHED_INDEX_MAX (256ull << 20)
/* The bytes of blocks held at once (a block of the largest size fits). */
#define STP_PUBLISHED_BUFFERS_MAX (1280ull << 20)

/* Whether HEAD (LEN bytes: the first bytes at the URL) starts an index. */
bool stp_published_is_index(const void *head, size_t len);

/* Fetches the index at H's URL (its size as probed) whole and checks it
 * (stp_pubindex_check); BASE is the URL the block names are appended to (the index's
 * directory with its trailing '/'), SHOWN the same for messages (no userinfo). *out is
 * the caller's (stp_published_free). -EUCLEAN for a damaged index, -EFBIG for one over
 * STP_PUBLISHED_INDEX_MAX. */
int stp_published_load(struct stp_http *h, const char *base, const char *shown,
		       struct stp_published **out, char *why, size_t whylen);

/* What H (probed at URL) serves: *out a published image when its first bytes start an
 * index (loaded as stp_published_load, the blocks beside URL, SHOWN naming URL in
 * messages: no userinfo), else NULL (a one-file image; 0 returned). With NO_DELTAS the
 * index's delta table is passed over, as if it had none (the mount option nodeltas):
 * every block is fetched or read from the store whole, and no store slot is a base, a
 * delta file or a content. */
int stp_published_open(struct stp_http *h, const char *url, const char *shown,
		       bool no_deltas, struct stp_published **out, char *why, size_t whylen);
void stp_published_free(struct stp_published *p);

uint64_t stp_published_size(const struct stp_published *p);   /* of the virtual image */
uint64_t stp_published_blocks(const struct stp_published *p); /* entries in the index */
/* The index's bytes (held in memory). */
uint64_t stp_published_index_len(const struct stp_published *p);
/* Holds at most BYTES of block buffers at once (below STP_PUBLISHED_BUFFERS_MAX, the
 * default; at least the largest block). Before the channels are served. */
void stp_published_set_buffers(struct stp_published *p, uint64_t bytes);
/* The largest stored size of a block in the index (1 without blocks). */
uint64_t stp_published_block_max(const struct stp_published *p);
/* The store slots, in the order they are offered: first the distinct bases of the
 * index's deltas (index version 2; the first stp_published_base_slots), whose files are
 * only read, and only when they hold the base whole: without them no delta is of use,
 * so they come first when the store's slots are cut; then the blocks, the delta files,
 * and each delta's rebuilt content (under the content's SHA-256). */
uint64_t stp_published_slots(const struct stp_published *p);
uint64_t stp_published_base_slots(const struct stp_published *p);
/* Once the bases' files are set, the slots past them ordered by use: the rebuilt
 * contents and delta files of the deltas whose every base the store holds, the blocks
 * that have no such delta, those that have one (needed only when a rebuild fails), then
 * the other contents (an earlier mount may have kept one); the delta files no rebuild
 * can use are no longer offered. A store that hands fewer files than asked
 * (cache_size=, descriptors) so keeps what spares a fetch or a rebuild. Not thread-safe
 * with set_store and hash; the channels may be served meanwhile. */
void stp_published_order_slots(struct stp_published *p);
/* Whether the index has a delta table (index version 2). */
bool stp_published_has_deltas(const struct stp_published *p);
/* Slot I's SHA-256 (I below stp_published_slots): a base's, a block's, a delta file's or
 * a content's. */
const uint8_t *stp_published_hash(const struct stp_published *p, uint64_t i);
/* The bytes rebuilds from deltas hold at once when N channels serve contents (0 without
 * deltas): each channel's content and delta, and the one prefix being applied to; for
 * the fetcher's RLIMIT_DATA. */
uint64_t stp_published_delta_memory(const struct stp_published *p, unsigned n);
/* The largest store file it may write: a block, a delta file or a rebuilt content. */
uint64_t stp_published_file_max(const struct stp_published *p);

/* A store file takes whole file system blocks of this size: the least room a block
 * takes, and the unit it is counted in (here and by the monitor's trim, store.h). */
#define STP_PUBLISHED_STORE_UNIT 4096u

/* The bytes of blocks P may still write into the store (none until this is called),
 * each block counted as the whole STP_PUBLISHED_STORE_UNIT blocks it takes. */
void stp_published_set_store_room(struct stp_published *p, uint64_t bytes);

/* Slot I's file in the store: FD is P's from now on (closed by stp_published_free).
 * Thread-safe: the channels may be served meanwhile. */
void stp_published_set_store(struct stp_published *p, uint64_t i, int fd);

/* One part of the virtual image: LEN bytes at PTR, valid until stp_published_put. */
struct stp_published_part {
	const uint8_t *ptr;
	uint64_t len;
	void *owned;        /* a block's buffer, or NULL */
	uint64_t owned_len;
	unsigned tries;     /* HTTP requests it took (0: from memory or the store) */
	bool stored;        /* read back from the store */
};

/* The bytes from OFF to the end of the part of the virtual image holding OFF (the
 * superblock copy, one block, the tail), at most MAX of them (MAX > 0; OFF below the
 * size). TICK (NULL: none) is called every few seconds while a block is fetched, or
 * waited for (another thread fetching it, buffers full). */
int stp_published_get(struct stp_published *p, uint64_t off, uint64_t max,
		      const struct stp_http_tick *tick, struct stp_published_part *part,
		      char *why, size_t whylen);
void stp_published_put(struct stp_published *p, struct stp_published_part *part);

/* What the store did: blocks read back from it, and files in it that did not match. */
void stp_published_store_stats(struct stp_published *p, uint64_t *hits, uint64_t *rejected);

/* A buffer for a content of LEN bytes (at most the largest a delta rebuilds; else
 * NULL, as when memory is short): a spare given back, else a new one. Give it back
 * with content_done (NULL, whatever P, is ignored), which keeps two for the next
 * contents: a new 32 MiB buffer costs its zero-filled pages, a tenth of a rebuild.
 * Thread-safe; the spares count within stp_published_delta_memory's buffer per
 * channel. */
void *stp_published_content_buffer(struct stp_published *p, uint64_t len);
void stp_published_content_done(struct stp_published *p, void *buf);

/* Where stp_published_content hands a checked content: DELIVER(CTX, CONTENT, LEN,
 * TRIES, NET) is called once, before a rebuilt content is written into the store, so
 * that the reader does not wait for that write; TRIES: the HTTP requests it took, NET:
 * the bytes they brought (its delta's, or 0: all came from the store). RC is what
 * DELIVER returned. */
struct stp_published_sink {
	int (*deliver)(void *ctx, const void *content, uint64_t len, unsigned tries,
		       uint64_t net);
	void *ctx;
	int rc;
};

/* Block I's content (delta.h; LEN bytes into OUT, then to SINK), when the index has a
 * delta for it:
 * - the content kept in the store by an earlier rebuild (its slot, named by the
 *   content's SHA-256), read back and checked against that hash like a block;
 * - else -ENOENT when the block's own file holds a block's length of bytes: the caller
 *   reads the block (no rebuild);
 * - else rebuilt from its delta file and its bases' files in the store (each checked
 *   against its hash): the delta is fetched (checked against its hash, asked again past
 *   the caches as a block is) and applied, and the content used only when it hashes to
 *   the index's content SHA-256; then delivered, and kept in its slot while the room
 *   lasts, so that a block costs its rebuild once a store.
 * -ENOENT, with WHY, for every other outcome (no delta, a base missing, a delta that does
 * not rebuild the block): the caller then reads the block's stored bytes, fetched and
 * checked as always. The delta is kept in the store as a block is. One thread at a time
 * per block's stripe, as get does; the delta is fetched before the one rebuild lock is
 * taken, which is held only to apply it. *TRIES: the HTTP requests it took. -ENOMEM.
 * 0 once SINK has had the content. */
int stp_published_content(struct stp_published *p, uint64_t i, void *out, uint64_t len,
			  const struct stp_http_tick *tick, struct stp_published_sink *sink,
			  unsigned *tries, char *why, size_t whylen);

#endif
