/* SPDX-License-Identifier: MIT */
/* Messages on standard error, counted, and the status line they interrupt. */
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"

static atomic_uint nerrors, nwarnings;
static atomic_int demoted; /* report_errors_as_warnings */
static int status_shown; /* a status line is on the terminal; under stderr's lock */

/* Removes the status line, with stderr locked by the caller. */
static void clear_status(void)
{
	if (status_shown)
		fputs("\r\033[K", stderr);
	status_shown = 0;
}

static void say(const char *path, const char *fmt, va_list ap)
{
	char text[1024];

	vsnprintf(text, sizeof(text), fmt, ap);
	flockfile(stderr);
	clear_status();
	fputs("mkstipple: ", stderr);
	if (path) {
		stp_escape_put(stderr, path, strlen(path));
		fputs(": ", stderr);
	}
	stp_escape_put(stderr, text, strlen(text));
	fputc('\n', stderr);
	funlockfile(stderr);
}

void report_error(const char *path, const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(atomic_load(&demoted) ? &nwarnings : &nerrors, 1);
	va_start(ap, fmt);
	say(path, fmt, ap);
	va_end(ap);
}

void report_warning(const char *path, const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(&nwarnings, 1);
	va_start(ap, fmt);
	say(path, fmt, ap);
	va_end(ap);
}

int report_errno(const char *path, int err, const char *what)
{
	report_error(path, "%s: %s", what, strerror(err));
	return -err;
}

int report_changed(const char *path)
{
	report_error(path, "changed during the build");
	return -EAGAIN;
}

void report_errors_as_warnings(int on)
{
	atomic_store(&demoted, on);
}

unsigned report_errors(void)
{
	return atomic_load(&nerrors);
}

unsigned report_warnings(void)
{
	return atomic_load(&nwarnings);
}

void report_status(const char *text)
{
	flockfile(stderr);
	clear_status();
	if (text && *text) {
		fputs(text, stderr);
		status_shown = 1;
	}
	fflush(stderr);
	funlockfile(stderr);
}
