/* SPDX-License-Identifier: MIT */
/*
 * Reading an image: open it, look up paths, decode inodes, directory entries, link
 * targets and extended attributes, and decode data blocks.
 *
 * An opened image is immutable: every function taking a const struct stp_image * is
 * thread-safe, and every read of the image is a positioned read of its source (imgsrc.h:
 * a file, or a URL). Records are decoded from the metadata on
 * each call and checked against its bounds; a record that points outside the image is
 * reported (STP_CORRUPT) and gives -EUCLEAN. Paged metadata (stipple(5)) is read a page
 * at a time as records are asked for, into a cache of bounded size (the one mutable
 * part, behind its own lock), so any record lookup may also fail with a page's error:
 * -EUCLEAN (damaged page), -EIO or -ENOMEM. Names, link targets and attribute values
 * are copied out to the caller. Functions return 0 or a negative errno.
 */
#ifndef STP_IMAGE_H
#define STP_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"

struct stp_image;

/* Reads the 256-byte superblock from FD and checks it field by field, and against the
 * size of the file (a regular file or a block device). Reads nothing else: this is all a
 * privileged process does with an untrusted image before it hands it to the sandbox.
 * PATH is for messages. -EUCLEAN, -EPROTONOSUPPORT (reported), -EINVAL (not a regular
 * file or block device), or a read error. */
int stp_image_read_superblock(int fd, const char *path, struct stp_superblock *sb);
/* The same from SRC (named by src->name), which stays the caller's. Its size is checked
 * as a file's, unless the source cannot tell (then the last byte is read). */
struct stp_imgsrc;
int stp_image_read_superblock_src(struct stp_imgsrc *src, struct stp_superblock *sb);

/* Opens PATH read-only, checks the superblock, loads and checks the metadata and the
 * dictionary. On success *out is owned by the caller (stp_image_close). -EUCLEAN: damaged;
 * -EPROTONOSUPPORT: newer format or unknown feature (logged with its name). */
int stp_image_open(const char *path, struct stp_image **out);
/* Same, on an open descriptor the image takes ownership of (closed even on failure). */
int stp_image_open_fd(int fd, const char *path, struct stp_image **out);
/* Same, reading through SRC, which the image takes over (closed even on failure);
 * messages name src->name. */
int stp_image_open_src(struct stp_imgsrc *src, struct stp_image **out);
/*
 * stp_image_open_fd, but the image must be signed by KEY: the signature block is read and
 * the signature checked over the superblock and the hashes BEFORE the metadata or the
 * dictionary is read or parsed; those are then checked against their hashes, and every
 * later stp_image_decode_block checks the block's stored bytes against its hash
 * (mismatch: STP_CORRUPT, -EUCLEAN, so a mount answers EIO). -ENOKEY: the image is not
 * signed; -EKEYREJECTED: signed by another key, or the signature is bad (reported with
 * stp_log, naming the key id in hex). Takes FD over like stp_image_open_fd.
 * KEY NULL checks integrity alone: every hash as above, but not who signed them (what
 * `stipple check` does without a key). Call stp_sign_init() first where a sandbox
 * follows.
 */
struct stp_pubkey;
int stp_image_open_verified(int fd, const char *path, const struct stp_pubkey *key,
			    struct stp_image **out);
/* stp_image_open_verified through SRC, taken over as by stp_image_open_src. */
int stp_image_open_src_verified(struct stp_imgsrc *src, const struct stp_pubkey *key,
				struct stp_image **out);
/* Whether IMG is signed, and by which key id (for stipple info). 1 or 0. The id is what
 * the signature block says: only an image opened verified with a key has proved it. */
int stp_image_signer(const struct stp_image *img, uint8_t id[32]);
/* Whether IMG's parts are checked against the signed hashes (opened verified). */
int stp_image_verified(const struct stp_image *img);
void stp_image_close(struct stp_image *img);
/* Paged metadata from a file: asks the kernel to read every stored page ahead, without
 * waiting, so that a walk of a large tree finds them in the page cache instead of seeking
 * for each. Not part of the open: its walk of the page cache (0.1 ms for a million files,
 * all cached; more cold) is better spent after a mount is live, and a read queued behind
 * it waits for it (a cold mount of a million files once waited 6.6 ms for its root inode).
 * Thread-safe; nothing for a URL or whole metadata. */
void stp_image_read_meta_ahead(const struct stp_image *img);

