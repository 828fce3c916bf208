/* SPDX-License-Identifier: MIT */
/*
 * mount.stipple, the mount(8) helper (also installed as mount.fuse.stipple):
 *   mount.stipple SOURCE DIR [-s] [-f] [-n] [-v] [-o OPTS] [-t TYPE] [-N NS]
 * Exit status as mount(8) expects: 0 mounted, 1 bad invocation (or run setuid), 32 mount
 * failure (an option refused for a user's mount among them).
 *
 * `stipple mount` runs the same monitor in its own process, and for a URL or verify=
 * execs mount.stipple-checked as
 *   mount.stipple-checked --stipple-mount [--foreground] SOURCE DIR [-o OPTS]...
 * (it has checked the options already): messages are then named "stipple mount", a
 * failure exits 1, and --foreground keeps the daemon attached (mount(8) never passes
 * either option).
 *
 * A URL or verify= needs libcrypto: this program, built without it, execs
 * mount.stipple-checked (the same source built with STP_HELPER_CHECKS and monchecks.c)
 * with the same arguments, once they have parsed and before any privileged call; a
 * local mount goes on here, sparing the library's start (about 4 ms of CPU).
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "escape.h"
#include "monitor.h"
#include "monmount.h"
#include "mountopts.h"
#include "progpath.h"
#include "setup.h"
#include "util.h"

#ifdef STP_HELPER_CHECKS
#include "monchecks.h"
#define CHECKS (&stp_monitor_checks)
#define HAS_CHECKS true
#else
#define CHECKS NULL
#define HAS_CHECKS false
#endif

#define EXIT_USAGE 1
#define EXIT_MOUNT_FAILED 32

static const char *prog = "mount.stipple";
static int exit_failed = EXIT_MOUNT_FAILED;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: mount.stipple IMAGE DIR [-s] [-f] [-n] [-v] [-o OPTIONS] [-t TYPE] [-N NS]\n"
		"Called by mount(8) for `mount -t stipple` and `mount -t fuse.stipple`; see\n"
		"mount.stipple(8). -f checks without mounting, -s drops unknown options.\n");
}

/* One line on stderr, escaped as the monitor's are: paths and option values are whoever
 * wrote the fstab line's or the command's, and may hold terminal controls. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fputs(prog, stderr);
	fputs(": ", stderr);
	stp_escape_put(stderr, line, strlen(line));
	fputc('\n', stderr);
}

/* -N: mount inside another mount namespace, given as a pid or a path. */
static int enter_namespace(const char *ns)
{
	char path[64];
	const char *p = ns;
	int err;

	if (strspn(ns, "0123456789") == strlen(ns)) {
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", ns);
		p = path;
	}
	err = stp_monitor_enter_namespace(p);
	if (err)
		say("namespace %s: %s", ns, stp_strerror(err));
	return err;
}

/* The arguments as given, for mount.stipple-checked: parsing hides a URL's query in
 * place, and `stipple mount`'s are shifted. NULL when out of memory. */
static char **copy_args(int argc, char **argv)
{
	char **copy = calloc((size_t)argc + 1, sizeof(*copy));

	for (int i = 0; copy && i < argc; i++)
		if (!(copy[i] = strdup(argv[i])))
			return NULL; /* the exec is not reached: nothing to free before the exit */
	return copy;
}

/* mount.stipple-checked, found as the monitor finds its programs (progpath.h), runs
 * ARGS; returns only when it cannot. */
static int exec_checked(char **args)
{
	char path[PATH_MAX];
	int err = args ? stp_progpath(STP_HELPER_CHECKED_NAME, STP_LIBEXEC_DIR, path, sizeof(path))
		       : -ENOMEM;

	if (!err)
		err = stp_monitor_exec_own(path, args);
	say("%s: %s", args ? path : STP_HELPER_CHECKED_NAME, stp_strerror(err));
	return exit_failed;
}

/* --stipple-mount [--foreground]: run for `stipple mount`; the arguments it took. */
static int front_end(struct stp_mount_opts *o, int argc, char **argv)
{
	int used = 0;

	if (argc > 1 && !strcmp(argv[1], "--stipple-mount")) {
		prog = "stipple mount";
		exit_failed = 1;
		used = 1;
		if (argc > 2 && !strcmp(argv[2], "--foreground")) {
			o->foreground = true;
			used = 2;
		}
	}
	return used;
}

/* What needs no options: --help, --version, and a setuid run refused. The exit status,
 * or -1 to go on. */
static int answered_early(int argc, char **argv)
{
	char err[256];

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		printf("mount.stipple " STP_VERSION "\n");
		return 0;
	}
	if (stp_mountopts_check_setid(err, sizeof(err))) {
		fprintf(stderr, "mount.stipple: %s, see mount.stipple(8)\n", err);
		return EXIT_USAGE;
	}
	return -1;
}

/* The mount (or with -f the checks) that ARGV asks for, after the USED arguments of the
 * front end, each step's refusal said: the exit status. ARGS: the command line as given,
 * for mount.stipple-checked. */
static int mount_as_told(struct stp_mount_opts *o, int used, int argc, char **argv,
			 char **args)
{
	char err[256];

	if (stp_mountopts_parse_helper(o, argc, argv, err, sizeof(err))) {
		say("%s", err);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!HAS_CHECKS && stp_mountopts_needs_checks(o))
		return exec_checked(args);
	if (used && stp_mountopts_take_url_env(o, err, sizeof(err))) {
		say("%s", err);
		return exit_failed;
	}
	if (stp_mountopts_check_user(o, err, sizeof(err))) {
		/* before -N: a refused namespace is never entered */
		say("%s", err);
		return exit_failed;
	}
	if (o->ns && enter_namespace(o->ns))
		return exit_failed; /* paths are the target namespace's: resolved there */
	if (stp_mountopts_finish(o, err, sizeof(err)) ||
	    stp_setup_check_opts(o, err, sizeof(err))) {
		/* a string the hand-over cannot carry: refused before anything is mounted */
		say("%s", err);
		return exit_failed;
	}
	if (o->verbose)
		say("%s on %s, options %s, cache budget %u blocks%s", o->image_path, o->mountpoint,
		    o->fuse_opts, o->cache_budget ? o->cache_budget : STP_CACHE_DEFAULT_BLOCKS,
		    o->cache_budget ? "" : " (more if the image's blocks are small)");
	if (o->fake)
		return stp_monmount_check(o, prog, CHECKS) ? exit_failed : 0;
	return stp_monmount_mount(o, prog, CHECKS) ? exit_failed : 0;
}

int main(int argc, char **argv)
{
	struct stp_mount_opts o;
	char **args = NULL;
	int status, used;

	if (stp_fill_stdio())
		return EXIT_MOUNT_FAILED;
	/* a message in one write, not one per byte (the escaping puts a byte at a time, and
	 * stderr is unbuffered): every line ends in a newline, which flushes it */
	setvbuf(stderr, NULL, _IOLBF, 0);
	status = answered_early(argc, argv);
	if (status >= 0)
		return status;
	if (!HAS_CHECKS)
		args = copy_args(argc, argv);
	stp_mountopts_init(&o);
	used = front_end(&o, argc, argv);
	argv[used] = argv[0];
	status = mount_as_told(&o, used, argc - used, argv + used, args);
	stp_mountopts_free(&o);
	/* Without the libraries' destructors (OpenSSL's clean-up, libmount's and libfuse's):
	 * they only give back memory the exit gives back anyway, faulting in pages the process
	 * never used, while mount(8) and `stipple mount` wait. */
	fflush(NULL);
	_exit(status);
}
