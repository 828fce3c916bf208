/* SPDX-License-Identifier: MIT */
/*
 * The image file being written: a temporary file beside IMAGE, renamed over it only when
 * complete. An interrupted build (SIGINT, SIGTERM, SIGHUP) or a failed one removes the
 * temporary file, so IMAGE is either the old file, absent, or complete. One output at a
 * time per process; not thread-safe.
 */
#ifndef MKSTP_OUTPUT_H
#define MKSTP_OUTPUT_H

struct output {
	char *final;   /* IMAGE */
	char *temp;    /* IMAGE.tmp.XXXXXX */
	int fd;
};

/* Creates the temporary file. Errors are printed with the path; returns 0 or -errno. */
int output_open(const char *image, struct output *o);
/* Syncs, sets the mode from the umask, renames over IMAGE and syncs its directory.
 * SIGXFSZ is ignored from output_open on, so a write past RLIMIT_FSIZE fails with EFBIG. */
int output_commit(struct output *o);
/* Removes the temporary file. Safe after a commit or a failed open. */
void output_abort(struct output *o);

#endif
