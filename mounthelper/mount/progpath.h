/* SPDX-License-Identifier: MIT */
/*
 * Where the programs of stipple are: stipple-mountd and stipple-fetcher, which the
 * monitor execs as root, mount.stipple-checked, which mount.stipple and `stipple mount`
 * exec for a URL or verify=, and stipple-readers, which `stipple` execs for every
 * command but mount.
 *
 * Each is at an absolute path fixed when stipple is built (STP_LIBEXEC_DIR
 * from meson's libexecdir/stipple). Nothing the caller sets (no environment
 * variable, no argv[0]) can change it: root must never exec what a less privileged user
 * chose. The one exception is a program run from the build tree itself (tests): when the
 * running executable, as the kernel names it (/proc/self/exe), sits in the build
 * directory it was built in (STP_BUILD_DIR), the programs are taken from there too, as
 * git's RUNTIME_PREFIX does. An installed program never looks in the build tree, and
 * one built with -Dbuild_tree_programs=false (the package) holds no build path at all.
 *
 * Functions keep no state and are thread-safe.
 */
#ifndef STP_PROGPATH_H
#define STP_PROGPATH_H

#include <stddef.h>

#define STP_MOUNTD_NAME "stipple-mountd"
/* the daemon with libcrypto, for a URL or verify= (daemonchecks.h) */
#define STP_MOUNTD_CHECKED_NAME "stipple-mountd-checked"
#define STP_FETCHER_NAME "stipple-fetcher"
#define STP_HELPER_NAME "mount.stipple"
/* mount.stipple with libcrypto, which mount.stipple execs for a URL or verify= (monchecks.h) */
#define STP_HELPER_CHECKED_NAME "mount.stipple-checked"
/* every `stipple` command but mount (readers/main.c) */
#define STP_READERS_NAME "stipple-readers"

/* The descriptor on which an exec'd program finds its socket to the monitor. */
#define STP_MONITOR_FD 3

/* In the child about to exec such a program: FD becomes STP_MONITOR_FD, open across
 * the exec (a descriptor already there is replaced). 0 or a negative errno. */
int stp_progpath_place_socket(int fd);

/* The path of program NAME, installed in DIR (STP_LIBEXEC_DIR), into OUT
 * (CAP bytes). 0, or -ENAMETOOLONG. */
int stp_progpath(const char *name, const char *dir, char *out, size_t cap);

#endif
