/* SPDX-License-Identifier: MIT */
/*
 * Where an image's bytes come from: a file or block device here, an HTTP server or the
 * fetcher's channels elsewhere (http.h, mounthelper/mount/remote.h). The image reader
 * (image.h) reads only through this.
 *
 * A source is an object with one operation, a positioned read of exactly LEN bytes. Other
 * kinds embed struct stp_imgsrc as their first member and set its fields. Reads may run
 * from many threads at once: every kind's pread is thread-safe. Functions return 0 or a
 * negative errno.
 */
#ifndef STP_IMGSRC_H
#define STP_IMGSRC_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* What a read returns when the source ends before the bytes asked: for the image reader
 * that means the image is damaged (it names something past the end). No source returns it
 * for a failure to get bytes that are there (an I/O error, the network). */
#define STP_IMGSRC_END (-ENODATA)

/* size of a source that cannot tell (a block device): the image reader then reads the
 * last byte the superblock names to learn whether it is there. */
#define STP_IMGSRC_SIZE_UNKNOWN UINT64_MAX

/* What a network source has done so far (stp_imgsrc_stats). */
struct stp_imgsrc_stats {
	uint64_t requests;    /* HTTP requests sent, retries included */
	uint64_t retries;     /* requests that repeated one that failed but might pass */
	uint64_t failures;    /* reads that failed for good (each an -EIO) */
	uint64_t bytes;       /* bytes fetched from the network for reads that succeeded */
	int disk_cache;       /* 1 when a disk cache is in use */
	uint64_t cache_hits;  /* reads the disk cache answered */
	uint64_t cache_bytes; /* bytes it answered */
	uint64_t cache_rejected; /* ranges it held whose tag did not match (fetched again) */
};

struct stp_imgsrc {
	/* Reads exactly LEN bytes at OFF into BUF: STP_IMGSRC_END when the source ends
	 * before, or another negative errno: a file's read error, or, from a network source,
	 * -EIO for every failure to fetch (the cause logged naming the source). */
	int (*pread)(struct stp_imgsrc *src, void *buf, size_t len, uint64_t off);
	/* Fills *ST (NULL: a local source, nothing to count). Thread-safe. */
	void (*stats)(struct stp_imgsrc *src, struct stp_imgsrc_stats *st);
	/* Frees the source and what it holds (NULL: nothing to free). */
	void (*close)(struct stp_imgsrc *src);
	/* Block BLOCK's content (delta.h: its stored bytes decoded as a zstd frame, its
	 * filter not undone), LEN bytes, rebuilt and checked by the source (a published
	 * image's delta: published.h); -ENOENT when the source has none, and the reader
	 * reads the stored bytes instead. NULL: none ever. Thread-safe. */
	int (*content)(struct stp_imgsrc *src, uint64_t block, void *buf, size_t len);
	uint64_t size;  /* bytes in the source, or STP_IMGSRC_SIZE_UNKNOWN */
	char *name;     /* the path or URL, for messages; owned by the source */
	int fd;         /* a file source's descriptor, else -1 */
};

/* A source reading descriptor FD, which it takes over (closed by stp_imgsrc_close, and
 * on failure). FD must be a regular file or a block device: -EINVAL (logged naming NAME)
 * otherwise. *out is the caller's. */
int stp_imgsrc_open_fd(int fd, const char *name, struct stp_imgsrc **out);

/* The same over a descriptor that stays the caller's, in SRC (the caller's memory, no
 * close needed; stp_imgsrc_close does nothing with it but leave FD open). NAME is
 * borrowed for SRC's life. */
int stp_imgsrc_borrow_fd(struct stp_imgsrc *src, int fd, const char *name);

/* Reads as SRC->pread; LEN 0 reads nothing. */
static inline int stp_imgsrc_read(struct stp_imgsrc *src, void *buf, size_t len, uint64_t off)
{
	return len ? src->pread(src, buf, len, off) : 0;
}

/* What SRC has fetched: 0, or -ENOTSUP for a local source. Thread-safe. */
static inline int stp_imgsrc_stats(struct stp_imgsrc *src, struct stp_imgsrc_stats *st)
{
	if (!src->stats)
		return -ENOTSUP;
	src->stats(src, st);
	return 0;
}

/* Frees SRC (NULL is fine). */
void stp_imgsrc_close(struct stp_imgsrc *src);

/* Whether NAME is a URL this stipple can read from (http:// or https://). */
int stp_imgsrc_is_url(const char *name);

#endif
