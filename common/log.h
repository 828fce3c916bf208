/* SPDX-License-Identifier: MIT */
/*
 * Diagnostics from the library. The library never prints: it hands each message to a
 * handler the program installs (stderr, syslog, or nothing). A damaged image is reported
 * where the damage is found, with the image path and the source file and line.
 *
 * stp_log_set_handler() must be called before other threads use the library;
 * stp_log() is thread-safe.
 */
#ifndef STP_LOG_H
#define STP_LOG_H

#include <errno.h>
#include <stddef.h>

#ifndef EUCLEAN
#define EUCLEAN 117
#endif

enum stp_log_level { STP_LOG_ERR, STP_LOG_WARN, STP_LOG_INFO, STP_LOG_DEBUG };

typedef void (*stp_log_fn)(enum stp_log_level level, const char *msg);

/* NULL discards every message. The default handler writes to stderr. */
void stp_log_set_handler(stp_log_fn fn);
void stp_log(enum stp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Report a damaged image (path, then the reason) and evaluate to -EUCLEAN. */
#define STP_CORRUPT(path, ...) \
	stp_log_corrupt((path), __FILE__, __LINE__, __VA_ARGS__)
int stp_log_corrupt(const char *path, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* MSG as a user should see it: a damage report's "damaged image (FILE:LINE): " loses the
 * source place, kept only when the environment has STIPPLE_DEBUG=1. Returns MSG itself
 * or BUF (LEN bytes) holding the shorter text. Thread-safe. */
const char *stp_log_user_text(const char *msg, char *buf, size_t len);

#endif