const struct stp_superblock *stp_image_sb(const struct stp_image *img);
const char *stp_image_path(const struct stp_image *img);
/* The descriptor of a file source, or -1 (a URL). */
int stp_image_fd(const struct stp_image *img);
/* The source every read goes through (thread-safe to read from; the image's). */
struct stp_imgsrc *stp_image_src(const struct stp_image *img);
uint32_t stp_image_block_size(const struct stp_image *img);
/* Bytes of decoded metadata held in memory: the whole of it, or, paged, the pages
 * resident now. */
size_t stp_image_meta_bytes(const struct stp_image *img);
/* The header of the decoded metadata: the tables' record counts. */
const struct stp_meta_header *stp_image_meta_header(const struct stp_image *img);

/* Inodes are numbered 0 (the root) to inode_count - 1. */
int stp_image_inode(const struct stp_image *img, uint32_t ino, struct stp_inode *out);

/* Entry INDEX (0-based, in name order) of directory DIR; its name, checked (no '/', no
 * NUL, not "." or ".."), is copied into NAME and NUL-terminated. */
int stp_image_dirent(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		     struct stp_dirent *out, char name[STP_NAME_MAX + 1]);
/* A run of a directory's entries read together: a listing costs a few copies out of the
 * metadata per run instead of two per entry. */
#define STP_DIR_RUN 128u
struct stp_dir_run {
	uint32_t first, count;              /* entries first .. first + count - 1 */
	struct stp_dirent ent[STP_DIR_RUN];
	uint16_t name_at[STP_DIR_RUN];      /* entry i's NUL-terminated name: names + name_at[i] */
	char names[STP_DIR_RUN * (STP_NAME_MAX + 1)];
	char span[STP_DIR_RUN * STP_NAME_MAX]; /* scratch: the pool bytes under the names */
};
/* Fills RUN with up to MAX entries (1 to STP_DIR_RUN: MAX is clamped) of DIR from index
 * FIRST, each checked as stp_image_dirent checks one; count is 0 past the last entry, and
 * after an error. RUN is the caller's (some 66 KiB: not for a small stack). */
int stp_image_dir_run(const struct stp_image *img, const struct stp_inode *dir, uint32_t first,
		      uint32_t max, struct stp_dir_run *run);
/* Looks NAME (LEN bytes) up in directory DIR by binary search: -ENOENT, -ENOTDIR. */
int stp_image_lookup(const struct stp_image *img, uint32_t dir, const char *name, size_t len,
		     uint32_t *ino);
/* Record INDEX of the lookup table (below stp_image_meta_header()->lookup_count): a
 * directory DIR and a NAME to look up in it, checked as a directory entry's (1 to
 * STP_NAME_MAX bytes, no '/', no NUL, not "." or ".."), copied into NAME and
 * NUL-terminated. -EINVAL past the table; -EUCLEAN when DIR is not a directory. */
int stp_image_lookup_name(const struct stp_image *img, uint32_t index, uint32_t *dir,
			  char name[STP_NAME_MAX + 1]);
/* Resolves a slash-separated path from the root without following symlinks: empty
 * components and "." are skipped, ".." goes to the directory's parent (-ENOTDIR after
 * a non-directory). */
int stp_image_resolve(const struct stp_image *img, const char *path, uint32_t *ino);

/* The target of symlink INODE, *len bytes (1 to STP_LINK_MAX, no NUL among them), copied
 * into TARGET and NUL-terminated. -EINVAL: not a symlink. */
int stp_image_readlink(const struct stp_image *img, const struct stp_inode *inode,
		       char target[STP_LINK_MAX + 1], size_t *len);

/* Extended attribute INDEX of INODE: its record into *X (x->name_len, x->value_len) and
 * its name, checked (1 to 255 bytes, no NUL, after the name of INDEX - 1 in byte order),
 * into NAME, NUL-terminated. -ENOENT past the last one. The value, up
 * to STP_XATTR_VALUE_MAX bytes, is copied by stp_image_xattr_value, x->value_len bytes
 * into VALUE. */
int stp_image_xattr(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		    struct stp_xattr *x, char name[STP_XATTR_NAME_MAX + 1]);
int stp_image_xattr_value(const struct stp_image *img, const struct stp_xattr *x, void *value);

/* The attribute of INODE named WANTED into *X, found by bisection (names are sorted):
 * -ENODATA when there is none. */
int stp_image_xattr_find(const struct stp_image *img, const struct stp_inode *inode,
			 const char *wanted, struct stp_xattr *x);

