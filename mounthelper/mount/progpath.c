/* SPDX-License-Identifier: MIT */
/* Where the programs of a mount are (progpath.h). */
#include "progpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef STP_BUILD_DIR
/* Whether the running executable sits in the build directory it was built in. */
static bool run_from_build_tree(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return false;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return !strcmp(exe, STP_BUILD_DIR);
}
#else
/* Built with -Dbuild_tree_programs=false (a package): installed paths only. */
static bool run_from_build_tree(void)
{
	return false;
}
#define STP_BUILD_DIR ""
#endif

int stp_progpath(const char *name, const char *dir, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", run_from_build_tree() ? STP_BUILD_DIR : dir, name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int stp_progpath_place_socket(int fd)
{
	if (fd == STP_MONITOR_FD)
		return fcntl(fd, F_SETFD, 0) ? -errno : 0;
	return dup2(fd, STP_MONITOR_FD) < 0 ? -errno : 0;
}
