/* SPDX-License-Identifier: MIT */
/* A reader's URL through its own stipple-fetcher (fetchsrc.h). */
#include "fetchsrc.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fetcher.h"
#include "httpurl.h"
#include "imgsrc.h"
#include "mountopts.h"
#include "progpath.h"
#include "remote.h"

/* Channels, and so reads in flight: the fetcher serves each with a thread. */
#define READER_CHANNELS 8u

struct fetch_src {
	struct stp_imgsrc src;
	struct stp_imgsrc *remote; /* over F's channels */
	struct stp_fetcher f;
};

/* A read with SIGPIPE held back in this thread: a fetcher gone is the read's -EIO (the
 * daemon ignores SIGPIPE; a reader must not, for its standard output). */
static int fetch_pread(struct stp_imgsrc *s, void *buf, size_t len, uint64_t off)
{
	struct fetch_src *fs = (struct fetch_src *)s;
	static const struct timespec now = { 0, 0 };
	sigset_t pipe, old, pending;
	int err;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	err = fs->remote->pread(fs->remote, buf, len, off);
	if (!sigismember(&old, SIGPIPE) && !sigpending(&pending) && sigismember(&pending, SIGPIPE))
		sigtimedwait(&pipe, NULL, &now);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

static void fetch_stats(struct stp_imgsrc *s, struct stp_imgsrc_stats *st)
{
	struct fetch_src *fs = (struct fetch_src *)s;

	fs->remote->stats(fs->remote, st);
}

/* The readers' own child, killed as any process kills its own (no monitor here). */
static int kill_fetcher(int pidfd, pid_t pid, int sig)
{
	(void)pidfd;
	return kill(pid, sig) ? -errno : 0;
}

static void fetch_close(struct stp_imgsrc *s)
{
	struct fetch_src *fs = (struct fetch_src *)s;

	stp_imgsrc_close(fs->remote);
	stp_fetcher_stop(&fs->f);
	free(s->name);
	free(fs);
}

/* stipple-fetcher with F's control socket on STP_MONITOR_FD, nothing else of ours open,
 * no signal blocked, only the proxy variables of the environment (fetcher.h). 0 or a
 * negative errno; F's end of the control socket is closed either way. */
static int spawn_fetcher(struct stp_fetcher *f, const char *shown)
{
	char path[PATH_MAX], *argv[] = { STP_FETCHER_NAME, (char *)shown, NULL };
	char *env[STP_FETCHER_ENV_MAX];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	int err = stp_progpath(STP_FETCHER_NAME, STP_LIBEXEC_DIR, path, sizeof(path));

	stp_fetcher_env(env);
	sigemptyset(&none);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	if (!err)
		err = -posix_spawn_file_actions_adddup2(&fa, f->ctl[1], STP_MONITOR_FD) ?:
		      -posix_spawn_file_actions_addclosefrom_np(&fa, STP_MONITOR_FD + 1) ?:
		      -posix_spawnattr_setsigmask(&at, &none) ?:
		      -posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK) ?:
		      -posix_spawn(&f->pid, path, &fa, &at, argv, env);
	if (err)
		f->pid = -1;
	else
		f->signal = kill_fetcher;
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(f->ctl[1]);
	f->ctl[1] = -1;
	return err;
}

/* The options a reader's fetcher gets: a mount's, for U, with no store. Their strings
 * are borrowed: the struct is never freed. */
static void reader_opts(const struct stp_cli_url *u, char *shown, struct stp_mount_opts *o)
{
	stp_mountopts_init(o);
	o->image = (char *)u->url;
	o->image_path = shown;
	o->is_url = true;
	o->ca_file = (char *)u->ca_file;
	o->netrc_file = (char *)u->netrc_file;
	o->timeout_s = u->timeout_s;
	o->cache_size = 0;
	o->foreground = true; /* its process group and stderr are the reader's */
	o->warm_workers = READER_CHANNELS - 4; /* stp_fetcher_channels */
}

static int wrap(struct fetch_src *fs, const char *shown, unsigned timeout_s,
		struct stp_imgsrc **out)
{
	struct stp_fetcher *f = &fs->f;
	int err = stp_remote_open(f->chans, f->nchans, f->size, stp_fetcher_silence_s(timeout_s), shown, false,
				  &fs->remote);

	if (!err && !(fs->src.name = strdup(shown)))
		err = -ENOMEM;
	if (err)
		return err;
	fs->src.pread = fetch_pread;
	fs->src.stats = fetch_stats;
	fs->src.close = fetch_close;
	fs->src.size = f->size;
	fs->src.fd = -1;
	*out = &fs->src;
	return 0;
}

int stp_fetchsrc_open(const struct stp_cli *cli, const struct stp_cli_url *u,
		      struct stp_imgsrc **out)
{
	struct fetch_src *fs = calloc(1, sizeof(*fs));
	char *shown = stp_http_url_public(u->url), prog[64];
	struct stp_mount_opts o;
	int err = fs && shown ? 0 : -ENOMEM;

	snprintf(prog, sizeof(prog), "stipple %s", cli->name);
	if (err) {
		fprintf(stderr, "%s: %s\n", prog, stp_strerror(err));
		goto fail;
	}
	reader_opts(u, shown, &o);
	err = stp_fetcher_prepare(&o, prog, &fs->f);
	if (!err)
		err = stp_fetcher_greet(&o, prog, &fs->f, spawn_fetcher(&fs->f, shown), NULL);
	if (err)
		goto fail;
	stp_fetcher_close_ctl(&fs->f); /* a published image: no store */
	err = wrap(fs, shown, o.timeout_s, out);
	if (!err) {
		free(shown);
		return 0;
	}
	fprintf(stderr, "%s: %s: %s\n", prog, shown, stp_strerror(err));
	stp_imgsrc_close(fs->remote);
	stp_fetcher_stop(&fs->f);
fail:
	free(fs);
	free(shown);
	return err;
}
