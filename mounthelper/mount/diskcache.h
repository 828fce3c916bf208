/* SPDX-License-Identifier: MIT */
/*
 * The disk cache of URL mounts: one sparse file per image in the cache directory, named
 * by a keyed hash of the image's identity (its URL without credentials or query, the
 * superblock's bytes, the size and the server's validator), holding fetched ranges at
 * their offsets in the image, then one tag per range. A later mount of the same image
 * from the same URL reads them back; another URL or a changed image has another name.
 *
 * The directory is its owner's alone: created 0700, and used only when it is a directory
 * (not a symbolic link) that the mounting user owns and no one else may write. It holds
 * a secret of 32 random bytes (file "secret", 0600, created O_EXCL) that keys both the
 * names and the tags, so that neither a server nor another user can choose what a file
 * is taken for. A cache file is used only when it is a regular file that the mounting
 * user owns, mode 0600, with a single link; any other is removed and made anew.
 *
 * Nothing in the file is taken on trust: a range is stored only when its checksum (the
 * block table's, the superblock's for the metadata and the dictionary) matches, with its
 * tag, HMAC-SHA256 under a key derived from the secret for this file over its offset,
 * length and bytes; it is served only when the tag matches again, so that bytes changed
 * on disk (a torn write, a crash, a hole punched by another mount, someone's edits) make
 * a miss, counted, and the range is fetched again. Several mounts of one image share the
 * file: each holds a shared lock (flock) on it, writes only checked bytes, and a file is
 * removed only under an exclusive lock, so never while in use.
 *
 * The monitor opens the file (stp_diskcache_open_file: privileged, before the daemon is
 * forked; the secret is read there, the daemon gets only the file's tag key; the
 * directory's least recently used files beyond the size bound are removed then); the
 * confined daemon reads and writes it through the descriptor (stp_diskcache_new and the
 * rest), punching out its least recently used ranges when the file holds more than the
 * bound. Functions return 0 or a negative errno.
 */
#ifndef STP_DISKCACHE_H
#define STP_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STP_DISKCACHE_SIZE_DEFAULT (1ull << 30)
#define STP_DISKCACHE_TAG 32u

struct stp_diskcache;
struct stp_superblock;

/* What the monitor hands the daemon (a copy at the fork): the open file, where its tags
 * begin, how many it has room for, and their key. */
struct stp_diskcache_file {
	int fd;                 /* -1: no disk cache */
	uint64_t tags_at;       /* after the image's bytes, 4 KiB aligned */
	uint64_t slots;
	uint8_t tag_key[32];
};

/* The identity of an image at a URL. */
struct stp_diskcache_id {
	const char *url;        /* without userinfo, query or fragment */
	const uint8_t *raw_sb;  /* the superblock's bytes, as fetched */
	size_t sb_len;
	const struct stp_superblock *sb; /* the same, decoded and checked */
	uint64_t size;          /* of the file at the URL */
	const char *validator;  /* ETag or Last-Modified, "" without */
};

/* The default directory: /var/cache/stipple for root, $XDG_CACHE_HOME/stipple (or
 * ~/.cache/stipple) for a user. A new string, or NULL (no home: no cache). */
char *stp_diskcache_default_dir(void);

/* Opens (creating DIR, its secret and the file as needed, and checking each) the cache
 * file of the image ID, after removing the least recently used other files of DIR until
 * the rest fits in LIMIT bytes. OUT->fd is the caller's. Errors are printed on stderr
 * after PROG: a mount goes on without a cache (OUT->fd -1). */
int stp_diskcache_open_file(const char *dir, const struct stp_diskcache_id *id, uint64_t limit,
			    const char *prog, struct stp_diskcache_file *out);

/* The hardened pieces the store of published blocks (store.h) is built on, for the
 * monitor. DIR (made as mkdir -p, 0700) opened as OUT when it is a directory, not a
 * symbolic link, owned by the mounting user and writable by no one else: 0, -ENOTDIR,
 * -EPERM or another negative errno. */
int stp_diskcache_open_dir(const char *dir, int *out);
/* NAME beneath DIRFD opened with FLAGS (never following a link) when it is a regular
 * file the mounting user owns, mode 0600, one link; else removed and made anew O_EXCL
 * (*MADE). The descriptor, or a negative errno. */
int stp_diskcache_open_private(int dirfd, const char *name, int flags, bool *made);
/* Words for stp_diskcache_open_dir's errors. */
const char *stp_diskcache_dir_error(int err);

/* The name (hex, then ".cache") and the tag key of image ID's file under SECRET. 0, or
 * -ENOMEM / -EIO (OpenSSL). */
int stp_diskcache_key(const uint8_t secret[32], const struct stp_diskcache_id *id,
		      char name[72], uint8_t tag_key[32]);

/* The largest size F's file reaches: what RLIMIT_FSIZE may allow the daemon. */
static inline uint64_t stp_diskcache_file_size(const struct stp_diskcache_file *f)
{
	return f->tags_at + f->slots * STP_DISKCACHE_TAG;
}

/* The daemon's side, on F->fd (taken over, closed on failure too), keeping at most LIMIT
 * bytes of ranges in it. Confined, it opens no file: OpenSSL's set-up (configuration,
 * providers) was done by the monitor's stp_diskcache_open_file before the fork. */
int stp_diskcache_new(const struct stp_diskcache_file *f, uint64_t limit,
		      struct stp_diskcache **out);
void stp_diskcache_free(struct stp_diskcache *c);

/* A range the cache may hold: LEN bytes at OFF whose checksum (stp_checksum) is SUM.
 * Ranges are added before any thread reads (not thread-safe); others are never cached,
 * nor are ranges past the image's bytes or beyond the file's room for tags. */
int stp_diskcache_expect(struct stp_diskcache *c, uint64_t off, uint64_t len, uint64_t sum);
/* Sorts what was added: call once after the last stp_diskcache_expect of a batch. */
void stp_diskcache_ready(struct stp_diskcache *c);

/* The LEN bytes at OFF from the file, when they are an expected range and its tag
 * matches: 0, else -ENOENT (a miss). Thread-safe. */
int stp_diskcache_get(struct stp_diskcache *c, void *buf, size_t len, uint64_t off);
/* Keeps BUF, when it is an expected range and checks. Thread-safe; failures only cost a
 * later fetch. */
void stp_diskcache_put(struct stp_diskcache *c, const void *buf, size_t len, uint64_t off);
/* Ranges found in the file whose tag did not match (each then fetched). Thread-safe. */
uint64_t stp_diskcache_rejected(struct stp_diskcache *c);

#endif
