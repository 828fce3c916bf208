/* SPDX-License-Identifier: MIT */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cache.h"
#include "diskcache.h"
#include "ending.h"
#include "escape.h"
#include "fill.h"
#include "fetcher.h"
#include "fuseops.h"
#include "image.h"
#include "imgsrc.h"
#include "inodes.h"
#include "log.h"
#include "metapages.h"
#include "monproto.h"
#include "mountopts.h"
#include "prime.h"
#include "readfail.h"
#include "record.h"
#include "sandbox.h"
#include "serveloop.h"
#include "sign.h"
#include "util.h"
#include "warm.h"

/* RLIMIT_FSIZE beyond the disk cache file: a foreground daemon's stderr may be a file. */
#define FSIZE_SLACK (1ull << 20)

struct stp_daemon {
	struct stp_fs fs;
	const char *prog;
	const struct stp_daemon_checks *checks; /* NULL: no URL, no verify= */
	int monitor_fd;   /* until the mount is live and the plan sent, else -1 */
	int record_fd;
	int record_done_fd; /* said on once the list is whole (monrecord.h) */
	int ending_fds[2]; /* the pipe the ending signals write to (ending.h) */
};

/* Where library messages go: to the monitor while it waits (the daemon has no terminal),
 * then to stderr, which is /dev/null unless in the foreground. Set from one thread
 * before any other starts. */
