/* SPDX-License-Identifier: MIT */
/*
 * The directory `stipple publish` writes (stipple(5), PUBLISHED INDEX): block files
 * DIR/blocks/HH/H64, shared by every image published there, and indexes DIR/NAME.stp.
 *
 * Every name below DIR is reached from DIR's descriptor one component at a time with
 * O_NOFOLLOW: a symbolic link (or anything but a directory or regular file) planted
 * under DIR by whoever may write there is refused, never followed. A file is written
 * under a temporary name beside its final one (NAME.tmp.XXXXXX), synced, given mode
 * 0644 whatever the umask, and renamed into place; the directories made are 0755. A
 * failure, or SIGINT, SIGTERM, SIGHUP or SIGQUIT meanwhile, removes the temporary file,
 * so nothing incomplete is ever under a final name.
 *
 * Nothing is printed: functions return 0 or a negative errno, and on failure set
 * err_path (what failed, relative to DIR) and err_why (the step; with err_refused, the
 * whole reason, the errno adding nothing) for the caller's message. One store per
 * process (the signal handler removes its temporary file); not thread-safe.
 */
#ifndef STP_PUBSTORE_H
#define STP_PUBSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pubindex.h"

#define STP_PUBSTORE_FANOUT 256

struct stp_pubstore {
	int dirfd;                         /* DIR */
	int blocksfd;                      /* DIR/blocks */
	int fanfd[STP_PUBSTORE_FANOUT];    /* DIR/blocks/HH, opened as needed; -1 until */
	char err_path[STP_PUBINDEX_NAME_MAX + 16];
	const char *err_why;
	int err_refused;
};

/* What stp_pubstore_put_block found. */
enum stp_pubstore_put {
	STP_PUBSTORE_WRITTEN,  /* the file was missing and is now written */
	STP_PUBSTORE_PRESENT,  /* a file was there and its bytes hash to its name: kept */
	STP_PUBSTORE_REPLACED, /* a file was there with other bytes: written over */
};

/* Opens DIR (made, 0755, when missing: not its parents) and DIR/blocks (made too). */
int stp_pubstore_open(struct stp_pubstore *s, const char *dir);

/* Puts the LEN bytes at BUF, whose SHA-256 is SHA, at blocks/HH/H64 unless a regular file
 * there already holds bytes that hash to SHA. SCRATCH holds LEN bytes (an existing
 * file is read into it). *HOW says which. */
int stp_pubstore_put_block(struct stp_pubstore *s, const uint8_t sha[STP_PUBINDEX_HASH_LEN],
			   const void *buf, size_t len, void *scratch, enum stp_pubstore_put *how);

/* Syncs every block directory written to, so that the blocks last before an index that
 * names them is renamed into place. */
int stp_pubstore_sync_blocks(struct stp_pubstore *s);

/* Writes the LEN bytes at BUF as DIR/NAME (a single component), then syncs DIR. */
int stp_pubstore_put_file(struct stp_pubstore *s, const char *name, const void *buf,
			  size_t len);

/* Whether DIR/NAME is the file of device DEV and inode INO (not following a link). */
int stp_pubstore_is(const struct stp_pubstore *s, const char *name, dev_t dev, ino_t ino);

/* Closes the descriptors. Safe after a failed open. */
void stp_pubstore_close(struct stp_pubstore *s);

#endif
