/* SPDX-License-Identifier: MIT */
/*
 * Reading an image: open it, look up paths, decode inodes, directory entries, link
 * targets and extended attributes, and decode data blocks.
 *
 * An opened image is immutable: every function taking a const struct stp_image * is
 * thread-safe, and every read of the image is a positioned read of its source (imgsrc.h:
 * a file, or a URL). Records are decoded from the metadata on
 * each call and checked against its bounds; a record that points outside the image is
 * reported (STP_CORRUPT) and gives -EUCLEAN. Functions return 0 or a negative errno.
 */
#ifndef STP_IMAGE_H
#define STP_IMAGE_H

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

const struct stp_superblock *stp_image_sb(const struct stp_image *img);
const char *stp_image_path(const struct stp_image *img);
/* The descriptor of a file source, or -1 (a URL). */
int stp_image_fd(const struct stp_image *img);
/* The source every read goes through (thread-safe to read from; the image's). */
struct stp_imgsrc *stp_image_src(const struct stp_image *img);
uint32_t stp_image_block_size(const struct stp_image *img);
/* Bytes of decoded metadata held in memory. */
size_t stp_image_meta_bytes(const struct stp_image *img);
/* The header of the decoded metadata: the tables' record counts. */
const struct stp_meta_header *stp_image_meta_header(const struct stp_image *img);

/* Inodes are numbered 0 (the root) to inode_count - 1. */
int stp_image_inode(const struct stp_image *img, uint32_t ino, struct stp_inode *out);

/* Entry INDEX (0-based, in name order) of directory DIR. The name is not NUL-terminated:
 * *name points into the image's metadata and lives as long as the image. */
int stp_image_dirent(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		     struct stp_dirent *out, const char **name);
/* Looks NAME (LEN bytes) up in directory DIR by binary search: -ENOENT, -ENOTDIR. */
int stp_image_lookup(const struct stp_image *img, uint32_t dir, const char *name, size_t len,
		     uint32_t *ino);
/* Resolves a slash-separated path from the root without following symlinks: empty
 * components and "." are skipped, ".." goes to the directory's parent (-ENOTDIR after
 * a non-directory). */
int stp_image_resolve(const struct stp_image *img, const char *path, uint32_t *ino);

/* The target of symlink INODE: *target points into the metadata, *len bytes, no NUL. */
int stp_image_readlink(const struct stp_image *img, const struct stp_inode *inode,
		       const char **target, size_t *len);

/* Extended attribute INDEX of INODE; name and value point into the metadata. */
int stp_image_xattr(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		    const char **name, size_t *name_len, const void **value, size_t *value_len);

/* Extent INDEX of regular file INODE, checked to lie inside the data stream. */
int stp_image_extent(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		     struct stp_extent *out);

/* Index of the first extent of INODE that ends after file offset OFF (inode->count when
 * none does): extents are sorted by file offset. */
int stp_image_extent_find(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t off, uint32_t *index);

/* The block table entry of block BLOCK, and its decoded size. */
int stp_image_block(const struct stp_image *img, uint64_t block, struct stp_blockent *out);
size_t stp_image_block_decoded_size(const struct stp_image *img, uint64_t block);

/* Bytes of a buffer for stp_image_decode_block: a full block and the margin zstd needs to
 * decompress in place. */
size_t stp_image_block_buffer_size(const struct stp_image *img);

/* Reads, checks and decodes block BLOCK into OUT, which holds stp_image_block_buffer_size()
 * bytes: the stored bytes are read into its end and decoded in place, so that one buffer
 * is all a decode takes. The decoded bytes start at OUT. Thread-safe (each thread keeps
 * its own decompression context). -EUCLEAN: checksum mismatch (or, opened verified,
 * hash mismatch) or undecodable data,
 * logged with the block number; -EIO: read error; -ENOMEM. */
int stp_image_decode_block(const struct stp_image *img, uint64_t block, void *out);

/* Told, from the decoding thread, that the first N bytes of the block are decoded and
 * final (N grows from call to call and stays below the block's size: the end is the
 * decode's return). */
typedef void (*stp_decode_progress_fn)(void *ctx, size_t n);
/* About how often stp_image_decode_block_stream calls its FN. */
#define STP_DECODE_STEP ((size_t)256 << 10)

/* stp_image_decode_block, telling FN (CTX) as the decoded bytes become final, piece by
 * piece, for a compressed block without BCJ filter of an image not opened verified. The
 * stored bytes are checked against their checksum before the first piece is decoded, so
 * a damaged block is refused before FN hears of any byte. Blocks with a filter, raw
 * blocks and verified images are decoded whole: FN is not called (a filter rewrites
 * bytes that later matches copy from; a signed hash vouches only for the whole block).
 * Returns as stp_image_decode_block; on an error, the bytes FN was told of came from
 * checked input but the block as a whole is refused. FN NULL: as
 * stp_image_decode_block. */
int stp_image_decode_block_stream(const struct stp_image *img, uint64_t block, void *out,
				  stp_decode_progress_fn fn, void *ctx);

/* The same decode in steps, so that the thread that needs the first bytes can decode
 * them itself and leave the rest to another thread. stp_image_decode_begin reads and
 * checks the stored bytes (a block that is not decoded in pieces, as above, is decoded
 * whole here) and makes *D, the caller's to free with stp_image_decode_free (NULL is
 * fine). stp_image_decode_continue decodes until at least the first UNTIL bytes are
 * final and FN has been told so (SIZE_MAX: to the end); it returns 1 when bytes are left
 * to decode, 0 once the block is whole, or the decode's error, kept for later calls. One
 * thread at a time may work on a D; it holds a zstd context of its own (about 100 KiB).
 * Errors of begin are those of stp_image_decode_block. */
struct stp_decode;
int stp_image_decode_begin(const struct stp_image *img, uint64_t block, void *out,
			   stp_decode_progress_fn fn, void *ctx, struct stp_decode **d);
int stp_image_decode_continue(struct stp_decode *d, size_t until);
void stp_image_decode_free(struct stp_decode *d);

/* Type of an inode, as the DT_* of dirent.h. */
unsigned stp_mode_dtype(uint32_t mode);

#endif
