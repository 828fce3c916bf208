/* SPDX-License-Identifier: MIT */
/* The temporary image file and its removal on failure or signal. */
#include "output.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The path a signal handler removes; set only while a temporary file exists. */
static char *volatile pending_temp;

static void on_signal(int sig)
{
	char *temp = pending_temp;

	if (temp)
		unlink(temp);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	/* past RLIMIT_FSIZE a write fails with EFBIG, reported and cleaned up like ENOSPC,
	 * instead of a signal that kills the build and leaves the temporary file */
	signal(SIGXFSZ, SIG_IGN);
}

int output_open(const char *image, struct output *o)
{
	struct stat st;

	o->fd = -1;
	o->final = strdup(image);
	if (!o->final || asprintf(&o->temp, "%s.tmp.XXXXXX", image) < 0) {
		o->temp = NULL;
		return -ENOMEM;
	}
	if (!stat(image, &st) && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "mkstipple: %s: is a directory\n", image);
		return -EISDIR;
	}
	catch_signals();
	o->fd = mkostemp(o->temp, O_CLOEXEC);
	if (o->fd < 0) {
		int err = errno;

		fprintf(stderr, "mkstipple: %s: cannot create: %s\n", image, strerror(err));
		free(o->temp);
		o->temp = NULL;
		return -err;
	}
	pending_temp = o->temp;
	return 0;
}

int output_commit(struct output *o)
{
	mode_t mask = umask(0);
	int err;

	umask(mask);
	if (fchmod(o->fd, 0666 & ~mask) || fsync(o->fd) || close(o->fd)) {
		err = errno;

		o->fd = -1;
		fprintf(stderr, "mkstipple: %s: %s\n", o->final, strerror(err));
		return -err;
	}
	o->fd = -1;
	if (rename(o->temp, o->final)) {
		err = errno;

		fprintf(stderr, "mkstipple: %s: cannot rename into place: %s\n", o->final,
			strerror(err));
		return -err;
	}
	pending_temp = NULL;
	free(o->temp);
	o->temp = NULL;
	err = stp_sync_parent_dir(o->final);
	if (err)
		fprintf(stderr, "mkstipple: %s: renamed into place, but syncing its directory "
			"failed: %s\n", o->final, strerror(-err));
	return err;
}

void output_abort(struct output *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->temp) {
		pending_temp = NULL;
		unlink(o->temp);
		free(o->temp);
		o->temp = NULL;
	}
	free(o->final);
	o->final = NULL;
}
