/* SPDX-License-Identifier: MIT */
/* mksquashfs-style pseudo definitions: the "m" type, on entries SOURCE holds. */
#include "pseudo.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "report.h"
#include "util.h"

/* The next word of *S into OUT (room for strlen(*S) + 1), quotes and backslashes taken
 * away; advances *S. 0, or -EINVAL when there is none or a quote is not closed. */
static int next_word(const char **s, char *out)
{
	const char *p = *s + strspn(*s, " \t");
	int quoted = 0, any = 0;

	for (; *p && (quoted || (*p != ' ' && *p != '\t')); p++) {
		any = 1;
		if (*p == '"')
			quoted = !quoted;
		else if (*p == '\\' && p[1])
			*out++ = *++p;
		else
			*out++ = *p;
	}
	*out = 0;
	*s = p;
	return any && !quoted ? 0 : -EINVAL;
}

static int parse_owner(const char *w, int user, uint32_t *id)
{
	uint64_t v;

	if (!stp_parse_uint(w, 0, UINT32_MAX - 1, &v)) {
		*id = (uint32_t)v;
		return 0;
	}
	if (user) {
		struct passwd *pw = getpwnam(w);

		if (pw)
			*id = pw->pw_uid;
		return pw ? 0 : -EINVAL;
	}
	struct group *gr = getgrnam(w);

	if (gr)
		*id = gr->gr_gid;
	return gr ? 0 : -EINVAL;
}

/* Fills D from the words of LINE; a message for what is wrong in *WHY. */
static int parse_def(const char *line, char *word, struct pseudo_def *d, const char **why)
{
	uint32_t uid, gid;
	uint64_t mode;

	*why = "expected PATH m MODE UID GID";
	if (next_word(&line, word))
		return -EINVAL;
	d->path = strdup(word);
	if (!d->path)
		return -ENOMEM;
	if (next_word(&line, word))
		return -EINVAL;
	if (strcmp(word, "m")) {
		*why = "only the m type (mode and owners of an entry in SOURCE) is taken";
		return -EINVAL;
	}
	*why = "MODE is not octal from 0 to 7777";
	if (next_word(&line, word) || word[strspn(word, "01234567")] || strlen(word) > 5)
		return -EINVAL;
	mode = strtoull(word, NULL, 8);
	if (mode > 07777)
		return -EINVAL;
	*why = "UID is not a number or a user of this host";
	if (next_word(&line, word) || parse_owner(word, 1, &uid))
		return -EINVAL;
	*why = "GID is not a number or a group of this host";
	if (next_word(&line, word) || parse_owner(word, 0, &gid))
		return -EINVAL;
	*why = "more words than PATH m MODE UID GID";
	if (line[strspn(line, " \t")])
		return -EINVAL;
	d->mode = (mode_t)mode;
	d->uid = uid;
	d->gid = gid;
	return 0;
}

int pseudo_add(struct pseudo *p, const char *line, const char *where, unsigned lineno)
{
	struct pseudo_def d = { 0 }, *grown;
	const char *why;
	char *word = malloc(strlen(line) + 1);
	int rc = word ? parse_def(line, word, &d, &why) : -ENOMEM;

	free(word);
	if (!rc && !(grown = reallocarray(p->v, p->n + 1, sizeof(*grown))))
		rc = -ENOMEM;
	if (rc) {
		free(d.path);
		if (rc == -EINVAL && lineno)
			report_error(NULL, "%s:%u: %s: %s", where, lineno, line, why);
		else if (rc == -EINVAL)
			report_error(NULL, "%s %s: %s", where, line, why);
		return rc;
	}
	p->v = grown;
	p->v[p->n++] = d;
	return 0;
}

struct pseudo_file {
	struct pseudo *p;
	const char *name;
	int bad; /* a definition was refused: every line is still read, to report them all */
};

/* One line of a -pf file: a definition, unless blank or a comment. */
static int pseudo_line(void *arg, char *line, size_t len, unsigned lineno)
{
	struct pseudo_file *x = arg;
	const char *first = line + strspn(line, " \t");
	int rc;

	if (!*first || *first == '#')
		return 0;
	rc = pseudo_add(x->p, line, x->name, lineno);
	x->bad |= rc != 0;
	return rc == -ENOMEM ? rc : 0;
}

int pseudo_load(struct pseudo *p, const char *file)
{
	struct pseudo_file x = { p, file, 0 };
	FILE *f = lines_open_regular(file); /* a FIFO or a device: refused, not waited on */
	int rc;

	if (!f) {
		rc = -errno;
		report_error(file, "--pseudo-file: %s", lines_strerror(-rc));
		return rc;
	}
	rc = lines_each(f, file, '\n', pseudo_line, &x);
	if (rc == -EIO && !x.bad)
		report_errno(file, EIO, "--pseudo-file");
	fclose(f);
	return rc ? rc : x.bad ? -EINVAL : 0;
}

int pseudo_resolve(struct pseudo *p, const struct tree *t)
{
	int rc = 0;

	for (size_t i = 0; i < p->n; i++) {
		p->v[i].node = tree_find(t, p->v[i].path);
		if (!p->v[i].node) {
			report_error(p->v[i].path, "a pseudo definition (m) for a path that is "
				     "not in the image");
			rc = -ENOENT;
		}
	}
	return rc;
}

void pseudo_apply(const struct pseudo *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct node_stat *st = &p->v[i].node->primary->st;

		st->st_mode = (st->st_mode & S_IFMT) | p->v[i].mode;
		st->st_uid = p->v[i].uid;
		st->st_gid = p->v[i].gid;
	}
}

void pseudo_free(struct pseudo *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].path);
	free(p->v);
	memset(p, 0, sizeof(*p));
}
