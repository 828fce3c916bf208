/* SPDX-License-Identifier: MIT */
/*
 * `stipple mount IMAGE DIR`: serve an image through FUSE. The options are checked here,
 * so that a mistake is named as the user wrote it; then this process runs the monitor
 * (monmount.h), as mount.stipple does. A URL or verify= needs libcrypto, which `stipple`
 * does not load: the monitor is then mount.stipple-checked, exec'd as
 * `mount.stipple-checked --stipple-mount`.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "monitor.h"
#include "monmount.h"
#include "mountopts.h"
#include "progpath.h"
#include "setup.h"
#include "util.h"

static char mount_options[2048];

static const struct stp_cli mount_cli = {
	.name = "mount",
	.synopsis = "[--cache-budget N] [--warm-workers N] [--readahead SIZE] [--no-prime]\n"
		    "                     [--no-fill] [--record FILE] [--verify PUBKEY] [-o OPTIONS] [-f]\n"
		    "                     IMAGE DIR",
	.summary = "Mounts IMAGE read-only on DIR and returns once the mount is live, leaving the\n"
		   "daemon in the background. `umount DIR` or `fusermount3 -u DIR` ends it.\n"
		   "IMAGE may be an http:// or https:// URL: fetched as it is read, kept in a\n"
		   "disk cache (-o ca=FILE,proxy=URL,timeout=S,cache_dir=DIR,cache_size=SIZE).",
	.options = mount_options,
};

/* The option lists for mount.stipple, as -o arguments, in the order given. */
#define LISTS_MAX 30
static char *lists[LISTS_MAX];
static int nlists;

static int add_list(const char *list)
{
	if (nlists == LISTS_MAX) {
		stp_cli_error(&mount_cli, "too many options");
		return STP_EXIT_USAGE;
	}
	lists[nlists] = strdup(list);
	if (!lists[nlists]) {
		stp_cli_error(&mount_cli, "out of memory");
		return STP_EXIT_FAIL;
	}
	nlists++;
	return 0;
}


/* The defaults the help names depend on the machine. */
static void describe_options(void)
{
	snprintf(mount_options, sizeof(mount_options),
		 "  --cache-budget N   decoded blocks kept in memory, at least 1 (default %u,\n"
		 "                     or, when blocks are smaller, as many as fit in %llu MiB\n"
		 "                     or 1/%u of memory, up to the image's blocks)\n"
		 "  --warm-workers N   blocks of the hot region decoded at once at mount\n"
		 "                     (default: one per CPU, here %u; 0 turns warming off)\n"
		 "  --readahead SIZE   the kernel's readahead on the mount, 0 to 128K (default\n"
		 "                     %uK; mkstipple widens hot ranges by twice this)\n"
		 "  --no-prime         return at once, without looking up the hot region's\n"
		 "                     files first so that warming can fill the page cache\n"
		 "  --no-fill          a block decoded for a read gives the page cache only the\n"
		 "                     bytes read, not the other pages it holds of known files\n"
		 "  --record FILE      write the files read, with their ranges, to FILE as a\n"
		 "                     hot list when the mount ends (mkstipple --hot-list)\n"
		 "  --verify PUBKEY    refuse IMAGE unless it is signed by this public key (PEM),\n"
		 "                     and check every block read against the signed hashes;\n"
		 "                     -o verify uses the trusted keys in " STP_TRUSTED_KEYS_DIR "\n"
		 "  -o OPTIONS         mount options, comma-separated, as in mount.stipple(8):\n"
		 "                     allow_other, nosuid, nodev, noexec, cache_budget=N,\n"
		 "                     sandbox=on|log|off, sandbox_user=NAME, ...\n"
		 "  -f, --foreground   stay in the foreground; diagnostics go to stderr\n",
		 STP_CACHE_DEFAULT_BLOCKS, STP_CACHE_DEFAULT_BYTES >> 20, STP_CACHE_DEFAULT_SHARE,
		 stp_mountopts_default_workers(), STP_READAHEAD_DEFAULT >> 10);
}

/* --cache-budget, --warm-workers, --readahead, --record, --verify: the -o option NAME,
 * with its checks. */
static int set_option(struct stp_mount_opts *o, const char *flag, const char *name,
		      const char *value)
{
	char err[256], opt[4200];

	snprintf(opt, sizeof(opt), "%s=%s", name, value);
	if (strchr(value, ',')) {
		stp_cli_error(&mount_cli, "--%s %s: no commas, please", flag, value);
		return STP_EXIT_USAGE;
	}
	if (stp_mountopts_parse_list(o, opt, err, sizeof(err))) {
		stp_cli_error(&mount_cli, "--%s %s: %s", flag, value, err);
		return STP_EXIT_USAGE;
	}
	return add_list(opt);
}

