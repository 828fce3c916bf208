/* SPDX-License-Identifier: MIT */
/* stipple status: what a running mount is doing (see mountstatus.h for how it is asked). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "jsonout.h"
#include "mountstatus.h"
#include "util.h"

static const struct stp_cli cli = {
	.name = "status",
	.synopsis = "[--wait] [--timeout SECONDS] [--json] DIR",
	.summary = "Show the image, warming progress, cache use and memory of the mount at DIR.",
	.options = "  -w, --wait             return once warming is done, or holds all the\n"
		   "                         cache budget allows before the application reads\n"
		   "  -t, --timeout SECONDS  with --wait, give up after this long (exit 1)\n"
		   "  -j, --json             one JSON document instead (stipple(1))\n",
};


/* The value of KEY in the status text, or NULL. */
static const char *field(const char *text, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (!strncmp(l, key, klen) && l[klen] == '=') {
			size_t n = strcspn(l + klen + 1, "\n");

			if (n >= len)
				n = len - 1;
			memcpy(out, l + klen + 1, n);
			out[n] = 0;
			return out;
		}
	}
	return NULL;
}

static unsigned long long num(const char *text, const char *key)
{
	char v[64];

	return field(text, key, v, sizeof(v)) ? strtoull(v, NULL, 10) : 0;
}

static int query(const char *dir, char *buf, size_t len)
{
	ssize_t n = getxattr(dir, STP_STATUS_XATTR, buf, len - 1);

	if (n < 0) {
		int err = errno;

		if (err == ENODATA || err == ENOTSUP)
			stp_cli_error(&cli, "%s: not a stipple mount", dir);
		else
			stp_cli_error(&cli, "%s: %s", dir, stp_strerror(-err));
		return -err;
	}
	buf[n] = 0;
	return 0;
}

/* Resident and peak memory of the daemon, from /proc (the daemon cannot read it). */
static void daemon_memory(unsigned long long pid, char *rss, char *peak, size_t len)
{
	char path[64], line[256];
	FILE *f;

	snprintf(rss, len, "?");
	snprintf(peak, len, "?");
	snprintf(path, sizeof(path), "/proc/%llu/status", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long kb;

		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			stp_human_size(kb * 1024, rss, len);
		else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			stp_human_size(kb * 1024, peak, len);
	}
	fclose(f);
}

/* A URL mount's lines; a local one has no net_ keys. */
static void show_network(const char *text)
{
	char v[64], a[32], b[32];

	if (!field(text, "net_requests", v, sizeof(v)))
		return;
	printf("network:   %llu requests (%llu retries), %s fetched; reads failed: %llu\n",
	       num(text, "net_requests"), num(text, "net_retries"),
	       stp_human_size(num(text, "net_bytes"), a, sizeof(a)), num(text, "net_failures"));
	if (!num(text, "disk_cache"))
		printf("           disk cache off\n");
	else
		printf("           disk cache: %llu hits, %s read from it, %llu rejected\n",
		       num(text, "disk_cache_hits"),
		       stp_human_size(num(text, "disk_cache_bytes"), b, sizeof(b)),
		       num(text, "disk_cache_rejected"));
}

static void show(const char *text)
{
	char image[STP_STATUS_MAX], rss[32], peak[32], a[32], b[32];
	unsigned long long pid = num(text, "pid"), bs = num(text, "block_size");

	daemon_memory(pid, rss, peak, sizeof(rss));
	/* the text comes from the daemon, which reads the image: escape what it names */
	fputs("image:     ", stdout);
	if (field(text, "image", image, sizeof(image)))
		stp_cli_put_escaped(stdout, image, strlen(image));
	else
		putchar('?');
	putchar('\n');
	printf("daemon:    pid %llu, memory %s (peak %s)\n", pid, rss, peak);
	printf("metadata:  %s\n", stp_human_size(num(text, "metadata_bytes"), a, sizeof(a)));
	printf("cache:     %llu of %llu blocks of %s held, %llu in use; %llu hits, %llu misses\n",
	       num(text, "cache_resident"), num(text, "cache_budget"),
	       stp_human_size(bs, b, sizeof(b)), num(text, "cache_pinned"),
	       num(text, "cache_hits"), num(text, "cache_misses"));
	if (!num(text, "warm_workers") || !num(text, "hot_blocks"))
		printf("warming:   off (%s)\n", !num(text, "warm_workers_set") ? "no workers" :
		       !num(text, "hot_bytes") ? "no hot region" : "it did not start");
	else
		printf("warming:   %llu of %llu hot blocks%s, %llu held, %s into the page cache "
		       "(%llu workers)\n", num(text, "warmed"), num(text, "hot_blocks"),
		       num(text, "warm_done") ? " (done)" :
		       num(text, "warm_full") ? " (budget full: the rest as reads free blocks)" : "",
		       num(text, "warm_held"),
		       stp_human_size(num(text, "warm_stored_bytes"), a, sizeof(a)),
		       num(text, "warm_workers"));
	printf("reads:     %llu failed (%llu logged, %llu held back by the rate limit)\n",
	       num(text, "read_failures"), num(text, "read_failures_logged"),
	       num(text, "read_failures_suppressed"));
	show_network(text);
}

