/* SPDX-License-Identifier: MIT */
/*
 * FUSE's request loop, in place of libfuse's fuse_session_loop_mt. The calling thread
 * serves from the first request, and every other thread (the loop's further workers,
 * and what the caller wants started beside the loop) is started by a thread of the
 * loop's own, off the way of requests: libfuse started its first worker before serving
 * and, for the request that found every worker busy, a spare before answering it, two
 * thread starts (a millisecond here) on the way of a new mount's first answer.
 *
 * As libfuse's loop: at most STP_SERVELOOP_THREADS threads serve, a burst of FORGETs
 * starts none, and idle threads stay. The loop ends when the kernel ends the session
 * (the mount is gone: every reader returns at once) or when fuse_session_exit was called
 * and the thread that called it, or a signal, woke a reader. Threads still waiting for a
 * request are then woken with WAKE_SIG, whose handler the caller has installed without
 * SA_RESTART; no thread is cancelled, so nothing unwinds.
 *
 * One loop per session, run by one thread; the functions below return 0 or a negative
 * errno.
 */
#ifndef STP_SERVELOOP_H
#define STP_SERVELOOP_H

struct fuse_session;

#define STP_SERVELOOP_THREADS 10

/* Serves SE's requests until the session ends; START(ARG), when not NULL, runs once on
 * the loop's own thread while the caller already serves (on the caller, before it
 * serves, if that thread cannot start: workers are then started as libfuse does).
 * Returns 0 when the session ended, or the error that ended it (reading /dev/fuse
 * failed). */
int stp_serveloop_run(struct fuse_session *se, int wake_sig, void (*start)(void *), void *arg);

#endif
