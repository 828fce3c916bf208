/* SPDX-License-Identifier: MIT */
/* URLs as text (httpurl.h): apart from http.c, so that what only reads a URL (the mount
 * options, the monitor) links no libcurl. */
#include "httpurl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t stp_http_url_authority_end(const char *auth)
{
	return strcspn(auth, "/?#");
}

bool stp_http_url_has_userinfo(const char *url)
{
	const char *auth = strstr(url, "://");

	return auth && memchr(auth + 3, '@', stp_http_url_authority_end(auth + 3));
}

char *stp_http_url_public(const char *url)
{
	const char *sep = strstr(url, "://"), *auth, *at, *end;
	char *out = NULL;

	if (!sep)
		return strdup(url);
	auth = sep + 3;
	end = auth + stp_http_url_authority_end(auth);
	at = memrchr(auth, '@', (size_t)(end - auth));
	if (at)
		auth = at + 1;
	end += strcspn(end, "?#");
	if (asprintf(&out, "%.*s%.*s", (int)(sep + 3 - url), url, (int)(end - auth), auth) < 0)
		return NULL;
	return out;
}