static const char *log_prog;
static int log_monitor_fd = -1;      /* protected by log_lock: warming threads log too */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* A line on stderr (a foreground mount's terminal), escaped as the monitor prints the
 * same text (escape.h): it may carry names from the image. */
static void put_line(const char *text, size_t len)
{
	stp_escape_put(stderr, text, len);
	fputc('\n', stderr);
}

static void log_handler(enum stp_log_level level, const char *msg)
{
	char line[512], plain[512];
	int n = snprintf(line, sizeof(line), "%s: %s", log_prog,
			 stp_log_user_text(msg, plain, sizeof(plain)));

	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	pthread_mutex_lock(&log_lock);
	if (log_monitor_fd < 0 || stp_msg_send(log_monitor_fd, STP_MSG_LOG, line, (size_t)n))
		put_line(line, (size_t)n);
	pthread_mutex_unlock(&log_lock);
}

int stp_daemon_fail(struct stp_daemon *d, int err, const char *fmt, ...)
{
	char text[480];
	int n = snprintf(text, sizeof(text), "%s: ", d->prog);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
	va_end(ap);
	if (d->monitor_fd < 0 || stp_msg_send_failed(d->monitor_fd, err, text))
		put_line(text, strlen(text));
	return err;
}

int stp_daemon_new(const struct stp_mount_opts *o, const char *prog,
		   const struct stp_daemon_checks *checks, struct stp_daemon **out)
{
	struct stp_daemon *d = calloc(1, sizeof(*d));
	char *argv[] = { (char *)prog, "-o", o->fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);

	if (!d)
		return -ENOMEM;
	d->fs.opts = o;
	d->prog = prog;
	d->checks = checks;
	d->monitor_fd = d->record_fd = d->record_done_fd = -1;
	d->fs.se = fuse_session_new(&args, &stp_fuseops, sizeof(stp_fuseops), &d->fs);
	if (!d->fs.se) {
		fprintf(stderr, "%s: libfuse refused the options '%s'\n", prog, o->fuse_opts);
		free(d);
		return -EINVAL;
	}
	*out = d;
	return 0;
}

struct fuse_session *stp_daemon_session(struct stp_daemon *d)
{
	return d->fs.se;
}

const struct stp_mount_opts *stp_daemon_opts(const struct stp_daemon *d)
{
	return d->fs.opts;
}

void stp_daemon_free(struct stp_daemon *d)
{
	if (!d)
		return;
	stp_warm_stop(d->fs.warmer);
	stp_fill_stop(d->fs.filler);
	stp_record_free(d->fs.recorder);
	stp_readfail_close(d->fs.readfail);
	stp_inodes_free(d->fs.inodes);
	if (d->fs.se)
		fuse_session_destroy(d->fs.se);
	stp_cache_free(d->fs.cache);
	free(d->fs.opened_dirs);
	stp_image_close((struct stp_image *)d->fs.img);
	if (d->record_fd >= 0)
		close(d->record_fd);
	if (d->record_done_fd >= 0)
		close(d->record_done_fd);
	if (d->monitor_fd >= 0)
		close(d->monitor_fd);
	free(d);
}

/* A daemon keeps no terminal (the sandbox does this too, but not when it is off). */
static int detach_stdio(struct stp_daemon *d)
{
	/* in an empty root already, /dev/null is the one opened before it */
	int ahead = stp_sandbox_null_fd();
	int fd = ahead >= 0 ? ahead : open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return stp_daemon_fail(d, -errno, "/dev/null: %s", stp_strerror(-errno));
	for (int i = 0; i < 3; i++)
		dup2(fd, i);
	if (fd != ahead)
		close(fd);
	return 0;
}

/* Not privileged, but done before the filter forbids it: the terminal and the working
 * directory (a daemon holds neither), the signals that end the loop, and the memory it
 * may use. */
static int detach(struct stp_daemon *d, uint64_t mem_limit)
{
	struct rlimit rl = { mem_limit, mem_limit };
	int err = d->fs.opts->foreground ? 0 : detach_stdio(d);

	signal(SIGPIPE, SIG_IGN); /* the monitor may be gone when the daemon writes to it */
	if (err)
		return err;
	if (!d->fs.opts->foreground && chdir("/"))
		return stp_daemon_fail(d, -errno, "chdir /: %s", stp_strerror(-errno));
	err = stp_ending_install(d->ending_fds);
	if (err)
		return stp_daemon_fail(d, err, "cannot install signal handlers: %s", stp_strerror(err));
	if (mem_limit && setrlimit(RLIMIT_DATA, &rl))
		return stp_daemon_fail(d, -errno, "limiting memory to %llu bytes: %s",
			    (unsigned long long)mem_limit, stp_strerror(-errno));
	return 0;
}

/* The most the daemon may write into a file (its RLIMIT_FSIZE; 0 when it has none to
 * write): the larger of the cache file's bound and the hot list's. */
static uint64_t file_size_max(const struct stp_daemon_fds *fds)
{
	uint64_t cache = fds->cache.fd >= 0 ? stp_diskcache_file_size(&fds->cache) + FSIZE_SLACK : 0;
	uint64_t record = fds->record >= 0 ? STP_RECORD_MAX : 0;

	return cache > record ? cache : record;
}

/* Before the loop starts any thread: capabilities, no_new_privs and seccomp are per
 * thread. */
static int enter_sandbox(struct stp_daemon *d, const struct stp_daemon_fds *fds)
{
	/* readfail: the failed-read outlet's socket (readfail.h) is kept too */
	int all[9] = { fuse_session_fd(d->fs.se), fds->image, fds->monitor, d->ending_fds[0],
		       d->ending_fds[1], fds->record, fds->record_done, fds->cache.fd,
		       stp_readfail_fd(d->fs.readfail) };
	int keep[9 + STP_FETCH_CHANS_MAX];
	struct stp_sandbox_opts so = {
		.mode = d->fs.opts->sandbox,
		.filter = fds->filter,
		.user = d->fs.opts->sandbox_user,
		.has_ids = fds->has_ids,
		.uid = fds->uid,
		.gid = fds->gid,
		.keep_fds = keep,
		.keep_stderr = d->fs.opts->foreground,
		/* the cache file reaches at most this, a hot list STP_RECORD_MAX */
		.file_size_max = file_size_max(fds),
	};
	char err[256];
	int ret;

	for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i] >= 0)
			keep[so.nkeep++] = all[i];
	for (unsigned i = 0; i < fds->nchans && i < STP_FETCH_CHANS_MAX; i++)
		keep[so.nkeep++] = fds->chans[i];
	ret = stp_sandbox_enter(&so, err, sizeof(err));

	return ret ? stp_daemon_fail(d, ret, "sandbox: %s", err) : 0;
}

