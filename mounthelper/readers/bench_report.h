/* SPDX-License-Identifier: MIT */
/*
 * The report of `stipple bench` on standard output: text for people, one JSON object
 * (written by libjansson) for programs, and the list of every read. Single-threaded;
 * called after the workers have ended.
 */
#ifndef STP_BENCH_REPORT_H
#define STP_BENCH_REPORT_H

#include "bench_engine.h"

void bench_print_text(const struct bench *b, const struct bench_summary *s);
/* Returns 0, or -ENOMEM. */
int bench_print_json(const struct bench *b, const struct bench_summary *s);
/* "read THREAD INDEX OFFSET LENGTH CHECKSUM PATH", thread by thread. */
void bench_print_reads(const struct bench *b);

#endif
