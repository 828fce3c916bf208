/* SPDX-License-Identifier: MIT */
/*
 * The readers' source of an image at a URL (imgsrc.h): when the URL names a published
 * index (stipple(5), PUBLISHED INDEX), the virtual image it stands for, read through
 * published.h (the one implementation the mount's fetcher uses too); else the one-file
 * image at the URL (stp_http_open_src). Each block is fetched whole and checked against
 * its SHA-256 before a byte of it is copied out; a block that does not match is a read
 * of -EIO, logged (stp_log) naming the block's URL. No store: a block is fetched each
 * time the image reader asks for it (its caches keep what it decoded).
 *
 * Returns 0 or a negative errno (the cause logged naming the URL). *out is the caller's
 * (stp_imgsrc_close). Reads are thread-safe; open is not (stp_http_global_init).
 */
#ifndef STP_PUBSRC_H
#define STP_PUBSRC_H

struct stp_http_opts;
struct stp_imgsrc;

int stp_pubsrc_open(const char *url, const struct stp_http_opts *o, struct stp_imgsrc **out);

#endif
