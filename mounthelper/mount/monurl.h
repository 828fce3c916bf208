/* SPDX-License-Identifier: MIT */
/*
 * A URL mount, on the monitor's side once its fetcher has answered (fetcher.h; the
 * monitor spawns it): the superblock read over the fetcher's first channel, the disk
 * cache file opened (the daemon cannot open it later), and for a published image its
 * blocks' files in the store handed to the fetcher. The file calls on the caller's cache
 * folder are cachedir.c's and store.c's, through m->checks (mount.stipple-checked only).
 *
 * Called from the monitor's one thread; not thread-safe.
 */
#ifndef STP_MONURL_H
#define STP_MONURL_H

struct stp_mon;

/* m->sb from the fetcher, checked, and m->h.cache opened unless -f, cache_size=0 or a
 * published image (it has the store). 0, or a negative errno with the reason said. */
int stp_monurl_open(struct stp_mon *m);

/* A published image that passed the checks: the store, unless -f or cache_size=0, then
 * the control socket closed (the fetcher goes on without). */
void stp_monurl_attach_store(struct stp_mon *m);

#endif
