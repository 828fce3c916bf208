/* SPDX-License-Identifier: MIT */
/* What is mounted where (mountinfo.h): the kernel's table, read line by line. */
#include "mountinfo.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "optstr.h"

/* The next field of *LINE, ended by one space (the kernel's separator) or the line's
 * end, NUL-terminated in place; NULL when the line has ended. */
static char *field(char **line)
{
	char *f = *line;

	if (!f)
		return NULL;
	*line = strchr(f, ' ');
	if (*line)
		*(*line)++ = '\0';
	return f;
}

#define DIGITS "0123456789"

static bool octal(char c)
{
	return c >= '0' && c <= '7';
}

/* Undoes, in place, the kernel's \ooo escapes (of space, tab, newline and backslash);
 * any other backslash stays, as libmount leaves it. */
static char *unescape(char *s)
{
	char *d = s;

	for (const char *p = s; *p;) {
		if (p[0] == '\\' && octal(p[1]) && octal(p[2]) && octal(p[3])) {
			*d++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 4;
		} else {
			*d++ = *p++;
		}
	}
	*d = '\0';
	return s;
}

/* Whether S is made of SET's characters, and not empty. */
static bool only(const char *s, const char *set)
{
	return *s && strspn(s, set) == strlen(s);
}

/* ID PARENT MAJOR:MINOR ROOT TARGET OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
int stp_mountinfo_parse_line(char *line, struct stp_mountinfo_entry *e)
{
	char *id = field(&line), *parent = field(&line), *devno = field(&line), *f, *end;
	char *root, *target, *fstype, *source;
	unsigned long major, minor;

	if (!devno || !only(id, DIGITS) || !only(parent, DIGITS) || !only(devno, DIGITS ":"))
		return -EINVAL;
	major = strtoul(devno, &end, 10);
	if (end == devno || *end != ':' || (minor = strtoul(end + 1, &f, 10), f == end + 1 || *f))
		return -EINVAL;
	root = field(&line);
	target = field(&line);
	if (!target || !field(&line))
		return -EINVAL;
	while ((f = field(&line)) && strcmp(f, "-"))
		;
	fstype = field(&line);
	source = field(&line);
	if (!line || strchr(line, ' '))
		return -EINVAL;
	*e = (struct stp_mountinfo_entry){ makedev(major, minor), unescape(root), unescape(target),
					   unescape(fstype), unescape(source), unescape(line) };
	return 0;
}

int stp_mountinfo_each(FILE *table, stp_mountinfo_fn fn, void *ctx)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int err = 0;

	while (!err && (len = getline(&line, &cap, table)) > 0) {
		struct stp_mountinfo_entry e;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if ((size_t)len > STP_MOUNTINFO_LINE_MAX)
			err = -EOVERFLOW;
		else if (stp_mountinfo_parse_line(line, &e))
			err = -EBADMSG;
		else
			err = fn(&e, ctx);
	}
	if (!err && ferror(table))
		err = -EIO;
	free(line);
	return err > 0 ? 0 : err;
}

/* The same over this process's own table: the one file the monitor opens by a path of
 * its own outside monitor.c (tests/tools/privileged_calls.py allows this literal). */
static int each_of_self(stp_mountinfo_fn fn, void *ctx)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int err;

	if (!f)
		return -errno;
	err = stp_mountinfo_each(f, fn, ctx);
	fclose(f);
	return err;
}

struct at {
	const char *mountpoint;
	stp_mountinfo_fn fn;
	void *ctx;
};

static int if_at(const struct stp_mountinfo_entry *e, void *ctx)
{
	struct at *a = ctx;

	return strcmp(e->target, a->mountpoint) ? 0 : a->fn(e, a->ctx);
}

/* Calls FN for each mount at MOUNTPOINT in TABLE (NULL: /proc/self/mountinfo), in the
 * order they were made (the last is on top). No path is canonicalised: nothing on the
 * mount is looked at. */
static int each_mount_at(FILE *table, const char *mountpoint, stp_mountinfo_fn fn,
			 void *ctx)
{
	struct at a = { mountpoint, fn, ctx };

	return table ? stp_mountinfo_each(table, if_at, &a) : each_of_self(if_at, &a);
}

static bool ours(const struct stp_mountinfo_entry *e, const char *source)
{
	return !strcmp(e->fstype, "fuse.stipple") && !strcmp(e->source, source);
}

struct count {
	const char *source;
	unsigned *count;
	int *top;
};

static int count_ours(const struct stp_mountinfo_entry *e, void *ctx)
{
	struct count *c = ctx;

	*c->top = ours(e, c->source);
	*c->count += (unsigned)*c->top;
	return 0;
}

int stp_mountinfo_ours(const char *mountpoint, const char *source, unsigned *count, int *top)
{
	struct count c = { source, count, top };

	*count = 0;
	*top = 0;
	return each_mount_at(NULL, mountpoint, count_ours, &c);
}

struct made {
	dev_t dev;
	const char *source;
	uid_t uid;
	int found; /* of the last mount of DEV: 1 ours, -1 not */
};

/* Whether the superblock option user_id= of E is UID. */
static bool user_is(const struct stp_mountinfo_entry *e, uid_t uid)
{
	struct stp_opt op;
	char num[24];

	if (stp_optstr_find(e->options, "user_id", &op) || !op.val)
		return false;
	snprintf(num, sizeof(num), "%u", (unsigned)uid);
	return strlen(num) == op.valsz && !memcmp(num, op.val, op.valsz);
}

static int last_of_dev(const struct stp_mountinfo_entry *e, void *ctx)
{
	struct made *m = ctx;

	if (e->dev == m->dev)
		m->found = ours(e, m->source) && user_is(e, m->uid) ? 1 : -1;
	return 0;
}

int stp_mountinfo_made_for(dev_t dev, const char *source, uid_t uid)
{
	struct made m = { dev, source, uid, 0 };
	int err = each_of_self(last_of_dev, &m);

	return err ? err : m.found > 0 ? 0 : -ESTALE;
}

struct top {
	char *source, *fstype;
	size_t cap;
	int found;
};

static int look_top(const struct stp_mountinfo_entry *e, void *ctx)
{
	struct top *t = ctx;

	snprintf(t->source, t->cap, "%s", e->source);
	snprintf(t->fstype, t->cap, "%s", e->fstype);
	/* an automounter's trigger waits for the real mount to go on top of it */
	t->found = strcmp(e->fstype, "autofs") != 0;
	return 0;
}

int stp_mountinfo_top_in(FILE *table, const char *mountpoint, char *source, char *fstype,
			 size_t cap)
{
	struct top t = { source, fstype, cap, 0 };
	int err = each_mount_at(table, mountpoint, look_top, &t);

	return err ? err : t.found ? 0 : -ENOENT;
}

int stp_mountinfo_top(const char *mountpoint, char *source, char *fstype, size_t cap)
{
	return stp_mountinfo_top_in(NULL, mountpoint, source, fstype, cap);
}
