/* SPDX-License-Identifier: MIT */
/*
 * The daemon's background threads (warming's decoders, the filler) one step below an
 * inherited realtime priority. A daemon inherits its scheduling from whoever mounted:
 * under `chrt -f`, or a service with a realtime CPUSchedulingPolicy, all its threads are
 * SCHED_FIFO at one priority, and such threads never preempt one another. A whole
 * block's decode would then hold a CPU against the application it warms for, and against
 * the request threads that answer it (on two CPUs, priming's lookups waited 0.17 s
 * behind two decoders). One priority lower, they give way to both (to the application
 * when it runs at the mount's priority), and still to nothing of the normal policy:
 * warming stays ahead of a launch on a busy machine. The request threads keep the
 * inherited priority.
 *
 * Acts on the calling thread only; thread-safe.
 */
#ifndef STP_BGSCHED_H
#define STP_BGSCHED_H

/* A background thread starts: names itself NAME (at most 15 bytes; /proc's comm, for
 * whoever looks at the daemon) and, under SCHED_FIFO or SCHED_RR, lowers its priority by
 * one, or leaves for SCHED_OTHER (its nice value kept) from the lowest priority, 1. Any
 * other policy (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE) is kept. Returns 0, or the
 * kernel's negative errno: the thread then runs on as it was. */
int stp_bgsched_enter(const char *name);

#endif
