/* SPDX-License-Identifier: MIT */
/*
 * The image source of a URL mount's daemon (and of the monitor's superblock read): byte
 * ranges asked of the fetcher over its channels (fetcher.h), one request per channel at a
 * time, so that as many reads are in flight as there are channels. With a disk cache
 * (diskcache.h) every range the cache can check is looked for there first, and what the
 * fetcher sends is kept there.
 *
 * A range past SIZE reads as STP_IMGSRC_END (imgsrc.h); every other failure is logged
 * (stp_log) naming the URL and the cause and read as -EIO; a
 * channel that breaks (the fetcher gone, no answer within its receive timeout, or no
 * whole answer within the request's deadline: that timeout plus four times LEN at
 * STP_HTTP_WHOLE_FLOOR, however many frames came) is closed and not used again. What it fetched and what the disk cache answered are counted
 * (stp_imgsrc_stats). pread and stats are thread-safe.
 */
#ifndef STP_REMOTE_H
#define STP_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

struct stp_imgsrc;
struct stp_diskcache;

/* A source of SIZE bytes named NAME over the N channels FDS, whose receive timeout is
 * SILENCE_S seconds (stp_fetcher_silence_s; 0: reads without a deadline); with OWN
 * it closes them when it is closed. *out is the caller's (stp_imgsrc_close). */
int stp_remote_open(const int *fds, unsigned n, uint64_t size, unsigned silence_s,
		    const char *name, bool own, struct stp_imgsrc **out);

/* Reads through CACHE (the source's from then on) before asking the fetcher. Call
 * before any thread reads. */
void stp_remote_set_cache(struct stp_imgsrc *src, struct stp_diskcache *cache);

/* Shuts every channel down both ways, for a mount that ended: reads waiting on the
 * fetcher fail at once (EIO), as do later ones, and the fetcher sees its daemon gone
 * (it exits: fetcher.h). Thread-safe. */
void stp_remote_halt(struct stp_imgsrc *src);

#endif
