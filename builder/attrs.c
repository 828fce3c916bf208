/* SPDX-License-Identifier: MIT */
/* Owners and times forced at build time. */
#include "attrs.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "report.h"
#include "util.h"

/* The widest mtime accepted: far past any date, and never an overflow in time_t. */
#define TIME_MAX ((int64_t)1 << 40)

static int parse_seconds(const char *s, int64_t *out)
{
	uint64_t v;

	if (stp_parse_uint(s, 0, (uint64_t)TIME_MAX, &v))
		return -EINVAL;
	*out = (int64_t)v;
	return 0;
}

/* Exactly N decimal digits at *S, advancing it. */
static int digits(const char **s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++, (*s)++) {
		if (!isdigit((unsigned char)**s))
			return -EINVAL;
		v = v * 10 + (**s - '0');
	}
	*out = v;
	return 0;
}

static int days_in_month(int y, int m)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return days[m - 1] + (m == 2 && leap);
}

/* [HH:MM[:SS[.FRACTION]]] after a 'T' or a space; the fraction is dropped. */
static int parse_clock(const char **s, int *h, int *mi, int *sec)
{
	const char *p = *s;

	if (*p != 'T' && !(*p == ' ' && isdigit((unsigned char)p[1])))
		return 0;
	p++;
	if (digits(&p, 2, h) || *p++ != ':' || digits(&p, 2, mi))
		return -EINVAL;
	if (*p == ':' && (p++, digits(&p, 2, sec)))
		return -EINVAL;
	if (*p == '.' || *p == ',')
		for (p++; isdigit((unsigned char)*p); p++)
			;
	*s = p;
	return 0;
}

/* A zone after the time, in seconds east of UTC: Z, UTC, GMT, +HH, +HHMM, +HH:MM (or
 * -), a space before it or not; none is UTC. */
static int parse_zone(const char *s, int *east)
{
	int h = 0, m = 0, sign;

	*east = 0;
	if (*s == ' ')
		s++;
	if (!*s || !strcmp(s, "Z") || !strcmp(s, "UTC") || !strcmp(s, "GMT"))
		return 0;
	if (*s != '+' && *s != '-')
		return -EINVAL;
	sign = *s++ == '-' ? -1 : 1;
	if (digits(&s, 2, &h))
		return -EINVAL;
	if (*s == ':')
		s++;
	if (*s && digits(&s, 2, &m))
		return -EINVAL;
	if (*s || h > 14 || m > 59)
		return -EINVAL;
	*east = sign * (h * 3600 + m * 60);
	return 0;
}

/* YYYY-MM-DD[(T| )HH:MM[:SS[.F]]][[ ]ZONE], ISO 8601 as GNU tar and date(1) take it; UTC
 * when no zone is given, so that a date does not depend on the build host's zone. */
static int parse_date(const char *s, int64_t *out)
{
	struct tm tm = { 0 };
	int y, mo, d, h = 0, mi = 0, sec = 0, east = 0;
	time_t t;

	const char *clock;

	if (digits(&s, 4, &y) || *s++ != '-' || digits(&s, 2, &mo) || *s++ != '-' ||
	    digits(&s, 2, &d))
		return -EINVAL;
	clock = s;
	if (parse_clock(&s, &h, &mi, &sec) || (s == clock ? *s != 0 : parse_zone(s, &east)))
		return -EINVAL;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
	    h > 23 || mi > 59 || sec > 60)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1 || (int64_t)t - east < 0 || (int64_t)t - east > TIME_MAX)
		return -EINVAL;
	*out = (int64_t)t - east;
	return 0;
}

/* tar's rule: a value that starts with / or . names a file, whose mtime is taken. */
static int file_time(const char *path, int64_t *out)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	if (st.st_mtim.tv_sec < 0 || st.st_mtim.tv_sec > TIME_MAX)
		return -ERANGE;
	*out = (int64_t)st.st_mtim.tv_sec;
	return 0;
}

int attrs_parse_time(const char *s, int64_t *out)
{
	if (*s == '/' || *s == '.')
		return file_time(s, out);
	if (*s == '@')
		return parse_seconds(s + 1, out);
	if (strchr(s, '-'))
		return parse_date(s, out);
	return parse_seconds(s, out);
}

int attrs_load_env(struct attr_opts *o)
{
	const char *v = getenv("SOURCE_DATE_EPOCH");

	if (!v || !*v)
		return 0;
	/* reproducible-builds.org: the output of `date +%s`, nothing else */
	if (parse_seconds(v, &o->clamp_to)) {
		report_error(NULL, "SOURCE_DATE_EPOCH=%s: not a number of seconds since the epoch", v);
		return -EINVAL;
	}
	o->clamp = 1;
	return 0;
}

void attrs_apply(struct tree *t, const struct attr_opts *o)
{
	for (uint32_t i = 0; i < t->ninodes; i++) {
		struct node_stat *st = &t->inodes[i]->st;

		if (o->uid >= 0)
			st->st_uid = (uid_t)o->uid;
		if (o->gid >= 0)
			st->st_gid = (gid_t)o->gid;
		if (o->set_mtime) {
			st->st_mtim.tv_sec = (time_t)o->mtime;
			st->st_mtim.tv_nsec = 0;
		} else if (o->clamp && (st->st_mtim.tv_sec > o->clamp_to ||
					(st->st_mtim.tv_sec == o->clamp_to &&
					 st->st_mtim.tv_nsec > 0))) {
			st->st_mtim.tv_sec = (time_t)o->clamp_to;
			st->st_mtim.tv_nsec = 0;
		}
	}
}
