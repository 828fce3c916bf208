/* SPDX-License-Identifier: MIT */
/*
 * The disk cache of URL mounts: one sparse file per image in the cache directory, named
 * by the image's identity (the SHA-256 of its superblock, its size and the server's
 * validator), holding fetched ranges at their offsets in the image. A later mount of the
 * same image reads them back; a changed image has another name and is never mixed.
 *
 * Nothing in the file is trusted: a range is used only when its checksum (the block
 * table's, the superblock's for the metadata and the dictionary) matches, so a torn write,
 * a crash, a hole punched by another mount or a file changed behind our back makes a miss
 * and the range is fetched again. Several mounts of one image share the file: each holds
 * a shared lock (flock) on it, writes only checked bytes (the same bytes, whoever writes
 * them), and a file is removed only under an exclusive lock, so never while in use.
 *
 * The monitor opens the file (stp_diskcache_open_file: privileged, before the daemon is
 * forked; the directory's least recently used files beyond the size bound are removed
 * then); the confined daemon reads and writes it through the descriptor
 * (stp_diskcache_new and the rest), punching out its least recently used ranges when the
 * file holds more than the bound. Functions return 0 or a negative errno.
 */
#ifndef STP_DISKCACHE_H
#define STP_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>

#define STP_DISKCACHE_SIZE_DEFAULT (1ull << 30)

struct stp_diskcache;

/* The default directory: /var/cache/stipple for root, $XDG_CACHE_HOME/stipple (or
 * ~/.cache/stipple) for a user. A new string, or NULL (no home: no cache). */
char *stp_diskcache_default_dir(void);

/* Opens (creating DIR and the file as needed) the cache file of the image whose identity
 * is KEY, sized for IMAGE_SIZE bytes (the superblock's), after removing the least
 * recently used other files of DIR until the rest fits in LIMIT bytes. *FD is the
 * caller's. Errors are printed on stderr after PROG: a mount goes on without a cache. */
int stp_diskcache_open_file(const char *dir, const uint8_t key[32], uint64_t image_size,
			    uint64_t limit, const char *prog, int *fd);

/* The identity of an image: RAW_SB (the superblock's bytes), SIZE, VALIDATOR. 0 or
 * -ENOMEM. */
int stp_diskcache_key(const uint8_t *raw_sb, size_t sb_len, uint64_t size,
		      const char *validator, uint8_t key[32]);

/* The daemon's side, on FD (taken over), keeping at most LIMIT bytes in it. */
int stp_diskcache_new(int fd, uint64_t limit, struct stp_diskcache **out);
void stp_diskcache_free(struct stp_diskcache *c);

/* A range the cache may hold: LEN bytes at OFF whose checksum (stp_checksum) is SUM.
 * Ranges are added before any thread reads (not thread-safe); others are never cached. */
int stp_diskcache_expect(struct stp_diskcache *c, uint64_t off, uint64_t len, uint64_t sum);
/* Sorts what was added: call once after the last stp_diskcache_expect of a batch. */
void stp_diskcache_ready(struct stp_diskcache *c);

/* The LEN bytes at OFF from the file, when they are an expected range and check: 0, else
 * -ENOENT (a miss). Thread-safe. */
int stp_diskcache_get(struct stp_diskcache *c, void *buf, size_t len, uint64_t off);
/* Keeps BUF, when it is an expected range and checks. Thread-safe; failures only cost a
 * later fetch. */
void stp_diskcache_put(struct stp_diskcache *c, const void *buf, size_t len, uint64_t off);

#endif
