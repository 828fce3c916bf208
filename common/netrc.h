/* SPDX-License-Identifier: MIT */
/*
 * netrc files, as curl(1) and ftp(1) read them: "machine HOST login NAME password
 * SECRET", "default", "macdef" skipped, tokens in double quotes with \-escapes. Pure
 * text, no libcurl: the readers check the file a URL's credentials come from before
 * stipple-fetcher reads it (http.h: stp_http_netrc_read). Every string returned holds a
 * secret: the caller clears it before freeing it. Thread-safe; no state. Functions
 * return 0 or a negative errno.
 */
#ifndef STP_NETRC_H
#define STP_NETRC_H

#include <stddef.h>

/* A netrc file is at most this long. */
#define STP_NETRC_MAX (64u << 10)

/* The login and password that netrc text TEXT (LEN bytes) gives HOST: the first machine
 * HOST entry, else the default one. *LOGIN and *PASSWORD are new strings (the caller
 * clears and frees them), NULL when the entry has none. 0, -ENOENT (no entry for HOST),
 * -ENOMEM. */
int stp_netrc_find(const char *text, size_t len, const char *host, char **login,
		   char **password);

/* The text of netrc file PATH into *TEXT (a new string of *LEN bytes, NUL-terminated,
 * for stp_netrc_discard). 0, -EINVAL (not a regular file of at most STP_NETRC_MAX
 * bytes), -ENOMEM, or open's or read's -errno. */
int stp_netrc_load(const char *path, char **text, size_t *len);

/* Clears and frees TEXT (LEN bytes; NULL is fine). */
void stp_netrc_discard(char *text, size_t len);

#endif
