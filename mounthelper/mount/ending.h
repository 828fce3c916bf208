/* SPDX-License-Identifier: MIT */
/*
 * How a mount ends on SIGINT, SIGTERM or SIGHUP. libfuse's own handlers end the loop at
 * once; but a warming worker may then be waiting in the kernel to store a page that a
 * read in flight holds locked, a read only the loop can answer: the worker, the daemon
 * and the host's umount would wait for ever. So the handlers only wake a thread of ours,
 * which stops warming and filling (their stores wait in the same way) while the loop still
 * answers requests, and then ends the loop. Where that thread cannot start, the handlers
 * end the loop themselves (stp_serveloop_stop_async), as libfuse's would, with the same
 * window: a signal taken just before the loop's thread enters its read ends the loop at
 * the next request.
 *
 * The handlers run on the thread that calls stp_ending_install and then serves (the loop's
 * caller): every other thread of the daemon blocks these signals
 * (stp_thread_create_blocked), so nothing else runs while they read the loop.
 *
 * One per process, for the daemon: stp_ending_install before the sandbox (it needs a
 * pipe and the handlers), stp_ending_start once confined, stp_ending_finish after the
 * loop. Not thread-safe beyond that order. Functions return 0 or a negative errno.
 */
#ifndef STP_ENDING_H
#define STP_ENDING_H

#include <stdbool.h>

struct fuse_session;
struct stp_serveloop;
struct stp_warmer;
struct stp_filler;

/* The pipe the handlers write to, and the handlers, with their signals unblocked in the
 * calling thread whatever mask the process inherited. *FDS gets the pipe's two ends,
 * which the sandbox must keep. */
int stp_ending_install(int fds[2]);

/* Starts the thread that, on a signal, halts WARMER and FILLER (NULL is fine) and stops
 * LOOP, SE's running loop, which must outlive stp_ending_finish. When the thread cannot
 * start, the error is returned and the handlers stop LOOP themselves, at once. */
int stp_ending_start(struct fuse_session *se, struct stp_warmer *warmer,
		     struct stp_filler *filler, struct stp_serveloop *loop);

/* Before stp_ending_start: FN(ARG) is called from the thread once the host unmounted
 * (the kernel ended the FUSE connection), or a signal ended the mount (before warming
 * and filling are halted), while the loop may still wait for its requests' handlers: so
 * that one waiting on something that never comes (a fetcher stuck in a transfer) can be
 * made to give up. */
void stp_ending_on_unmount(void (*fn)(void *), void *arg);

/* After the loop: stops the thread; true when a signal ended the mount (the mount is
 * still there), false when the host unmounted it. */
bool stp_ending_finish(void);

#endif
