/* SPDX-License-Identifier: MIT */
/*
 * mkstipple's one way to speak on standard error. Every message is one line,
 * "mkstipple: PATH: MESSAGE" (or "mkstipple: MESSAGE" without a path), with PATH and
 * MESSAGE escaped (escape.h): names come from whoever made the tree or the archive, and
 * are never written raw. Errors and warnings are counted apart, so that the build can
 * report every problem in one pass and decide its exit status at the end. A status line
 * (progress) may be drawn in place; a message clears it first, and it is drawn again by
 * the next report_status.
 *
 * All functions are thread-safe. MESSAGE is cut at 1023 bytes. Nothing is allocated.
 */
#ifndef MKSTP_REPORT_H
#define MKSTP_REPORT_H

/* Prints an error about PATH (NULL: none) and counts it. */
void report_error(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints a warning about PATH (NULL: none) and counts it: the build goes on. */
void report_warning(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prints "PATH: WHAT: <ERR's text>" as an error; returns -ERR. */
int report_errno(const char *path, int err, const char *what);
/* Prints "PATH: changed during the build" as an error; returns -EAGAIN. */
int report_changed(const char *path);
/* While ON, report_error (and so report_errno, report_changed) counts a warning, not an
 * error: --ignore-failed-read leaves out what cannot be read, with a warning. */
void report_errors_as_warnings(int on);
/* Errors and warnings printed so far. */
unsigned report_errors(void);
unsigned report_warnings(void);
/* Draws TEXT (not escaped: the caller's own words and figures) as the status line on
 * standard error, in place of the one before; NULL or "" removes it. The caller draws
 * one only when standard error is a terminal. */
void report_status(const char *text);

#endif