/* Walks INODE's attributes, checking every one and that their names with NULs fit
 * STP_XATTR_LIST_MAX (-EUCLEAN, logged, if not); *values: their values' total. For a
 * reader that holds them all at once, to refuse a total it cannot afford. */
int stp_image_xattr_sizes(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t *values);

/* What a reader holding all of one file's values at once (diff, extract --tar) takes;
 * the format allows more (STP_XATTR_COUNT_MAX values of STP_XATTR_VALUE_MAX), which
 * a hostile image reaches cheaply by sharing bytes of the string pool. */
#define STP_XATTR_HELD_MAX (64u << 20)

/* Extent INDEX of regular file INODE, checked to lie inside the data stream. */
int stp_image_extent(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		     struct stp_extent *out);

/* Index of the first extent of INODE that ends after file offset OFF (inode->count when
 * none does): extents are sorted by file offset. */
int stp_image_extent_find(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t off, uint32_t *index);

/* The page table entry of metadata page PAGE (paged metadata only: -EINVAL otherwise),
 * checked. */
int stp_image_meta_page(const struct stp_image *img, uint64_t page, struct stp_blockent *out);

/* A stored range of the image: LEN bytes at OFF whose checksum is SUM. */
typedef int (*stp_image_range_fn)(void *ctx, uint64_t off, uint64_t len, uint64_t sum);
/* Paged metadata, before the image is opened (a cache that must know the ranges the open
 * reads): reads the page table SB places from SRC, checks it against meta_checksum, and
 * calls FN for each entry that lies inside the image, stopping at FN's first non-zero
 * return, which it returns. The entries are as the table states them: a page's bytes
 * are checked when the page is loaded. 0 at once without paged metadata; -EUCLEAN: the
 * table does not match its checksum; -ENOMEM, or a read error. */
struct stp_imgsrc;
int stp_image_page_ranges(struct stp_imgsrc *src, const struct stp_superblock *sb,
			  stp_image_range_fn fn, void *ctx);

/* Reads, checks and decodes metadata page PAGE, without keeping it (stipple check). */
int stp_image_check_meta_page(const struct stp_image *img, uint64_t page);
/* Opened verified from an image with content hashes: block BLOCK's content (delta.h)
 * decoded anew and checked against its signed content hash (zeros for a block that is
 * not zstd), for stipple check; one block's buffers held meanwhile. Otherwise 0. -EUCLEAN
 * (reported), -EIO, -ENOMEM. Thread-safe. */
int stp_image_check_content(const struct stp_image *img, uint64_t block);

/* Bytes of decoded metadata pages an image keeps, unless told otherwise
 * (stp_image_set_meta_budget). */
#define STP_IMAGE_META_BUDGET ((size_t)16 << 20)
/* What the metadata page cache did (all 0 unless the metadata is paged). */
struct stp_metapages_stats;
void stp_image_meta_stats(const struct stp_image *img, struct stp_metapages_stats *st);

/* The most a reader of an image with superblock SB holds for its metadata: paged, the
 * page table, BUDGET and the pages threads are loading at once; whole, the stored
 * copy, and the decoded metadata as it grows (twice it while the buffer doubles). */
uint64_t stp_image_meta_memory(const struct stp_superblock *sb, uint64_t budget);
/* Changes that budget. Thread-safe. */
void stp_image_set_meta_budget(const struct stp_image *img, size_t bytes);

/* The walks a mount makes before it goes live (the warming plan; the priming plan's two)
 * visit each record once, and records of one kind lie together: with a cache of
 * STP_IMAGE_WALK_BUDGET at least, each walk loads a page about once, and the files and
 * tree walks of one plan read different tables but the inodes. A layout that makes them
 * load pages over and over (a walk cycling through more pages than the cache holds) is
 * a hostile one. The bound is per plan: a 1 GiB table of 16,384 pages that thrashes is
 * refused after some 50,000 decodes. */
#define STP_IMAGE_WALK_BUDGET ((size_t)4 << 20)
#define STP_IMAGE_WALK_LOADS_PER_PAGE 3u
#define STP_IMAGE_WALK_LOADS_MIN 1024u
/* Paged metadata: bounds the page loads from now on to what one plan's walks need,
 * STP_IMAGE_WALK_LOADS_PER_PAGE for each page of the image and STP_IMAGE_WALK_LOADS_MIN
 * more (on = false lifts the bound; on again re-arms it from the loads so far). Past it
 * reads that need a page fail with -ENOBUFS (stp_metapages_limit_loads);
 * stp_image_meta_stats says how many were refused. Thread-safe. */
