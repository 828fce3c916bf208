/* SPDX-License-Identifier: MIT */
/*
 * A file written whole or not at all.
 *
 * PATH names the file to write. Its symlinks are followed first, as a shell's `>` would:
 * the file replaced is the one the last link points to (FINAL), and the links stay. The
 * bytes go to a temporary file beside FINAL (FINAL.tmp.XXXXXX), which is renamed over
 * FINAL only when complete. A failure, or SIGINT, SIGTERM, SIGHUP or SIGQUIT while it
 * exists, removes the temporary file, so FINAL is either the old file, absent, or
 * complete. Only a new name or a regular file is replaced: a directory, FIFO, device or
 * socket is refused, and so is a symlink that leads nowhere (cp(1) refuses to write
 * through one too) or one the kernel's protected_symlinks rule would not follow (a link
 * in a sticky world-writable directory, owned by neither the process nor the directory's
 * owner): reading links by hand must not be a way round it. Every link on the way, the
 * directories' included, must also be root's, the caller's or owned by the owner of what
 * it leads to (trustpath.h): the owner of a directory root writes in cannot point it at
 * a file of root's.
 *
 * PATH "-" is standard output. The bytes then go to a spool, an unnamed temporary file in
 * $TMPDIR (else /tmp), since the writers seek; the commit copies it to standard output. A
 * terminal is refused.
 *
 * From stp_output_open on, SIGXFSZ is ignored (a write past RLIMIT_FSIZE fails with EFBIG
 * instead of killing the process with its temporary file) and so is SIGPIPE.
 *
 * mkstipple's images, `stipple sign` and `stipple extract --tar` write through it. One
 * output at a time per process; not thread-safe. Nothing is printed: the functions
 * return 0 or -errno and *STEP (when given) names what failed, for the caller's message;
 * when o->refused is set, *STEP is the whole reason and the errno adds nothing.
 */
#ifndef STP_OUTPUT_H
#define STP_OUTPUT_H

#include <limits.h>
#include <sys/stat.h>
#include <sys/types.h>

struct stp_output {
	char *final;      /* the file replaced, PATH's links followed; "-" (owned) */
	const char *name; /* FINAL's last component, inside it */
	char *dir;        /* FINAL's directory, or the spool's (owned) */
	char *temp;       /* the temporary file while it has a name (owned) */
	int fd;           /* open on temp or the spool, read-write; -1 when closed */
	int dirfd;        /* FINAL's directory (O_PATH); -1 for standard output */
	int to_stdout;    /* PATH was "-" */
	int refused;      /* the last error refused what PATH names: *STEP says why */
	int dest_exists;  /* DEST holds the file the image replaces (or standard output's
			   * file), as stp_output_open found it */
	struct stat dest;
	char why[PATH_MAX + 200]; /* a refusal's reason, when *STEP needs one made */
};

/* Resolves PATH, checks what it names and creates the temporary file or spool. */
int stp_output_open(const char *path, struct stp_output *o, const char **step);
/* Sets MODE, syncs, closes and renames over FINAL, then syncs FINAL's directory; for
 * standard output, copies the spool there. Refused (o->refused) when FINAL has become
 * something else than a regular file meanwhile. When only the directory's sync fails,
 * FINAL is already in place and *STEP says so. */
int stp_output_commit(struct stp_output *o, mode_t mode, const char **step);
/* 0666 less the process's umask: the mode of a new file. */
mode_t stp_output_default_mode(void);
/* The mode for the commit: the permission bits of the regular file replaced (without
 * set-id or sticky bits) when the caller owns it, else stp_output_default_mode(). */
mode_t stp_output_mode(const struct stp_output *o);
/* Removes the temporary file, if any, and frees O. Safe after stp_output_open, whether it
 * failed or not, and after a commit. */
void stp_output_abort(struct stp_output *o);

/* For a writer of temporary files of its own (`stipple publish`), one at a time: NAME in
 * DIRFD is removed if SIGINT, SIGTERM, SIGHUP or SIGQUIT comes while it is set (the
 * handlers above, installed on the first call); NULL clears it. NAME is borrowed until
 * cleared, and must not be in use by an stp_output meanwhile. */
void stp_output_guard_temp(int dirfd, const char *name);

#endif
