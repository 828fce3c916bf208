/* SPDX-License-Identifier: MIT */
/*
 * What the monitor prints. It goes to root's terminal and carries paths and names that
 * others chose (the image's, the daemon's text): every line is escaped (escape.h) and
 * prefixed with the front end's name. errno is kept across each call.
 *
 * Called from the monitor's one thread; not thread-safe.
 */
#ifndef STP_MONLOG_H
#define STP_MONLOG_H

#include <stdbool.h>
#include <stddef.h>

struct stp_mount_opts;

/* "PROG: " and FMT formatted, escaped, as one line on stderr. */
void stp_monlog_say(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The library's messages (stp_log) go out the same way, prefixed with PROG, which must
 * outlive the process's use of the library. */
void stp_monlog_route(const char *prog);

/* From stp_monlog_hold to stp_monlog_release, the library's messages are held back (the
 * first four; any more go out as they come), then printed, or dropped when DROP: the
 * caller said the same better (a file that is not an image, named for what it is). */
void stp_monlog_hold(void);
void stp_monlog_release(bool drop);

/* IMAGE as messages name it: a URL as fsname shows it, without userinfo, query and
 * fragment, which may carry credentials; a file as the caller wrote it. */
const char *stp_monlog_image(const struct stp_mount_opts *o);

/* Why the superblock of O's image could not be had: ERR from reading it (none when 0). */
void stp_monlog_unreadable(const char *prog, const struct stp_mount_opts *o, int err);

/* A line the daemon sent (it starts with the program's name, which the daemon wrote, and
 * may carry bytes of the image), escaped. At most 16 KiB of them in all, a line cut (and
 * ended "...") where the budget runs out: a daemon made to chatter must not hold
 * mount(8) up on a slow terminal. */
void stp_monlog_daemon(const char *text, size_t len);

/* The daemon's reason for failing (FAILED), the same way, from a budget of its own (4 KiB):
 * however much it said before, why the mount failed is printed. */
void stp_monlog_daemon_failed(const char *text, size_t len);

#endif