void stp_image_bound_walk_loads(const struct stp_image *img, bool on);

/* The block table entry of block BLOCK, and its decoded size. */
int stp_image_block(const struct stp_image *img, uint64_t block, struct stp_blockent *out);
size_t stp_image_block_decoded_size(const struct stp_image *img, uint64_t block);

/* The stored parts of an image are numbered as their signed hashes (stipple(5)):
 * STP_SIG_HASH_META the metadata (paged, its page table), STP_SIG_HASH_DICT the
 * dictionary, STP_SIG_HASH_BLOCK0 + B block B, stp_sig_hash_page(sb, P) metadata page P;
 * stp_sig_nstored(sb) in all. stp_image_read_stored reads part PART into BUF as it lies
 * in the image (not decoded), *LEN bytes (0: an image without a dictionary), and checks
 * it as a read for decoding does: a block's or page's table entry (stp_image_block,
 * stp_image_meta_page), that the bytes lie inside the file, and the bytes against their
 * checksum and, opened verified, their signed hash (for a block the hash alone: it is
 * the stronger). A part checked before is checked again: its bytes are read anew, from a
 * file its owner may have rewritten meanwhile (a read-only descriptor does not stop
 * that), and only the bytes just hashed are vouched for. BUF holds
 * stp_image_stored_max() bytes. Thread-safe. -EINVAL: no such part; -EUCLEAN
 * (reported); -EIO. */
int stp_image_read_stored(const struct stp_image *img, uint64_t part, void *buf, size_t *len);
size_t stp_image_stored_max(const struct stp_image *img);

/* Block BLOCK's stored bytes read into BUF (stp_image_stored_max() bytes) and checked as
 * stp_image_read_stored does, with *BE, the table entry they were read and checked by:
 * with stp_image_decode_stored, for a caller that must copy exactly the bytes it decoded
 * (mkstipple --base). Thread-safe. Errors as stp_image_read_stored. */
int stp_image_read_block(const struct stp_image *img, uint64_t block, void *buf,
			 struct stp_blockent *be);

/* Bytes of a buffer for stp_image_decode_block: a full block and the margin zstd needs to
 * decompress in place (at least 128 KiB more than the block). The same from a superblock
 * alone, for a reader that must bound its memory before it opens the image. */
size_t stp_image_block_buffer_size(const struct stp_image *img);
size_t stp_image_sb_buffer_size(const struct stp_superblock *sb);

/* Whether block entry BE of IMG stores a 32nd of the block or less (a cut of mkstipple
 * --cut-inside: its bytes, then zeros): a decode then reads its stored bytes into memory
 * of their own, not into the end of OUT, which keeps no page past the decoded bytes for a
 * caller to give back (each such give-back was a TLB shootdown across threads). Pure. */
int stp_image_stored_apart(const struct stp_image *img, const struct stp_blockent *be);

/* Reads, checks and decodes block BLOCK into OUT, which holds stp_image_block_buffer_size()
 * bytes: the stored bytes are read into its end (unless stp_image_stored_apart) and decoded
 * in place, so that one buffer is all a decode takes. The decoded bytes start at OUT. Thread-safe (each thread keeps
 * its own decompression context). -EUCLEAN: checksum mismatch (or, opened verified,
 * hash mismatch) or undecodable data,
 * logged with the block number; -EIO: read error; -ENOMEM. */
int stp_image_decode_block(const struct stp_image *img, uint64_t block, void *out);

/* Decodes block BLOCK from STORED, its stored bytes as stp_image_read_block gave them with
 * BE, into OUT (stp_image_block_buffer_size() bytes); STORED is left as it is. Thread-safe.
 * -EUCLEAN: undecodable (logged); -ENOMEM. */
int stp_image_decode_stored(const struct stp_image *img, uint64_t block,
			    const struct stp_blockent *be, const void *stored, void *out);