/* Why the image cannot be opened, for the monitor to print. */
int stp_daemon_open_failed(struct stp_daemon *d, int err)
{
	const char *image = d->fs.opts->image;

	if (err == -EUCLEAN && d->fs.opts->is_url) /* a fetch that failed reads as EIO */
		return stp_daemon_fail(d, err, "%s: not a stipple image, a damaged one, or one that could "
			    "not be fetched (said above)", image);
	if (err == -EUCLEAN)
		return stp_daemon_fail(d, err, "%s: not a stipple image, or a damaged one", image);
	if (err == -EPROTONOSUPPORT)
		return stp_daemon_fail(d, err, "%s: made by a newer stipple (unsupported format)", image);
	return stp_daemon_fail(d, err, "%s: %s", image, stp_strerror(err));
}

/* The image source: the descriptor, or a URL's channels to the fetcher with the disk
 * cache (daemonchecks.h: not in stipple-mountd, which the monitor runs for no URL). */
static int open_source(struct stp_daemon *d, const struct stp_daemon_fds *fds,
		       struct stp_imgsrc **src, struct stp_diskcache **cache)
{
	*cache = NULL;
	if (!fds->nchans)
		return stp_imgsrc_open_fd(fds->image, d->fs.opts->image_path, src);
	return d->checks ? d->checks->open_url(d, fds, src, cache) : -EPROTONOSUPPORT;
}

/* The walks before LIVE (warming and priming plans) run with at least the walk budget of
 * pages and a bound on their page loads (image.h): an image laid out so that they cycle
 * through more pages than that is refused at once, not at the monitor's deadline. */
static void walks_begin(const struct stp_image *img, const struct stp_mount_opts *o)
{
	size_t budget = (size_t)o->meta_cache;

	stp_image_set_meta_budget(img, budget > STP_IMAGE_WALK_BUDGET ? budget
									: STP_IMAGE_WALK_BUDGET);
	stp_image_bound_walk_loads(img, true);
}

static bool walks_refused(const struct stp_image *img)
{
	struct stp_metapages_stats st;

	stp_image_meta_stats(img, &st);
	return st.refused != 0;
}

/* The walks are over: meta_cache= from now on, and no bound (a request that cycles is
 * slow, not wrong). -ENOBUFS when the bound refused a page. */
static int walks_end(struct stp_daemon *d)
{
	const struct stp_image *img = d->fs.img;
	struct stp_metapages_stats st;

	stp_image_meta_stats(img, &st);
	stp_image_bound_walk_loads(img, false);
	stp_image_set_meta_budget(img, (size_t)d->fs.opts->meta_cache);
	if (!st.refused)
		return 0;
	return stp_daemon_fail(d, -ENOBUFS, "%s: metadata walk thrashes: the walks at mount decoded %llu "
		    "metadata pages for an image of %llu, more than %u a page, and wanted more; "
		    "its tables are laid out to defeat the page cache", d->fs.opts->image,
		    (unsigned long long)st.loads,
		    (unsigned long long)stp_meta_pages(stp_image_sb(img)),
		    STP_IMAGE_WALK_LOADS_PER_PAGE);
}

/* verify=: through daemonchecks.h, which stipple-mountd lacks (the monitor runs
 * stipple-mountd-checked for it); SRC is taken over either way. */
static int open_verified(struct stp_daemon *d, const struct stp_daemon_fds *fds,
			 struct stp_imgsrc *src, struct stp_image **img)
{
	if (d->checks)
		return d->checks->open_verified(d, fds, src, img);
	stp_imgsrc_close(src);
	return stp_daemon_open_failed(d, -EPROTONOSUPPORT);
}

