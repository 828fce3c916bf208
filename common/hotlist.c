/* SPDX-License-Identifier: MIT */
/* The hot list's line format: escaping paths, parsing and writing ranges. */
#include "hotlist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '\t' || *s == '\n') {
			fputc('\\', f);
			fputc(*s == '\t' ? 't' : *s == '\n' ? 'n' : '\\', f);
		} else {
			fputc(*s, f);
		}
	}
}

int stp_hotlist_put(FILE *f, const char *path, const struct stp_hot_range *r, size_t n)
{
	put_escaped(f, path);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%c%llu-%llu", i ? ',' : '\t', (unsigned long long)r[i].start,
			(unsigned long long)r[i].end);
	fputc('\n', f);
	return ferror(f) ? -EIO : 0;
}

int stp_hotlist_put_lookup(FILE *f, const char *path)
{
	put_escaped(f, path);
	fputs("\t" STP_HOTLIST_LOOKUP "\n", f);
	return ferror(f) ? -EIO : 0;
}

int stp_hotlist_is_lookup(const char *rest)
{
	return rest && !strcmp(rest, STP_HOTLIST_LOOKUP);
}

char *stp_hotlist_split(char *line)
{
	char *tab = strchr(line, '\t'), *r = line, *w = line;

	if (tab)
		*tab++ = 0;
	while (*r) {
		if (*r == '\\' && r[1]) {
			r++;
			*w++ = *r == 't' ? '\t' : *r == 'n' ? '\n' : *r;
			r++;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return tab;
}

/* A decimal number at *S, no sign, no space, at most 2^64 - 1; *S moves past it. */
static int parse_u64(const char **s, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*s = p;
	*out = v;
	return 0;
}

int stp_hotlist_parse_ranges(const char *s, struct stp_hot_range **out, size_t *n)
{
	struct stp_hot_range *r = NULL;
	size_t k = 1;

	*out = NULL;
	*n = 0;
	if (!*s)
		return 0;
	for (const char *c = s; *c; c++)
		k += *c == ',';
	r = reallocarray(NULL, k, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (k = 0; *s; k++) {
		if (parse_u64(&s, &r[k].start) || *s++ != '-' || parse_u64(&s, &r[k].end) ||
		    r[k].end < r[k].start || (*s && *s != ',')) {
			free(r);
			return -EINVAL;
		}
		s += *s == ',';
	}
	*out = r;
	*n = k;
	return 0;
}