/* What a decode in pieces tells, from the decoding thread, with CTX. */
struct stp_decode_ops {
	/* The first N bytes are decompressed (N grows from call to call). Without a BCJ
	 * filter they are final in the buffer, and N stays below the block's size (the end
	 * is the decode's return). With one they are still filtered there (later matches
	 * copy from them) and only stp_image_decode_copy gives them; N reaches the size. */
	void (*decoded)(void *ctx, size_t n);
	/* A filtered block only, once decompressed whole: the first N bytes are unfiltered
	 * in place, final in the buffer (N = 0 first; the end is the decode's return), and
	 * the pass changes bytes below CLAIM next: from this call's return until the next,
	 * stp_image_decode_copy may run only for bytes it reads at or past CLAIM. */
	void (*unfiltered)(void *ctx, size_t n, size_t claim);
	/* The caller makes the buffer read as zeros from stp_image_decode_body() on, once
	 * begin returns and before it continues: the decode then stops where the frame's
	 * run of zero blocks begins (the padding of a cut or a stable block), instead of
	 * writing them. */
	bool zero_tail;
};
/* About how often the decode tells (bytes). */
#define STP_DECODE_STEP ((size_t)256 << 10)

/* stp_image_decode_block, telling OPS (CTX) as the decoded bytes become readable, piece
 * by piece, for a compressed block (raw blocks are read whole, OPS are not called). The
 * stored bytes are checked against their checksum, or opened verified their signed hash,
 * before the first piece is decoded, so a damaged block is refused before OPS hear of
 * any byte. Returns as stp_image_decode_block; on an error, the bytes told of came from
 * checked input but the block as a whole is refused. OPS NULL: as
 * stp_image_decode_block. */
int stp_image_decode_block_stream(const struct stp_image *img, uint64_t block, void *out,
				  const struct stp_decode_ops *ops, void *ctx);

/* The same decode in steps, so that the thread that needs the first bytes can decode
 * them itself and leave the rest to another thread. stp_image_decode_begin reads and
 * checks the stored bytes (a block that is not decoded in pieces, as above, is decoded
 * whole here) and makes *D, the caller's to free with stp_image_decode_free (NULL is
 * fine). stp_image_decode_continue decodes until at least the first UNTIL bytes are
 * decompressed and OPS have been told so (SIZE_MAX: to the end, the unfilter included);
 * it returns 1 when bytes are left to decode, 0 once the block is whole, or the decode's
 * error, kept for later calls. One thread at a time may work on a D; it holds a zstd
 * context of its own (about 100 KiB). Errors of begin are those of
 * stp_image_decode_block. */
struct stp_decode;
int stp_image_decode_begin(const struct stp_image *img, uint64_t block, void *out,
			   const struct stp_decode_ops *ops, void *ctx, struct stp_decode **d);
int stp_image_decode_continue(struct stp_decode *d, size_t until);
void stp_image_decode_free(struct stp_decode *d);
/* The bytes of D's block the decode writes: its size, or with ops->zero_tail, where the
 * zero blocks that end its frame begin (a zstd block boundary), when they are half the
 * block or more. The bytes from there on
 * are zeros, but that a filtered block's last 4 bytes before it may carry a call's
 * address past it: the unfilter writes up to STP_DECODE_TAIL_SLACK bytes past it. */
size_t stp_image_decode_body(const struct stp_decode *d);
#define STP_DECODE_TAIL_SLACK ((size_t)16)
/* The filter a reader of D's buffer must see undone, while the decode runs: STP_FILTER_NONE
 * when the bytes told of are final as they lie. */
unsigned stp_image_decode_filter(const struct stp_decode *d);
/* Copies bytes [FROM, FROM + LEN) of D's block, unfiltered, to DST, while the block is
 * still filtered in its buffer: the bytes up to FROM + LEN + 4 (or the block's end) must
 * have been told decoded, and the unfilter in place not have claimed the bytes it reads
 * (from FROM - STP_DECODE_BACK on, or 0). It unfilters a private copy from a
 * point a few bytes before FROM where the filter can start afresh (stp_bcj_restart),
 * so it costs about LEN. Thread-safe against the decode and other copies; 0, -ENOMEM, or
 * -EAGAIN when no such point lies within STP_DECODE_BACK bytes before FROM (bytes dense
 * in x86 call opcodes, unlike machine code): the caller waits for the block instead. */
int stp_image_decode_copy(const struct stp_decode *d, size_t from, size_t len, void *dst);
/* Bytes past FROM + LEN that stp_image_decode_copy reads: the filter's look-ahead. */
#define STP_DECODE_LOOKAHEAD ((size_t)4)
#define STP_DECODE_BACK ((size_t)64 << 10)

/* Type of an inode, as the DT_* of dirent.h. */
unsigned stp_mode_dtype(uint32_t mode);

#endif
