/* SPDX-License-Identifier: MIT */
/*
 * `stipple`: the mount is run here, every other command (and --help, --version) by
 * stipple-readers, exec'd with the same arguments. So a mount's way loads one program
 * with the mount's libraries (libfuse, libseccomp) and no others, where exec'ing
 * mount.stipple from the readers' program cost a mount the readers' start (libcrypto's
 * above all) and a second exec; and no reader loads libfuse or libseccomp.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "monitor.h"
#include "mountopts.h"
#include "progpath.h"
#include "util.h"

/* stipple-readers, found as the monitor finds its programs (progpath.h), runs ARGV;
 * returns only when it cannot. */
static int exec_readers(char **argv)
{
	char path[PATH_MAX];
	int err = stp_progpath(STP_READERS_NAME, STP_LIBEXEC_DIR, path, sizeof(path));

	if (!err)
		err = stp_monitor_exec_own(path, argv);
	fprintf(stderr, "stipple: %s: %s\n", err == -ENAMETOOLONG ? STP_READERS_NAME : path,
		stp_strerror(err));
	return STP_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	char err[256];
	int status;

	if (stp_mountopts_check_setid(err, sizeof(err))) {
		fprintf(stderr, "stipple: %s, see stipple(1)\n", err);
		return STP_EXIT_FAIL;
	}
	if (argc < 2 || strcmp(argv[1], "mount"))
		return exec_readers(argv);
	if (stp_fill_stdio())
		return STP_EXIT_FAIL;
	/* a message in one write, not one per byte (the monitor's escaping puts a byte at a
	 * time): every line ends in a newline, which flushes it */
	setvbuf(stderr, NULL, _IOLBF, 0);
	status = stp_cmd_mount(argc - 1, argv + 1);
	/* without the libraries' destructors, as mount.stipple: they give back only memory
	 * the exit gives back, while the caller waits */
	fflush(NULL);
	_exit(status);
}
