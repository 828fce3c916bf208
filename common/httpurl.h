/* SPDX-License-Identifier: MIT */
/*
 * URLs as text: what may be shown of one, and where its authority ends. Pure text, no
 * libcurl (http.h includes this header too). Thread-safe; no state.
 */
#ifndef STP_HTTPURL_H
#define STP_HTTPURL_H

#include <stdbool.h>
#include <stddef.h>

/* How many bytes of AUTH, the text after a URL's "://", its authority (userinfo@host:port)
 * takes: up to the path, query or fragment. Pure text. */
size_t stp_http_url_authority_end(const char *auth);

/* Whether URL carries a user name or password (scheme://USERINFO@host/...). Pure text. */
bool stp_http_url_has_userinfo(const char *url);

/* URL as every local user may see it (fsname, mountinfo, status, messages): without
 * userinfo, query or fragment, which may carry credentials. A new string, or NULL (no
 * memory). Pure text: it needs no stp_http_global_init. */
char *stp_http_url_public(const char *url);

#endif
