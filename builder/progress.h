/* SPDX-License-Identifier: MIT */
/*
 * The build's progress on a terminal, as mksquashfs and DwarFS show it: the phase (scan,
 * compare, compress, metadata), and for a phase whose total is known the percentage of
 * its bytes, the rate and the time left, redrawn in place on standard error (report.h's
 * status line) at most five times a second. Nothing is drawn unless progress_enable was
 * given 1: the caller enables it only when standard error is a terminal and not -q.
 * Main thread only.
 */
#ifndef MKSTP_PROGRESS_H
#define MKSTP_PROGRESS_H

#include <stdint.h>

void progress_enable(int on);
/* Begins phase NAME over TOTAL bytes (0: not known; the phase counts entries and bytes,
 * or shows its name alone) and draws it at once. */
void progress_phase(const char *name, uint64_t total);
/* DONE bytes of the phase (and ENTRIES, for a phase without a total) are done; drawn
 * when the last drawing is 200 ms old. A phase with a total shows 100% only once DONE
 * reaches it. */
void progress_set(uint64_t done, uint64_t entries);
/* Removes the line: the phases are over (or a message follows). */
void progress_end(void);

#endif
