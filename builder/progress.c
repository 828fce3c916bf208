/* SPDX-License-Identifier: MIT */
/* Phases, percentages, rates and times left, drawn in place. */
#include "progress.h"

#include <stdio.h>

#include "report.h"
#include "util.h"

#define REDRAW_NS 200000000ull /* five times a second at most */

static struct {
	int on;
	const char *name;
	uint64_t total, start_ns, drawn_ns;
} pg;

void progress_enable(int on)
{
	pg.on = on;
}

/* "1:02:03" or "2:03" for SECS seconds. */
static void clock_text(uint64_t secs, char *buf, size_t len)
{
	if (secs >= 3600)
		snprintf(buf, len, "%llu:%02llu:%02llu", (unsigned long long)(secs / 3600),
			 (unsigned long long)(secs / 60 % 60), (unsigned long long)(secs % 60));
	else
		snprintf(buf, len, "%llu:%02llu", (unsigned long long)(secs / 60),
			 (unsigned long long)(secs % 60));
}

static void draw(uint64_t done, uint64_t entries, uint64_t now)
{
	char line[160], a[32], b[32], r[32], eta[32];
	double secs = (double)(now - pg.start_ns) / 1e9;
	double rate = secs > 0 ? (double)done / secs : 0;
	unsigned pct;

	if (!pg.total && !entries) {
		snprintf(line, sizeof(line), "mkstipple: %s...", pg.name);
		report_status(line);
		return;
	}
	if (!pg.total) {
		snprintf(line, sizeof(line), "mkstipple: %s: %llu entries, %s", pg.name,
			 (unsigned long long)entries, stp_human_size(done, a, sizeof(a)));
		report_status(line);
		return;
	}
	if (done > pg.total)
		done = pg.total;
	pct = (unsigned)(100.0 * (double)done / (double)pg.total);
	if (pct == 100 && done < pg.total)
		pct = 99;
	if (rate >= 1 && done < pg.total)
		clock_text((uint64_t)((double)(pg.total - done) / rate + 0.5), eta, sizeof(eta));
	else
		snprintf(eta, sizeof(eta), "%s", done < pg.total ? "-:--" : "0:00");
	snprintf(line, sizeof(line), "mkstipple: %s: %3u%%  %s of %s  %s/s  ETA %s", pg.name, pct,
		 stp_human_size(done, a, sizeof(a)), stp_human_size(pg.total, b, sizeof(b)),
		 stp_human_size((uint64_t)rate, r, sizeof(r)), eta);
	report_status(line);
}

void progress_phase(const char *name, uint64_t total)
{
	if (!pg.on)
		return;
	pg.name = name;
	pg.total = total;
	pg.start_ns = pg.drawn_ns = stp_now_ns();
	draw(0, 0, pg.start_ns);
}

void progress_set(uint64_t done, uint64_t entries)
{
	uint64_t now;

	if (!pg.on)
		return;
	now = stp_now_ns();
	if (now - pg.drawn_ns < REDRAW_NS)
		return;
	pg.drawn_ns = now;
	draw(done, entries, now);
}

void progress_end(void)
{
	if (pg.on)
		report_status(NULL);
}
