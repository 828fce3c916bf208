/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_stderr(enum stp_log_level level, const char *msg)
{
	(void)level;
	fprintf(stderr, "%s\n", msg);
}

static stp_log_fn handler = log_stderr;

void stp_log_set_handler(stp_log_fn fn) { handler = fn; }

static void log_va(enum stp_log_level level, const char *prefix, const char *fmt, va_list ap)
{
	char msg[1024];
	int n = 0;

	if (!handler)
		return;
	if (prefix)
		n = snprintf(msg, sizeof(msg), "%s", prefix);
	if (n < 0 || (size_t)n >= sizeof(msg))
		n = 0;
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	handler(level, msg);
}

void stp_log(enum stp_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(level, NULL, fmt, ap);
	va_end(ap);
}

int stp_log_corrupt(const char *path, const char *file, int line, const char *fmt, ...)
{
	char prefix[512];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "%s: damaged image (%s:%d): ", path ? path : "?", file, line);
	va_start(ap, fmt);
	log_va(STP_LOG_ERR, prefix, fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

const char *stp_log_user_text(const char *msg, char *buf, size_t len)
{
	const char *debug = getenv("STIPPLE_DEBUG");
	const char *p = strstr(msg, "damaged image (");
	const char *q = p ? strstr(p, "): ") : NULL;

	if ((debug && !strcmp(debug, "1")) || !q)
		return msg;
	snprintf(buf, len, "%.*s%s", (int)(p - msg) + 13, msg, q + 1);
	return buf;
}
