/* SPDX-License-Identifier: MIT */
/* netrc files (netrc.h). */
#include "netrc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* One netrc token from *P (below END) into a new string: a run of non-blank bytes, or
 * a double-quoted string with \\-escapes. NULL at the end, or -ENOMEM in *ERR. */
static char *netrc_token(const char **p, const char *end, int *err)
{
	const char *s = *p, *e;
	bool quoted;
	char *out, *o;

	while (s < end && isspace((unsigned char)*s))
		s++;
	quoted = s < end && *s == '"';
	for (e = s + quoted; e < end && (quoted ? *e != '"' : !isspace((unsigned char)*e)); e++)
		e += quoted && *e == '\\' && e + 1 < end;
	*p = e + (quoted && e < end);
	if (s == end)
		return NULL;
	out = o = malloc((size_t)(e - s) + 1);
	if (!out) {
		*err = -ENOMEM;
		return NULL;
	}
	for (s += quoted; s < e; s++)
		*o++ = quoted && *s == '\\' && s + 1 < e ? *++s : *s;
	*o = '\0';
	return out;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* Past a macdef's body: it ends at the first empty line. */
static const char *skip_macdef(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	while (nl && nl + 1 < end && nl[1] != '\n')
		nl = memchr(nl + 1, '\n', (size_t)(end - nl - 1));
	return nl ? nl + 1 : end;
}

int stp_netrc_find(const char *text, size_t len, const char *host, char **login,
		   char **password)
{
	const char *p = text, *end = text + len;
	bool in = false, found = false;
	char *tok, **field;
	int err = 0;

	*login = *password = NULL;
	while (!err && (tok = netrc_token(&p, end, &err))) {
		bool machine = !strcmp(tok, "machine"), entry = machine || !strcmp(tok, "default");
		char *name = machine ? netrc_token(&p, end, &err) : NULL;

		field = !strcmp(tok, "login") ? login : !strcmp(tok, "password") ? password : NULL;
		if (entry && found) {
			free(tok);
			free(name);
			break; /* the entry that matched is complete */
		}
		if (entry)
			found = in = machine ? name && !strcasecmp(name, host) : true;
		else if (!strcmp(tok, "macdef"))
			p = skip_macdef(p, end);
		else if (field || !strcmp(tok, "account")) {
			char *v = netrc_token(&p, end, &err);

			if (in && field) {
				free_secret(*field);
				*field = v;
			} else {
				free_secret(v);
			}
		}
		free(tok);
		free(name);
	}
	if (err || !found) {
		free_secret(*login);
		free_secret(*password);
		*login = *password = NULL;
	}
	return err ? err : found ? 0 : -ENOENT;
}

int stp_netrc_load(const char *path, char **text, size_t *len)
{
	struct stat st;
	int fd, err = 0;

	*text = NULL;
	*len = 0;
	fd = stp_open_if(path, O_RDONLY | O_NOCTTY, stp_node_is_regular); /* util.h */
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > STP_NETRC_MAX)
		err = -EINVAL;
	if (!err && !(*text = malloc((size_t)st.st_size + 1)))
		err = -ENOMEM;
	if (!err)
		err = stp_pread_full(fd, *text, (size_t)st.st_size, 0);
	close(fd);
	if (err) {
		stp_netrc_discard(*text, *text ? (size_t)st.st_size : 0);
		*text = NULL;
		return err;
	}
	(*text)[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return 0;
}

void stp_netrc_discard(char *text, size_t len)
{
	if (text) {
		explicit_bzero(text, len);
		free(text);
	}
}
