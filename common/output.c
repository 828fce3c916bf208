/* SPDX-License-Identifier: MIT */
/* A temporary file beside its final name, and its removal on failure or signal. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

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
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
}

static int fail(const char **step, const char *what, int err)
{
	if (step)
		*step = what;
	return err;
}

int stp_output_open(const char *path, struct stp_output *o, const char **step)
{
	struct stat st;

	o->fd = -1;
	o->temp = NULL;
	o->final = strdup(path);
	if (!o->final || asprintf(&o->temp, "%s.tmp.XXXXXX", path) < 0) {
		o->temp = NULL;
		return fail(step, "cannot create", -ENOMEM);
	}
	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		free(o->temp);
		o->temp = NULL;
		return fail(step, "cannot create", -EISDIR);
	}
	catch_signals();
	o->fd = mkostemp(o->temp, O_CLOEXEC);
	if (o->fd < 0) {
		int err = -errno;

		free(o->temp);
		o->temp = NULL;
		return fail(step, "cannot create", err);
	}
	pending_temp = o->temp;
	return 0;
}

mode_t stp_output_default_mode(void)
{
	mode_t mask = umask(0);

	umask(mask);
	return 0666 & ~mask;
}

int stp_output_commit(struct stp_output *o, mode_t mode, const char **step)
{
	int err = 0;

	if (fchmod(o->fd, mode) || fsync(o->fd))
		err = -errno;
	if (close(o->fd) && !err)
		err = -errno;
	o->fd = -1;
	if (err)
		return fail(step, "cannot write", err);
	if (rename(o->temp, o->final))
		return fail(step, "cannot rename into place", -errno);
	pending_temp = NULL;
	free(o->temp);
	o->temp = NULL;
	err = stp_sync_parent_dir(o->final);
	return err ? fail(step, "in place, but syncing its directory failed", err) : 0;
}

void stp_output_abort(struct stp_output *o)
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
