/* SPDX-License-Identifier: MIT */
/*
 * The monitor's state during one mount, shared by monmount.c, which orders the mount,
 * and the modules that do its other work: the keys (monkeys.c), a URL's superblock and
 * store (monurl.c), the mount point's checks (monpoint.c), the hot list to record into
 * (monrecord.c) and the priming lookups (monprime.c). Only those include it, as
 * erofs-utils' internal headers are included by its library alone; their privileged calls
 * are monitor.c's, which takes plain arguments and does not include it.
 *
 * Every descriptor is -1 when not open; monmount.c closes the monitor's own,
 * and the handover's go to the daemon (montalk.h). Used from the monitor's one thread.
 */
#ifndef STP_MONSTATE_H
#define STP_MONSTATE_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"
#include "montalk.h"
#include "sandbox.h"

struct stp_monitor_checks;

/* record='s list while the daemon writes it (monrecord.h); every descriptor -1 without. */
struct stp_mon_record {
	int dir_fd;               /* its directory, O_PATH */
	int fd;                   /* the list under TEMP: fsync'd before the rename */
	int done_fd;              /* the daemon says here the list is whole (monrecord.h) */
	char temp[NAME_MAX + 1];  /* the temporary name in the directory */
	const char *name;         /* the list's own name there (within o->record) */
};

struct stp_mon {
	const struct stp_mount_opts *o;
	const char *prog;
	const struct stp_monitor_checks *checks; /* NULL: no URL, no verify= (monitor.h) */
	struct stp_superblock sb;
	struct stp_handover h; /* what the daemon is handed; closed once it is */
	int mountd_fd;        /* stipple-mountd, opened before the mount (O_PATH) */
	int mp_fd;            /* O_PATH of the mount point, checked: root mounts on it */
	bool mp_mounted;      /* something may be mounted there (else no table is read) */
	struct stp_mon_record rec; /* record=: renamed into place once the daemon has ended */
	int parent_fd;        /* O_PATH of the mount point's parent: unmount beneath it */
	const char *base;     /* the mount point's last component */
	unsigned mounts_before; /* our kind of mount at the mount point, before the fork */
	pid_t pid;            /* the daemon */
	int pidfd;            /* the daemon, for signals that cannot reach a reused pid */
	bool reaped;          /* the daemon was waited for: never signal it again */
	int status;           /* its wait status, once reaped */
	bool mounted;         /* the daemon said the FUSE mount exists */
	dev_t mount_dev;      /* the device of the mount made, when root (0: not known) */
	int clone_fd;         /* the tree cloned to find it, for the watcher to close (-1) */
	int fuse_copy;        /* the mount's /dev/fuse, for the watcher (or -f) to see it end */
	bool lingered;        /* -f: the daemon stayed after the connection ended: ended */
	pid_t watcher;        /* forked before LIVE, waiting for its word (-1: none) */
	int watcher_go;       /* the watcher's word: a byte, it stays; closed, it goes */
	int64_t deadline;     /* CLOCK_MONOTONIC ns */
	sigset_t saved_mask;  /* the mask before the ending signals were held */
};

#endif
