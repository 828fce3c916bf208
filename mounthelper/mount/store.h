/* SPDX-License-Identifier: MIT */
/*
 * The store of published images' blocks (published.h): one per owner, shared by every
 * image and release that owner mounts. It is the disk cache's directory (diskcache.h:
 * cache_dir=, /var/cache/stipple for root, ~/.cache/stipple for a user), checked the same
 * way, and below it blocks/HH/H64: each block once, under the SHA-256 of its stored
 * bytes, in a private file (0600, one link, the owner's; any other is replaced) in a
 * private fan-out directory HH, the first byte of SHA-256(key, H64) with the store's
 * random key (blocks/fanout.key, made with it): a publisher, who chooses the hashes,
 * cannot choose the directories. A block of release 1.2 is the same file for 1.3.
 * A store laid out before the key (HH the hash's first byte) is listed whole once and
 * its files out of place removed when no mount holds them.
 *
 * Nothing in it is trusted: the fetcher checks a block read back from its file against
 * its hash (a file that does not match is passed over and its block fetched), so neither a
 * torn write nor an edit serves a wrong byte. A file that holds bytes is handed read-only
 * (another mount may be serving it), an empty one read-write (unless an earlier live
 * mount was), and no more of those than the room the ledger leaves below cache_size=
 * holds of files as large as the fetcher may write (its RLIMIT_FSIZE, which it lowers to
 * its index's largest block before HELLO and cannot raise again;
 * stp_store_writable_max): ROOM binds a fetcher that obeys it, this one a fetcher that
 * does not, and the mount is charged the larger of the two. A fetcher turned hostile
 * cannot so take the store past cache_size= (and a file system block a file), however
 * many mounts run at once; one that did not lower its limit gets no writable file.
 *
 * Which blocks live mounts use: each mount holds a shared flock on each of its blocks'
 * files, through the descriptors the fetcher keeps for the mount's life (a lock that
 * ends with the process that holds it, however it ends: no pin file to clean up). The
 * store is trimmed to LIMIT bytes at each mount, least recently mounted blocks first
 * (a file's mtime: set when a mount takes it, or when a block is written), and a file is
 * removed only when an exclusive flock is had at once, so never while a mount uses it.
 * The store's bytes are kept in a ledger (blocks/ledger, under the lock): each fan-out
 * directory's as last listed, less what was removed since, and for each live mount the
 * ROOM it was told and the files it was handed writable, charged until its fetcher has
 * ended (its pid and start time) or none of those files is held, and then counted in
 * their directories. ROOM is LIMIT less the
 * ledger's total, so mounts at once share LIMIT. A trim lists only part of a large
 * store: fan-out directories from one picked at random until it has seen 1024 files
 * (each a fair 256th of the store, the fan-out being keyed), correcting their counts;
 * it removes from them their share of the ledger's excess, and lists more only while the
 * store is still over LIMIT. A store without a ledger is listed whole once.
 * Taking files and trimming both run under the blocks directory's exclusive flock, so a
 * file is never removed between a mount's open and its lock. A mount writes into the
 * store only the bytes LIMIT leaves after its trim (ROOM, fetcher.h): blocks past them
 * are fetched each time.
 *
 * The monitor runs this, privileged as the mounting user (each such call is monitor.c's:
 * this file decides, monitor.c acts), once it has checked the
 * superblock and the mount's budget (fetcher.h): an image refused leaves no file. A mount
 * makes no more files than cache_size= can hold, and pins no more than five a block of
 * its image (stp_store_files_max: the block, its delta, its rebuilt content, two
 * bases); the fetcher never learns a path. Not thread-safe.
 */
#ifndef STP_STORE_H
#define STP_STORE_H

#include <stdint.h>
#include <sys/types.h>

struct stp_superblock;

/* The blocks a mount of the image of SB may take files for when its fetcher offers
 * OFFERED: no more than the image has, with a delta file, its rebuilt content and two
 * bases a block at most (from the superblock's count, which the budget checked, whatever the index claims),
 * nor than STP_FETCH_STORE_MAX. A base (a batch with BASES set, fetcher.h) is handed
 * read-only, and only when its file holds bytes. Of those, the
 * files it makes are bounded by cache_size= (stp_store_writable_max); the ones it only
 * pins already hold a block, and the store's bound bounds them. */
uint64_t stp_store_files_max(const struct stp_superblock *sb, uint64_t offered);

/* The read-write files a mount may hold in a store of LIMIT bytes when its fetcher may
 * write files of FILE_MAX bytes (stp_fetcher_file_max): together they hold LIMIT at most. */
uint64_t stp_store_writable_max(uint64_t limit, uint64_t file_max);

/* Answers the fetcher on CTL: for each batch of hashes of the OFFERED blocks it offers,
 * the block files in DIR's store, opened or made (stp_store_writable_max of LIMIT and
 * FILE_MAX) and locked shared, for the first stp_store_files_max(SB, OFFERED) of them
 * (the batch that reaches it says stop);
 * then trims the store to LIMIT bytes, and tells the fetcher the room left (ROOM).
 * Errors are printed on stderr after PROG (the mount goes on without a store); the
 * fetcher's batches are checked (stp_fetch_blocks_check) and a bad one ends the
 * exchange. FETCHER is the fetcher's pid (0: not known): once that process has ended,
 * its mount writes no more and its charge ends, whatever later mounts pin of its files.
 * Returns 0 or a negative errno. CTL stays the caller's. */
int stp_store_attach(const char *dir, uint64_t limit, const char *prog, int ctl,
		     const struct stp_superblock *sb, uint64_t offered, uint64_t file_max,
		     pid_t fetcher);

/* The bytes of unmarked files (store.c: junk a fetcher turned hostile may have written)
 * one mount hashes at most before it is live, past the first file: the rest are handed
 * unchecked, read-only like any file holding bytes, and the fetcher checks each against
 * its hash before use; later mounts hash them in turn (the ones found sound are marked).
 * A mount after one that wrote many files (a release's rebuilt contents, 32 MiB each; an
 * old release's blocks, which a new one takes as bases) so waits for about one block's
 * hash, not for all of them. No budget where files cannot be marked (no user xattrs):
 * each mount would hash the same first files and never reach the others. */
#define STP_STORE_HASH_BUDGET (32ull << 20)

/* Trims the store below DIRFD (the blocks directory) to LIMIT bytes as said above, its
 * key made and its ledger kept; files in use are kept, empty files no mount holds are
 * removed from every directory listed, however many there are. Returns the bytes the
 * ledger says the store holds (LIMIT when it could not tell). The caller holds the
 * directory's lock. Exposed for tests. */
uint64_t stp_store_trim(int dirfd, uint64_t limit);

#endif
