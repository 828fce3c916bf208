/* SPDX-License-Identifier: MIT */
/*
 * A file written whole or not at all: the bytes go to a temporary file beside PATH
 * (PATH.tmp.XXXXXX), which is renamed over PATH only when complete. A failure, or
 * SIGINT, SIGTERM, SIGHUP or SIGQUIT while it exists, removes the temporary file, so
 * PATH is either the old file, absent, or complete. From stp_output_open on, SIGXFSZ
 * is ignored (a write past RLIMIT_FSIZE fails with EFBIG instead of killing the
 * process with its temporary file) and so is SIGPIPE.
 *
 * mkstipple's images, `stipple sign` and `stipple extract --tar` write through it. One
 * output at a time per process; not thread-safe. Nothing is printed: the functions
 * return 0 or -errno, and *STEP (when given) names what failed, for the caller's
 * message.
 */
#ifndef STP_OUTPUT_H
#define STP_OUTPUT_H

#include <sys/types.h>

struct stp_output {
	char *final; /* PATH (owned) */
	char *temp;  /* the temporary file while it exists (owned) */
	int fd;      /* open on temp, for writing; -1 when closed */
};

/* Creates the temporary file. -EISDIR when PATH is a directory; else mkostemp's error
 * ("cannot create"). */
int stp_output_open(const char *path, struct stp_output *o, const char **step);
/* Sets MODE, syncs, closes and renames over PATH, then syncs PATH's directory. When
 * only that last sync fails, PATH is already in place and *STEP says so. */
int stp_output_commit(struct stp_output *o, mode_t mode, const char **step);
/* 0666 less the process's umask: the mode of a new file. */
mode_t stp_output_default_mode(void);
/* Removes the temporary file, if any, and frees O. Safe after a commit or a failed open. */
void stp_output_abort(struct stp_output *o);

#endif
