/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level operations that serve an image read-only.
 *
 * Inode numbers as fuseino.h says. The image never changes, so every reply asks the kernel to cache it for
 * good: entries (negative ones too), attributes, file pages, directory listings and link
 * targets. READDIRPLUS replies carry attributes only where walkers are seen to use them
 * (fuseops.c, dir_attrs_for): building inodes nobody stats costs a walk more than the
 * lookups it saves. On an image that stores no extended attribute, getxattr answers
 * EOPNOTSUPP (except the status attribute of the root), which tools such as ls remember
 * for the whole mount instead of asking for every file. Lookups and forgets, and entries
 * given with attributes, are counted for the filler (fill.h), which keeps an index of the
 * regular files the kernel holds; nothing is allocated per open.
 *
 * Every operation may run on any thread of libfuse's multithreaded loop at once: they read
 * the immutable image and the thread-safe block cache only. Handlers reply themselves and
 * return nothing; failures reach the kernel as errnos (a damaged block as EIO) and are
 * logged through stp_log.
 */
#ifndef STP_FUSEOPS_H
#define STP_FUSEOPS_H

#include "fuseapi.h"
#include "fs.h"

/* The operations; the session's userdata is the mount's struct stp_fs. */
extern const struct fuse_lowlevel_ops stp_fuseops;

#endif