/* The first look past the superblock: confined, like everything after it. */
static int open_image(struct stp_daemon *d, const struct stp_daemon_fds *fds)
{
	struct stp_image *img;
	struct stp_imgsrc *src;
	struct stp_diskcache *cache;
	int err = open_source(d, fds, &src, &cache);

	if (err)
		err = stp_daemon_open_failed(d, err);
	else if (fds->nkeys)
		err = open_verified(d, fds, src, &img);
	else if ((err = stp_image_open_src(src, &img)))
		err = stp_daemon_open_failed(d, err);
	if (err)
		return err;
	walks_begin(img, d->fs.opts);
	if (cache)
		d->checks->expect_blocks(cache, img);
	d->fs.img = img;
	return 0;
}

/* The block cache and the recorder: they size themselves from the image. */
static int prepare_fs(struct stp_daemon *d)
{
	const struct stp_mount_opts *o = d->fs.opts;
	int err = stp_cache_new(d->fs.img, stp_mountopts_cache_budget(o, stp_image_sb(d->fs.img)),
				stp_mountopts_cache_extra(o), &d->fs.cache);

	if (err)
		return stp_daemon_fail(d, err, "cannot create the block cache: %s", stp_strerror(err));
	if (o->record && (err = stp_record_new(d->fs.img, &d->fs.recorder)))
		return stp_daemon_fail(d, err, "%s: %s", o->record, stp_strerror(err));
	/* pages of it are touched only where directories are opened; NULL keeps every listing */
	d->fs.inode_count = stp_image_sb(d->fs.img)->inode_count;
	if ((err = stp_inodes_new(d->fs.inode_count, &d->fs.inodes)))
		return stp_daemon_fail(d, err, "cannot create the inode table: %s", stp_strerror(err));
	d->fs.opened_dirs = calloc(((size_t)d->fs.inode_count + 7) / 8, 1);
	return 0;
}

/* Live: the monitor may return. It gets the priming plan first when it waits for one;
 * from then on diagnostics go to stderr. */
static void report_live(struct stp_daemon *d, const struct stp_prime_plan *plan)
{
	int err = stp_msg_send(d->monitor_fd, STP_MSG_LIVE, NULL, 0);

	if (!err && stp_prime_wanted(d->fs.opts)) {
		err = stp_prime_plan_send(plan, d->monitor_fd);
		if (err && err != -EPIPE)
			stp_log(STP_LOG_WARN, "%s: no priming plan: %s", d->fs.opts->image,
				stp_strerror(err));
	}
	pthread_mutex_lock(&log_lock);
	log_monitor_fd = -1;
	pthread_mutex_unlock(&log_lock);
	close(d->monitor_fd);
	d->monitor_fd = -1;
}

/* Seen only in the foreground: a background daemon has no stderr. */
static void log_cache_stats(const struct stp_fs *fs)
{
	struct stp_cache_stats st;
	struct stp_imgsrc_stats ns;

	stp_cache_stats(fs->cache, &st);
	stp_log(STP_LOG_INFO, "%s: block cache: %llu hits, %llu misses, %llu blocks decoded, %llu failed",
		fs->opts->image, (unsigned long long)st.hits, (unsigned long long)st.misses,
		(unsigned long long)st.decoded, (unsigned long long)st.failures);
	if (!stp_imgsrc_stats(stp_image_src(fs->img), &ns))
		stp_log(STP_LOG_INFO, "%s: %llu requests (%llu retries), %llu bytes fetched, "
			"%llu reads failed, %llu bytes read from the disk cache", fs->opts->image,
			(unsigned long long)ns.requests, (unsigned long long)ns.retries,
			(unsigned long long)ns.bytes, (unsigned long long)ns.failures,
			(unsigned long long)ns.cache_bytes);
}

/* The list is whole: the daemon says so and waits until the monitor's side (the watcher,
 * or -f's monitor) has put it in place and closed its end, so that the list is there
 * once the daemon has exited. End of file at once when no one holds that end. */