/* One option character; 0 to go on, else the exit status (-1: exit 0 after --help). */
static int parse_option(struct stp_mount_opts *o, int c, const char *arg)
{
	char err[256];
	int status;

	switch (c) {
	case 'c': return set_option(o, "cache-budget", "cache_budget", arg);
	case 'w': return set_option(o, "warm-workers", "warm_workers", arg);
	case 'a': return set_option(o, "readahead", "readahead", arg);
	case 'r': return set_option(o, "record", "record", arg);
	case 'k': return set_option(o, "verify", "verify", arg);
	case 'o':
		if (stp_mountopts_parse_list(o, arg, err, sizeof(err))) {
			stp_cli_error(&mount_cli, "%s", err);
			return STP_EXIT_USAGE;
		}
		return add_list(arg);
	case 'p': o->no_prime = true; return add_list("noprime");
	case 'n': o->no_fill = true; return add_list("nofill");
	case 'f': o->foreground = true; return 0;
	default:
		describe_options(); /* for --help: the defaults read the machine */
		status = stp_cli_other_option(&mount_cli, c);
		return status == STP_EXIT_OK ? -1 : status;
	}
}

/* Options, then operands; 0 to go on, else the exit status (-1 for 0). */
static int parse_args(struct stp_mount_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cache-budget", required_argument, NULL, 'c' },
		{ "warm-workers", required_argument, NULL, 'w' },
		{ "readahead", required_argument, NULL, 'a' },
		{ "record", required_argument, NULL, 'r' },
		{ "verify", required_argument, NULL, 'k' },
		{ "no-prime", no_argument, NULL, 'p' },
		{ "no-fill", no_argument, NULL, 'n' },
		{ "foreground", no_argument, NULL, 'f' },
		STP_CLI_LONGOPTS, { 0 },
	};
	char err[256];
	int c, status;

	while ((c = getopt_long(argc, argv, "o:f" STP_CLI_SHORTOPTS, longopts, NULL)) != -1)
		if ((status = parse_option(o, c, optarg)))
			return status;
	if ((status = stp_cli_operands(&mount_cli, argc, 2, 2)))
		return status;
	o->image = strdup(argv[optind]);
	stp_mountopts_hide_query(argv[optind]);
	o->mountpoint = strdup(argv[optind + 1]);
	if (!o->image || !o->mountpoint || stp_mountopts_finish(o, err, sizeof(err))) {
		stp_cli_error(&mount_cli, "%s", o->image && o->mountpoint ? err : "out of memory");
		return STP_EXIT_FAIL;
	}
	return 0;
}

/* mount.stipple-checked --stipple-mount [--foreground] IMAGE DIR -o LIST...: the image
 * and the mount point as resolved here (absolute: no operand can pass for an option). A
 * URL's query (a presigned secret) is not on its command line, which every user can
 * read: the whole URL goes in its environment (STP_MOUNT_URL_ENV), which only its owner
 * can. */
static int exec_checked(const struct stp_mount_opts *o)
{
	char path[PATH_MAX], *argv[LISTS_MAX * 2 + 6], *shown = NULL;
	int argc = 0, err = stp_progpath(STP_HELPER_CHECKED_NAME, STP_LIBEXEC_DIR, path,
					 sizeof(path));

	if (!err && o->is_url) {
		shown = strdup(o->image);
		err = shown && !setenv(STP_MOUNT_URL_ENV, o->image, 1) ? 0 : -ENOMEM;
		if (shown)
			stp_mountopts_hide_query(shown);
	} else {
		unsetenv(STP_MOUNT_URL_ENV); /* not the caller's, for a file */
	}
	argv[argc++] = STP_HELPER_NAME;
	argv[argc++] = "--stipple-mount";
	if (o->foreground)
		argv[argc++] = "--foreground";
	argv[argc++] = o->is_url ? shown : o->image_path;
	argv[argc++] = o->mountpoint;
	for (int i = 0; i < nlists; i++) {
		argv[argc++] = "-o";
		argv[argc++] = lists[i];
	}
	argv[argc] = NULL;
	fflush(NULL);
	if (!err)
		err = stp_monitor_exec_own(path, argv);
	stp_cli_error(&mount_cli, "%s: %s", path, stp_strerror(err));
	free(shown);
	return STP_EXIT_FAIL;
}

/* The monitor, in this process: the mount, or its refusal said. The image is named by
 * its absolute path from here on, as mount(8) names a helper's source: the daemon's
 * messages go to the system log, far from the directory it was given in. */
static int mount_here(struct stp_mount_opts *o)
{
	char err[256], *shown = strdup(o->image_path);

	if (!shown) {
		stp_cli_error(&mount_cli, "out of memory");
		return STP_EXIT_FAIL;
	}
	free(o->image);
	o->image = shown;

	if (stp_setup_check_opts(o, err, sizeof(err))) {
		/* a string the hand-over cannot carry: refused before anything is mounted */
		stp_cli_error(&mount_cli, "%s", err);
		return STP_EXIT_FAIL;
	}
	return stp_monmount_mount(o, "stipple mount", NULL) ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_mount(int argc, char **argv)
{
	struct stp_mount_opts o;
	int ret;

	stp_cli_init(&mount_cli, argv);
	stp_mountopts_init(&o);
	ret = parse_args(&o, argc, argv);
	if (!ret)
		ret = stp_mountopts_needs_checks(&o) ? exec_checked(&o) : mount_here(&o);
	stp_mountopts_free(&o);
	for (int i = 0; i < nlists; i++)
		free(lists[i]);
	return ret < 0 ? STP_EXIT_OK : ret;
}
