/* SPDX-License-Identifier: MIT */
#include "mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134) in place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* Field N (0-based, space-separated) of LINE, unescaped into a copy the caller frees. */
static char *field(const char *line, unsigned n)
{
	const char *p = line;
	size_t len;
	char *f;

	for (unsigned i = 0; i < n && p; i++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	if (!p)
		return NULL;
	len = strcspn(p, " \n");
	f = strndup(p, len);
	if (f)
		unescape(f);
	return f;
}

/* LINE describes a mount at MOUNTPOINT: is it a fuse.stipple mount of SOURCE? The
 * fields after the " - " separator are the file system type and the source. */
static int is_ours(const char *line, const char *source)
{
	const char *sep = strstr(line, " - ");
	char *type = sep ? field(sep + 3, 0) : NULL, *src = sep ? field(sep + 3, 1) : NULL;
	int ours = type && src && !strcmp(type, "fuse.stipple") && !strcmp(src, source);

	free(type);
	free(src);
	return ours;
}

static void look_at(const char *line, const char *mountpoint, const char *source,
		    unsigned *count, int *top)
{
	char *mp = field(line, 4);

	if (mp && !strcmp(mp, mountpoint)) {
		*top = is_ours(line, source); /* later lines are later mounts, stacked on top */
		*count += (unsigned)*top;
	}
	free(mp);
}

int stp_mountinfo_ours(const char *mountpoint, const char *source, unsigned *count, int *top)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	*count = 0;
	*top = 0;
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0)
		look_at(line, mountpoint, source, count, top);
	free(line);
	fclose(f);
	return 0;
}
