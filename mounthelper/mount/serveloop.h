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
 * request are then woken with a signal, whose handler the caller has installed without
 * SA_RESTART; no thread is cancelled, so nothing unwinds. stp_serveloop_stop ends the
 * loop the same way, waking only threads that wait for a request.
 *
 * One loop per session, run by one thread.
 */
#ifndef STP_SERVELOOP_H
#define STP_SERVELOOP_H

struct fuse_session;
struct stp_serveloop;

#define STP_SERVELOOP_THREADS 10

/* A loop for SE, whose threads waiting for a request are woken with signal WAKE_SIG (its
 * handler installed without SA_RESTART). Returns 0 and *OUT, or -ENOMEM. Freed with
 * stp_serveloop_free once no thread can stop it any more. */
int stp_serveloop_new(struct fuse_session *se, int wake_sig, struct stp_serveloop **out);

/* Serves the session's requests until it ends; START(ARG), when not NULL, runs once on
 * the loop's own thread while the caller already serves (on the caller, before it
 * serves, if that thread cannot start: workers are then started as libfuse does).
 * Returns 0 when the session ended, or the error that ended it (reading /dev/fuse
 * failed). Once per loop. */
int stp_serveloop_run(struct stp_serveloop *l, void (*start)(void *), void *arg);

/* Ends the loop: the session exits, and every thread waiting for a request is woken
 * (a thread answering one finishes it first). Returns once none waits. Thread-safe,
 * from any thread but not from a signal handler; nothing once the loop is over. */
void stp_serveloop_stop(struct stp_serveloop *l);

/* The same from a signal handler, where no thread can call stp_serveloop_stop: the
 * session exits and the thread that runs the loop is woken, which wakes the others as
 * it leaves. Async-signal-safe. */
void stp_serveloop_stop_async(struct stp_serveloop *l);

void stp_serveloop_free(struct stp_serveloop *l);

#endif
