/* SPDX-License-Identifier: MIT */
/*
 * The readers' --json output (stipple(1), JSON OUTPUT): one JSON document per run on
 * standard output, built with jansson. Names and paths from an image are bytes: valid
 * UTF-8 goes into a JSON string as it is; anything else is escaped by the text rule of
 * escape.h first, so a string is always valid JSON.
 *
 * The json_t values returned are new references, the caller's (NULL: out of memory).
 * Single-threaded.
 */
#ifndef STP_JSONOUT_H
#define STP_JSONOUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct stp_image;
struct stp_inode;
struct stp_cli;

/* A JSON string of the LEN bytes at S, by the rule above. */
json_t *stp_json_bytes(const char *s, size_t len);

/* "file", "dir", "symlink", "chardev", "blockdev", "fifo", "socket" or "unknown". */
const char *stp_json_type(uint32_t mode);

/* An entry of ls --json: path, type, mode, uid, gid, nlink, size, mtime, mtime_nsec,
 * and target (symlink) or rdev (devices). A link target that cannot be read is null
 * and *FAILED is set. */
json_t *stp_json_inode(const struct stp_image *img, const char *path, size_t path_len,
		       const struct stp_inode *in, int *failed);

/* Writes V (taken over) to stdout, compact, with nothing after it, for a document written
 * piece by piece. Returns 0, or -1 when V is NULL (out of memory) or cannot be encoded. */
int stp_json_put(json_t *v);

/* Prints DOC (taken over, NULL: out of memory) with a newline to stdout and flushes.
 * Returns 0, or prints why (naming CLI) and returns -1. */
int stp_json_print(const struct stp_cli *cli, json_t *doc);

#endif
