/* SPDX-License-Identifier: MIT */
#include "progress.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "image.h"
#include "imgsrc.h"
#include "util.h"

#define REDRAW_NS (200ull * 1000 * 1000) /* at most 5 lines a second */

typedef int (*pread_fn)(struct stp_imgsrc *src, void *buf, size_t len, uint64_t off);

static struct {
	pthread_mutex_t lock;      /* drawing and clearing */
	atomic_bool wanted;
	bool attached, shown;
	const char *name;
	pread_fn pread;            /* the source's own read */
	atomic_uint_fast64_t done, next_ns;
	uint64_t total, start_ns;
} prog = { .lock = PTHREAD_MUTEX_INITIALIZER };

void stp_progress_want(const char *name, bool quiet)
{
	prog.name = name;
	atomic_store(&prog.wanted, !quiet && isatty(STDERR_FILENO));
}

/* "1:05" or "2:03:04"; "--" before there is a rate. */
static const char *duration(double secs, char *buf, size_t len)
{
	uint64_t s = (uint64_t)(secs + 0.5);

	if (!(secs >= 0) || secs > 360000)
		snprintf(buf, len, "--");
	else if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, s / 3600, s / 60 % 60,
			 s % 60);
	else
		snprintf(buf, len, "%" PRIu64 ":%02" PRIu64, s / 60, s % 60);
	return buf;
}

/* Under prog.lock. The image's size bounds what a pass reads; a re-read may pass it. */
static void draw(uint64_t now)
{
	uint64_t done = atomic_load(&prog.done), total = prog.total ? prog.total : 1;
	double secs = (double)(now - prog.start_ns) / 1e9;
	double rate = secs > 0.1 ? (double)done / secs : 0;
	char d[32], t[32], r[32], left[32];
	unsigned pct;

	if (done > total)
		done = total;
	pct = (unsigned)(done * 100 / total);
	fprintf(stderr, "\r%s: %s of %s (%u%%), %s/s, %s left\033[K", prog.name,
		stp_human_size(done, d, sizeof(d)), stp_human_size(prog.total, t, sizeof(t)),
		pct < 100 ? pct : 99, rate > 0 ? stp_human_size((uint64_t)rate, r, sizeof(r)) : "--",
		duration(rate > 0 ? (double)(total - done) / rate : -1, left, sizeof(left)));
	fflush(stderr);
	prog.shown = true;
}

static void maybe_draw(void)
{
	uint64_t now = stp_now_ns(), next = atomic_load(&prog.next_ns);

	if (now < next || !atomic_compare_exchange_strong(&prog.next_ns, &next, now + REDRAW_NS))
		return;
	pthread_mutex_lock(&prog.lock);
	if (atomic_load(&prog.wanted))
		draw(now);
	pthread_mutex_unlock(&prog.lock);
}

static int counting_pread(struct stp_imgsrc *src, void *buf, size_t len, uint64_t off)
{
	int err = prog.pread(src, buf, len, off);

	if (!err) {
		atomic_fetch_add(&prog.done, len);
		maybe_draw();
	}
	return err;
}

void stp_progress_attach(struct stp_image *img)
{
	struct stp_imgsrc *src = stp_image_src(img);

	if (!atomic_load(&prog.wanted))
		return;
	pthread_mutex_lock(&prog.lock);
	atomic_store(&prog.done, 0);
	prog.total = stp_image_sb(img)->image_size;
	prog.start_ns = stp_now_ns();
	if (src->pread != counting_pread) { /* else a second pass over the same image */
		prog.pread = src->pread;
		src->pread = counting_pread;
	}
	if (!prog.attached)
		atexit(stp_progress_end);
	prog.attached = true;
	pthread_mutex_unlock(&prog.lock);
}

void stp_progress_clear(void)
{
	if (!prog.shown)
		return;
	pthread_mutex_lock(&prog.lock);
	if (prog.shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		prog.shown = false;
	}
	pthread_mutex_unlock(&prog.lock);
}

void stp_progress_end(void)
{
	atomic_store(&prog.wanted, false);
	stp_progress_clear();
}