/* --- --json: the mount's keys as they are, numbers as numbers, and the daemon's memory --- */

/* VmRSS or VmHWM of PID in bytes, or -1. */
static json_int_t proc_bytes(unsigned long long pid, const char *key)
{
	char path[64], line[256];
	json_int_t bytes = -1;
	size_t klen = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%llu/status", pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':')
			bytes = (json_int_t)strtoll(line + klen + 1, NULL, 10) * 1024;
	fclose(f);
	return bytes;
}

static json_t *json_value(const char *v, size_t len)
{
	size_t digits = strspn(v, "0123456789");

	if (digits && digits == len && len < 19)
		return json_integer(strtoll(v, NULL, 10));
	return stp_json_bytes(v, len);
}

static int show_json(const char *dir, const char *text)
{
	json_t *doc = json_pack("{s:o?}", "mount", stp_json_bytes(dir, strlen(dir)));
	unsigned long long pid = num(text, "pid");

	for (const char *l = text; doc && *l; ) {
		size_t n = strcspn(l, "\n"), k = strcspn(l, "=");

		if (k < n && k < 64) {
			char key[64];

			memcpy(key, l, k);
			key[k] = 0;
			json_object_set_new(doc, key, json_value(l + k + 1, n - k - 1));
		}
		l += n + (l[n] == '\n');
	}
	if (doc)
		json_object_update_new(doc, json_pack("{s:I,s:I}", "rss_bytes",
				       proc_bytes(pid, "VmRSS"), "peak_bytes", proc_bytes(pid, "VmHWM")));
	return stp_json_print(&cli, doc);
}

static int wait_done(const char *dir, char *buf, double timeout)
{
	uint64_t start = stp_now_ns();
	struct timespec nap = { 0, 20 * 1000 * 1000 };

	for (;;) {
		int rc = query(dir, buf, STP_STATUS_MAX);

		if (rc)
			return rc;
		/* full: as warm as the budget allows until the application reads */
		if (num(buf, "warm_done") || num(buf, "warm_full") || !num(buf, "warm_workers"))
			return 0;
		if (timeout > 0 && (double)(stp_now_ns() - start) / 1e9 > timeout) {
			stp_cli_error(&cli, "%s: warming not done after %g s", dir, timeout);
			return -ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
	}
}

int stp_cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		STP_CLI_LONGOPTS, { 0 }
	};
	char buf[STP_STATUS_MAX];
	double timeout = 0;
	int wait = 0, json = 0, opt, rc;

	stp_cli_init(&cli, argv);
	while ((opt = getopt_long(argc, argv, "jwt:" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		char *end;

		if (opt == 'w') {
			wait = 1;
		} else if (opt == 'j') {
			json = 1;
		} else if (opt == 't') {
			timeout = strtod(optarg, &end);
			if (*end || !(timeout > 0)) { /* NaN too */
				stp_cli_error(&cli, "--timeout %s: not a positive number of seconds", optarg);
				return STP_EXIT_USAGE;
			}
		} else {
			return stp_cli_other_option(&cli, opt);
		}
	}
	rc = stp_cli_operands(&cli, argc, 1, 1);
	if (rc)
		return rc;
	rc = wait ? wait_done(argv[optind], buf, timeout) : query(argv[optind], buf, sizeof(buf));
	if (rc)
		return STP_EXIT_FAIL;
	if (json)
		return show_json(argv[optind], buf) ? STP_EXIT_FAIL : STP_EXIT_OK;
	show(buf);
	return STP_EXIT_OK;
}