static void hand_over_record(struct stp_daemon *d)
{
	char c;

	if (write(d->record_done_fd, "w", 1) != 1) {
		stp_log(STP_LOG_ERR, "%s: the hot list could not be handed over: %s",
			d->fs.opts->record, stp_strerror(-errno));
		return;
	}
	while (read(d->record_done_fd, &c, 1) < 0 && errno == EINTR)
		;
}

/* Written as the mount ends; a moment after umount returns, when the daemon exits. */
static void write_record(struct stp_daemon *d)
{
	int err;

	if (d->record_fd < 0 || !d->fs.recorder)
		return;
	err = stp_record_write(d->fs.recorder, d->record_fd, STP_RECORD_MAX);
	if (err) /* -EFBIG: cut after a whole line, still a list */
		stp_log(STP_LOG_ERR, "%s: writing the hot list: %s%s", d->fs.opts->record,
			stp_strerror(err), err == -EFBIG ? "" : ": the old one is kept");
	if ((!err || err == -EFBIG) && d->record_done_fd >= 0)
		hand_over_record(d);
}

/* The filler follows what the kernel is seen to open, from the first request on; the
 * loop starts its thread (start_beside). A failure goes to stderr. */
static void make_filler(struct stp_fs *fs)
{
	int err;

	if (stp_mountopts_fills(fs->opts) &&
	    (err = stp_fill_new(fs->img, fs->cache, fs->se, fs->inodes,
				fs->warmer ? stp_image_sb(fs->img)->hot_size : 0, &fs->filler)))
		stp_log(STP_LOG_ERR, "%s: filling off: %s", fs->opts->image, stp_strerror(err));
}

/* What a mount needs beside the loop, started by the loop's own thread while the first
 * requests are answered: the filler's thread, the one that ends the mount on a signal by
 * stopping LOOP, and then the metadata's readahead if no walk asked for it before LIVE
 * (walks_read_ahead). */
struct beside {
	struct stp_fs *fs;
	struct stp_serveloop *loop;
	bool read_ahead;
};

static void start_beside(void *arg)
{
	const struct beside *b = arg;
	struct stp_fs *fs = b->fs;
	int err;

	if (fs->filler && (err = stp_fill_run(fs->filler)))
		stp_log(STP_LOG_ERR, "%s: filling off: %s", fs->opts->image, stp_strerror(err));
	if ((err = stp_ending_start(fs->se, fs->warmer, fs->filler, b->loop)))
		stp_log(STP_LOG_WARN, "%s: a signal ends the mount without stopping warming "
			"first: %s", fs->opts->image, stp_strerror(err));
	if (b->read_ahead)
		stp_image_read_meta_ahead(fs->img);
}

/* Serves until the mount ends, from this thread at once (serveloop.h); SIGUSR1 wakes a
 * thread waiting for a request (stp_ending_install's handler). READ_AHEAD: the metadata's
 * readahead is still to be asked (start_beside). Returns 1 when a signal
 * or an error ended the mount, 0 when the host unmounted it. */
static int run_loop(struct stp_fs *fs, bool read_ahead)
{
	struct beside b = { fs, NULL, read_ahead };
	int err = stp_serveloop_new(fs->se, SIGUSR1, &b.loop);

	if (err) {
		stp_log(STP_LOG_ERR, "%s: %s", fs->opts->image, stp_strerror(err));
		return 1;
	}
	err = stp_serveloop_run(b.loop, start_beside, &b);
	err = stp_ending_finish() || err;
	stp_serveloop_free(b.loop); /* the ending thread, which stops it, is gone */
	return err;
}

/* The kernel's first request, FUSE's INIT, queued by the mount itself: answered here,
 * before the loop's threads start, so that whoever waits on the new mount (a stat,
 * mount(8)'s caller) goes on at once. Nothing read: the loop meets the same end (-ENODEV, the
 * mount gone) or reads the INIT itself (-EINTR). */
static void answer_init(struct fuse_session *se)
{
	struct fuse_buf buf = { .mem = NULL };

	if (fuse_session_receive_buf(se, &buf) > 0)
		fuse_session_process_buf(se, &buf);
	free(buf.mem);
}

