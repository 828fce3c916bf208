/* SPDX-License-Identifier: MIT */
/* `stipple mount IMAGE DIR`: serve an image through FUSE. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "monitor.h"
#include "mountopts.h"
#include "util.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: stipple mount IMAGE DIR [--cache-budget N] [--warm-workers N]\n"
		"                               [--no-prime] [--record FILE] [-o OPTIONS] [-f]\n"
		"\n"
		"Mounts IMAGE read-only on DIR and returns once the mount is live, leaving the\n"
		"daemon in the background. `umount DIR` or `fusermount3 -u DIR` ends it.\n"
		"\n"
		"  --cache-budget N   decoded blocks kept in memory (default %u, at least 1)\n"
		"  --warm-workers N   blocks of the hot region decoded at once at mount\n"
		"                     (default: one per CPU, here %u; 0 turns warming off)\n"
		"  --no-prime         return at once, without looking up the hot region's\n"
		"                     files first so that warming can fill the page cache\n"
		"  --record FILE      write the files read, with their ranges, to FILE as a\n"
		"                     hot list when the mount ends (mkstipple --hot-list)\n"
		"  -o OPTIONS         mount options, comma-separated, as in mount.stipple(8):\n"
		"                     allow_other, nosuid, nodev, noexec, cache_budget=N,\n"
		"                     sandbox=on|log|off, sandbox_user=NAME, ...\n"
		"  -f, --foreground   stay in the foreground; diagnostics go to stderr\n"
		"  -h, --help         show this help\n",
		STP_CACHE_BUDGET_DEFAULT, stp_mountopts_default_workers());
}

static int set_cache_budget(struct stp_mount_opts *o, const char *arg)
{
	uint64_t v;

	if (!strcmp(arg, "0")) {
		fprintf(stderr, "stipple mount: --cache-budget 0: the cache must hold at least 1 block\n");
		return -1;
	}
	if (stp_parse_uint(arg, 1, STP_CACHE_BUDGET_MAX, &v)) {
		fprintf(stderr, "stipple mount: --cache-budget %s: expected a number of blocks from 1 to %u\n",
			arg, STP_CACHE_BUDGET_MAX);
		return -1;
	}
	o->cache_budget = (uint32_t)v;
	return 0;
}

/* Options, then positionals; 0 to go on, else the exit status. */
static int parse_args(struct stp_mount_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cache-budget", required_argument, NULL, 'c' },
		{ "warm-workers", required_argument, NULL, 'w' },
		{ "record", required_argument, NULL, 'r' },
		{ "no-prime", no_argument, NULL, 'p' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[256], opt[4200];
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "o:fh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (set_cache_budget(o, optarg))
				return 2;
			break;
		case 'w':
		case 'r':
			/* the same checks as the -o spelling */
			snprintf(opt, sizeof(opt), "%s=%s", c == 'w' ? "warm_workers" : "record", optarg);
			if (strchr(optarg, ',') ||
			    stp_mountopts_parse_list(o, opt, err, sizeof(err))) {
				fprintf(stderr, "stipple mount: --%s %s: %s\n",
					c == 'w' ? "warm-workers" : "record", optarg,
					strchr(optarg, ',') ? "no commas, please" : err);
				return 2;
			}
			break;
		case 'o':
			if (stp_mountopts_parse_list(o, optarg, err, sizeof(err))) {
				fprintf(stderr, "stipple mount: %s\n", err);
				return 2;
			}
			break;
		case 'p': o->no_prime = true; break;
		case 'f': o->foreground = true; break;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "stipple mount: expected IMAGE and DIR\n");
		usage(stderr);
		return 2;
	}
	o->image = strdup(argv[optind]);
	o->mountpoint = strdup(argv[optind + 1]);
	if (!o->image || !o->mountpoint || stp_mountopts_finish(o, err, sizeof(err))) {
		fprintf(stderr, "stipple mount: %s\n", o->image ? err : "out of memory");
		return 1;
	}
	return 0;
}

int stp_cmd_mount(int argc, char **argv)
{
	struct stp_mount_opts o;
	int ret;

	stp_mountopts_init(&o);
	ret = parse_args(&o, argc, argv);
	if (!ret)
		ret = stp_monitor_mount(&o, "stipple mount") ? 1 : 0;
	stp_mountopts_free(&o);
	return ret < 0 ? 0 : ret;
}
