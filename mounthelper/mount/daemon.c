/* SPDX-License-Identifier: MIT */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "fuseops.h"
#include "image.h"
#include "log.h"
#include "mountopts.h"
#include "prime.h"
#include "record.h"
#include "sandbox.h"
#include "warm.h"

/* What the daemon tells the waiting parent, once: 0 when the mount is live, else the
 * errno and the reason. */
struct status_msg {
	int32_t err;
	char msg[500];
};

/* Where the daemon reports failure before it is live: the parent's pipe, or stderr. */
struct reporter {
	const char *prog;
	int fd; /* status pipe, -1 in the foreground */
};

static int report(const struct reporter *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int report(const struct reporter *r, int err, const char *fmt, ...)
{
	struct status_msg m = { .err = err };
	va_list ap;
	int n;

	n = snprintf(m.msg, sizeof(m.msg), "%s: ", r->prog);
	va_start(ap, fmt);
	vsnprintf(m.msg + n, sizeof(m.msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (r->fd < 0)
		fprintf(stderr, "%s\n", m.msg);
	else if (write(r->fd, &m, sizeof(m)) != sizeof(m))
		return err; /* the parent is gone: no one to tell */
	return err;
}

static int open_image(const struct stp_mount_opts *o, const char *prog, struct stp_image **img)
{
	int err = stp_image_open(o->image_path, img);

	if (err == -EUCLEAN)
		fprintf(stderr, "%s: %s: not a stipple image, or a damaged one\n", prog, o->image);
	else if (err == -EPROTONOSUPPORT)
		fprintf(stderr, "%s: %s: made by a newer stipple (unsupported format)\n", prog, o->image);
	else if (err)
		fprintf(stderr, "%s: %s: %s\n", prog, o->image, strerror(-err));
	return err;
}

static int check_mountpoint(const struct stp_mount_opts *o, const char *prog)
{
	struct stat st;

	if (stat(o->mountpoint, &st)) {
		fprintf(stderr, "%s: mount point %s: %s\n", prog, o->mountpoint, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: mount point %s: not a directory\n", prog, o->mountpoint);
		return -ENOTDIR;
	}
	return 0;
}

static const char *log_prog;

static void log_prefixed(enum stp_log_level level, const char *msg)
{
	fprintf(stderr, "%s: %s\n", log_prog, msg);
}


/* A daemon keeps no terminal. The sandbox allows no socket, so there is no syslog:
 * diagnostics of a background mount are lost; run with -f to see them. */
static int detach_stdio(const struct reporter *r)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return report(r, -errno, "/dev/null: %s", strerror(errno));
	for (int i = 0; i < 3; i++)
		dup2(fd, i);
	close(fd);
	return 0;
}

/* After the mount (it needs the mount privileges) and before the loop starts any thread
 * (capabilities, no_new_privs and seccomp are per thread). */
static int enter_sandbox(const struct stp_fs *fs, const struct reporter *r, int record_fd)
{
	int keep[4] = { fuse_session_fd(fs->se), stp_image_fd(fs->img) };
	size_t nkeep = 2;

	if (r->fd >= 0)
		keep[nkeep++] = r->fd;
	if (record_fd >= 0)
		keep[nkeep++] = record_fd;
	struct stp_sandbox_opts so = {
		.mode = fs->opts->sandbox,
		.user = fs->opts->sandbox_user,
		.keep_fds = keep,
		.nkeep = nkeep,
		.keep_stderr = fs->opts->foreground,
	};
	char err[256];
	int ret = stp_sandbox_enter(&so, err, sizeof(err));

	return ret ? report(r, ret, "sandbox: %s", err) : 0;
}

static struct fuse_session *new_session(struct stp_fs *fs, const struct reporter *r)
{
	char *argv[] = { (char *)r->prog, "-o", fs->opts->fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se;

	se = fuse_session_new(&args, &stp_fuseops, sizeof(stp_fuseops), fs);
	if (!se)
		report(r, -EINVAL, "libfuse refused the options '%s'", fs->opts->fuse_opts);
	return se;
}

static int run_loop(struct stp_fs *fs)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	int ret;

	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	ret = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return ret < 0 ? ret : 0;
}

/* Seen only in the foreground: a background daemon has no stderr. */
static void log_cache_stats(const struct stp_fs *fs)
{
	struct stp_cache_stats st;

	stp_cache_stats(fs->cache, &st);
	stp_log(STP_LOG_INFO, "%s: block cache: %llu hits, %llu misses, %llu blocks decoded, %llu failed",
		fs->opts->image, (unsigned long long)st.hits, (unsigned long long)st.misses,
		(unsigned long long)st.decoded, (unsigned long long)st.failures);
}

static void report_live(const struct reporter *r)
{
	struct status_msg live = { .err = 0 };

	if (r->fd < 0)
		return;
	/* a parent that went away needs no answer */
	if (write(r->fd, &live, sizeof(live)) != sizeof(live))
		live.err = -EPIPE;
	close(r->fd);
}

/* The hot list file is opened before the mount: once confined, no file can be opened. */
static int open_record(const struct stp_mount_opts *o, struct stp_fs *fs, const struct reporter *r,
		       int *fd)
{
	int err;

	*fd = -1;
	if (!o->record)
		return 0;
	*fd = open(o->record, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (*fd < 0)
		return report(r, -errno, "%s: %s", o->record, strerror(errno));
	err = stp_record_new(fs->img, &fs->recorder);
	return err ? report(r, err, "%s: %s", o->record, strerror(-err)) : 0;
}

/* Written as the mount ends; a moment after umount returns, when the daemon exits. */
static void write_record(const struct stp_fs *fs, int fd)
{
	int err;

	if (fd < 0)
		return;
	err = stp_record_write(fs->recorder, fd);
	close(fd);
	if (err)
		stp_log(STP_LOG_ERR, "%s: writing the hot list: %s", fs->opts->record, strerror(-err));
}

/* Before the mount: the hot list to record into, the block cache, the session. */
static int prepare_fs(const struct stp_mount_opts *o, struct stp_fs *fs, const struct reporter *r,
		      int *record_fd)
{
	int err = open_record(o, fs, r, record_fd);

	if (err)
		return err;
	err = stp_cache_new(fs->img, o->cache_budget, o->warm_workers + 1, &fs->cache);
	if (err)
		return report(r, err, "cannot create the block cache: %s", strerror(-err));
	fs->se = new_session(fs, r);
	return fs->se ? 0 : -EINVAL;
}

/* What a daemon gives up once the mount exists: its terminal and its directory (the
 * mount point is absolute, and a daemon holds no directory busy); signals now end the
 * loop. */
static int detach(const struct stp_mount_opts *o, struct fuse_session *se,
		  const struct reporter *r)
{
	int err = o->foreground ? 0 : detach_stdio(r);

	if (!err && !o->foreground && chdir("/"))
		err = report(r, -errno, "chdir /: %s", strerror(errno));
	if (!err && fuse_set_signal_handlers(se))
		err = report(r, -EIO, "cannot install signal handlers");
	return err;
}

/* Confined (it starts threads, and confinement is per thread), the mount is live: warm
 * it, tell the parent, serve until it is unmounted, then write the hot list. The mount
 * exists and this process may no longer unmount it: without warming it still serves
 * every byte, so a warming failure is logged, not fatal. */
static int serve_confined(struct stp_fs *fs, const struct reporter *r, int *record_fd)
{
	int err = stp_warm_start(fs, fs->opts->warm_workers, &fs->warmer);

	if (err)
		stp_log(STP_LOG_ERR, "%s: warming off: %s", fs->opts->image, strerror(-err));
	report_live(r);
	err = run_loop(fs);
	fuse_remove_signal_handlers(fs->se);
	stp_warm_stop(fs->warmer);
	fs->warmer = NULL;
	write_record(fs, *record_fd);
	*record_fd = -1; /* closed by the write */
	log_cache_stats(fs);
	return err;
}

/* Mount, confine, tell the parent, serve. Takes ownership of IMG. */
static int serve(const struct stp_mount_opts *o, struct stp_image *img, const struct reporter *r)
{
	struct stp_fs fs = {
		.img = img,
		.opts = o,
		.block_log = stp_image_sb(img)->block_log,
	};
	/* Set while this process may (and must) unmount on its way out. Once confined, it
	 * can no longer: the host's umount is what ends the mount. */
	bool must_unmount = false;
	int record_fd = -1, err;

	err = prepare_fs(o, &fs, r, &record_fd);
	if (!err && fuse_session_mount(fs.se, o->mountpoint))
		err = report(r, -EIO, "cannot mount %s on %s", o->image, o->mountpoint);
	else if (!err)
		must_unmount = true;
	if (!err)
		err = detach(o, fs.se, r);
	if (!err)
		err = enter_sandbox(&fs, r, record_fd);
	if (!err) {
		must_unmount = o->sandbox == STP_SANDBOX_OFF;
		err = serve_confined(&fs, r, &record_fd);
	}
	stp_warm_stop(fs.warmer);
	if (record_fd >= 0)
		close(record_fd);
	stp_record_free(fs.recorder);
	if (must_unmount)
		fuse_session_unmount(fs.se);
	if (fs.se)
		fuse_session_destroy(fs.se);
	stp_cache_free(fs.cache);
	stp_image_close(img);
	return err;
}

/* The parent's side: the daemon's verdict, or its exit status if it died first. */
static int wait_daemon(int fd, pid_t pid, const char *prog)
{
	struct status_msg m;
	ssize_t n;
	int status;

	do
		n = read(fd, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n == (ssize_t)sizeof(m)) {
		if (m.err)
			fprintf(stderr, "%s\n", m.msg);
		if (m.err)
			waitpid(pid, &status, 0);
		return m.err;
	}
	if (waitpid(pid, &status, 0) < 0)
		status = 0;
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s: the daemon died of signal %d before the mount was live\n", prog,
			WTERMSIG(status));
	else
		fprintf(stderr, "%s: the daemon exited before the mount was live\n", prog);
	return -EIO;
}

/* The mount is live: the files of the hot region are looked up before mount returns,
 * unless asked not to or nothing would warm them (no warming, or a recording mount,
 * which stores no page). In the foreground there is no mounting process to do it. */
static void prime(const struct stp_mount_opts *o, const char *prog, const struct stp_image *img)
{
	int err;

	if (!o->warm_workers || o->record || o->no_prime)
		return;
	err = stp_prime_mount(img, o->mountpoint);
	if (err)
		fprintf(stderr, "%s: warning: %s: priming the hot files: %s\n", prog, o->mountpoint,
			strerror(-err));
}

static int run_background(const struct stp_mount_opts *o, const char *prog, struct stp_image *img)
{
	struct reporter r = { .prog = prog };
	int fds[2], err;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC)) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		stp_image_close(img);
		return -errno;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		setsid();
		r.fd = fds[1];
		_exit(serve(o, img, &r) ? 1 : 0);
	}
	close(fds[1]);
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		close(fds[0]);
		stp_image_close(img);
		return -EAGAIN;
	}
	err = wait_daemon(fds[0], pid, prog);
	if (!err)
		prime(o, prog, img);
	stp_image_close(img);
	return err;
}

/* What both a mount and its check need: messages prefixed with PROG, the image opened,
 * the mount point checked. On success *img is the caller's. */
static int prepare(const struct stp_mount_opts *o, const char *prog, struct stp_image **img)
{
	int err;

	log_prog = prog;
	stp_log_set_handler(log_prefixed);
	err = open_image(o, prog, img);
	if (err)
		return err;
	err = check_mountpoint(o, prog);
	if (err)
		stp_image_close(*img);
	return err;
}

int stp_daemon_check(const struct stp_mount_opts *o, const char *prog)
{
	struct stp_image *img;
	int err = prepare(o, prog, &img);

	if (!err)
		stp_image_close(img);
	return err;
}

int stp_daemon_run(const struct stp_mount_opts *o, const char *prog)
{
	struct reporter r = { .prog = prog, .fd = -1 };
	struct stp_image *img;
	int err = prepare(o, prog, &img);

	if (err)
		return err;
	return o->foreground ? serve(o, img, &r) : run_background(o, prog, img);
}