/* The walks before LIVE (the warming plan for a hot region, the priming plan) read the
 * metadata from end to end: they get the readahead first, which a cold image needs;
 * without them it waits until the loop serves (stp_image_read_meta_ahead). */
static bool walks_read_ahead(const struct stp_fs *fs)
{
	if (!(fs->opts->warm_workers && stp_image_sb(fs->img)->hot_size) &&
	    !stp_prime_wanted(fs->opts))
		return false;
	stp_image_read_meta_ahead(fs->img);
	return true;
}

/* Confined, the mount is live: warm it, tell the monitor, serve until the mount ends.
 * Without warming it still serves every byte, so a warming failure is logged, not fatal.
 * Returns 0 when the host unmounted, 1 when a signal (or a loop error) ended the mount. */
static int serve_confined(struct stp_daemon *d)
{
	struct stp_fs *fs = &d->fs;
	struct stp_prime_plan *plan = NULL;
	bool read_ahead = walks_read_ahead(fs);
	int err = stp_warm_start(fs->img, fs->cache,
				 stp_mountopts_stores_pages(fs->opts) ? fs->se : NULL, fs->inodes,
				 fs->opts->warm_workers, &fs->warmer);

	if (err)
		stp_log(STP_LOG_ERR, "%s: warming off: %s", fs->opts->image, stp_strerror(err));
	if (stp_prime_wanted(fs->opts) && !walks_refused(fs->img)) {
		stp_image_bound_walk_loads(fs->img, true); /* a bound of its own, as a plan */
		stp_prime_plan_build(fs->img, &plan);
	}
	err = walks_end(d);
	if (!err)
		report_live(d, plan);
	stp_prime_plan_free(plan);
	if (err)
		return 1;
	answer_init(fs->se);
	make_filler(fs);
	if (fs->opts->is_url && d->checks)
		stp_ending_on_unmount(d->checks->halt_url, stp_image_src(fs->img));
	err = run_loop(fs, !read_ahead);
	write_record(d);
	log_cache_stats(fs);
	if (stp_warm_stop(fs->warmer) | stp_fill_stop(fs->filler)) {
		/* a warming or filling thread is stuck in the kernel: only exiting frees it */
		stp_log(STP_LOG_WARN, "%s: warming or filling did not stop; exiting", fs->opts->image);
		_exit(err == 0 ? STP_DAEMON_UNMOUNTED : STP_DAEMON_FAILED);
	}
	fs->warmer = NULL;
	fs->filler = NULL;
	return err;
}

int stp_daemon_serve(struct stp_daemon *d, const struct stp_daemon_fds *fds, uint64_t mem_limit)
{
	int err, status;

	d->monitor_fd = fds->monitor;
	d->record_fd = fds->record;
	d->record_done_fd = fds->record_done;
	log_prog = d->prog;
	log_monitor_fd = fds->monitor;
	stp_log_set_handler(log_handler);
	stp_sandbox_warn(d->fs.opts->sandbox); /* stderr is the user's */
	err = detach(d, mem_limit);
	/* readfail: the failed-read outlet connects to syslog while it still can (OpenSSL's
	 * set-up, d->checks->init, is done as early: mountd.c) */
	d->fs.readfail = fds->readfail;
	if (!err && !d->fs.readfail &&
	    (err = stp_readfail_open(STP_READFAIL_SOCKET, &d->fs.readfail)))
		stp_daemon_fail(d, err, "failed-read log: %s", stp_strerror(err));
	if (!err)
		err = enter_sandbox(d, fds);
	if (err) {
		if (fds->image >= 0)
			close(fds->image);
	} else {
		err = open_image(d, fds);
	}
	if (!err)
		err = prepare_fs(d);
	status = !err && serve_confined(d) == 0 ? STP_DAEMON_UNMOUNTED : STP_DAEMON_FAILED;
	stp_daemon_free(d);
	return status;
}
