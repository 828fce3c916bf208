/* SPDX-License-Identifier: MIT */
/*
 * A URL read by an unprivileged process (the readers: stipple ls, cat, extract...)
 * through a stipple-fetcher of its own, so that only that program links libcurl. This
 * process spawns it as the monitor execs a mount's (fetcher.h: the same SETUP, HELLO and
 * channels; its control socket on STP_MONITOR_FD, only the proxy variables of the
 * environment), with no store: the fetcher confines itself as for a mount, fetches, and
 * checks a published image's blocks against their SHA-256 before it sends a byte of
 * them. The image reader then reads the bytes (remote.h) as a mount's daemon does, and
 * checks the signature itself.
 *
 * The source's reads are thread-safe; a fetcher that has gone is a read of -EIO with a
 * message naming the URL, never a SIGPIPE. Closing the source stops the fetcher.
 */
#ifndef STP_FETCHSRC_H
#define STP_FETCHSRC_H

#include "cli.h"

/* The image at U->url, for CLI's messages (stp_cli_url_opener): 0, or a negative errno
 * with the cause printed naming the URL. *out is the caller's (stp_imgsrc_close). */
int stp_fetchsrc_open(const struct stp_cli *cli, const struct stp_cli_url *u,
		      struct stp_imgsrc **out);

#endif
