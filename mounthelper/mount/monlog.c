/* SPDX-License-Identifier: MIT */
/* What the monitor prints (monlog.h). */
#include "monlog.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "format.h"
#include "log.h"
#include "mountopts.h"
#include "util.h"

static const char *log_prog; /* set once, before any thread */

/* What the monitor prints goes to root's terminal, and carries paths and names that
 * others chose (the image's, the daemon's text): every line is escaped (escape.h). */
static void put_line(const char *prog, const char *text, size_t len)
{
	int saved = errno;

	stp_escape_put(stderr, prog, strlen(prog));
	fputs(": ", stderr);
	stp_escape_put(stderr, text, len);
	fputc('\n', stderr);
	errno = saved;
}

void stp_monlog_say(const char *prog, const char *fmt, ...)
{
	int saved = errno, n;
	char *msg;
	va_list ap;

	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		put_line(prog, "(message lost: out of memory)", 29);
	} else {
		put_line(prog, msg, (size_t)n);
		free(msg);
	}
	errno = saved;
}

/* The library's lines held back (stp_monlog_hold): a few, each cut to a line's worth. */
#define HELD_MAX 4
static struct {
	bool on;
	unsigned n;
	char line[HELD_MAX][1024];
} held;

static void log_prefixed(enum stp_log_level level, const char *msg)
{
	char buf[STP_LINK_MAX + 1024];

	msg = stp_log_user_text(msg, buf, sizeof(buf));
	if (held.on && held.n < HELD_MAX)
		snprintf(held.line[held.n++], sizeof(held.line[0]), "%s", msg);
	else
		put_line(log_prog, msg, strlen(msg));
}

void stp_monlog_hold(void)
{
	held.on = true;
	held.n = 0;
}

void stp_monlog_release(bool drop)
{
	for (unsigned i = 0; !drop && i < held.n; i++)
		put_line(log_prog, held.line[i], strlen(held.line[i]));
	held.on = false;
	held.n = 0;
}

void stp_monlog_route(const char *prog)
{
	log_prog = prog;
	stp_log_set_handler(log_prefixed);
}

const char *stp_monlog_image(const struct stp_mount_opts *o)
{
	return o->is_url && o->image_path ? o->image_path : o->image;
}

/* What the daemon may say before the mount is live, all messages together: a daemon
 * made to chatter must not hold mount(8) up on a slow terminal. Its reason for failing
 * has a budget of its own, which chatter cannot spend. */
#define LOG_MAX (16u << 10)
#define FAILED_MAX (4u << 10)

/* A line of the daemon's, cut to what is left of the budget MAX (*SAID spent). */
static void put_daemon_line(const char *s, size_t len, size_t *said, size_t max)
{
	bool cut;

	if (*said >= max)
		return;
	cut = len > max - *said;
	if (cut)
		len = max - *said;
	*said += len;
	stp_escape_put(stderr, s, len);
	fputs(cut ? "...\n" : "\n", stderr);
}

void stp_monlog_daemon(const char *s, size_t len)
{
	static size_t said;

	put_daemon_line(s, len, &said, LOG_MAX);
}

void stp_monlog_daemon_failed(const char *s, size_t len)
{
	static size_t said;

	put_daemon_line(s, len, &said, FAILED_MAX);
}

void stp_monlog_unreadable(const char *prog, const struct stp_mount_opts *o, int err)
{
	const char *image = stp_monlog_image(o);

	if (err == -EUCLEAN)
		return; /* the library's report named the image and the cause: one line */
	if (err == -EPROTONOSUPPORT)
		stp_monlog_say(prog, "%s: made by a newer stipple (unsupported format)", image);
	else if (err)
		stp_monlog_say(prog, "%s: %s", image, stp_strerror(err));
}
