/* SPDX-License-Identifier: MIT */
/*
 * Mount option lists split as mount(8) splits them, without libmount, which would load
 * libblkid, libselinux and pcre2 at every mount's start (tests/bench/NOTES.md). The rules
 * are libmount 2.38's, and tests/unit/test_optstr.c checks them against libmount itself:
 * - items end at a comma outside double quotes; commas before an item are skipped, so
 *   empty items vanish; a backslash is an ordinary character;
 * - an item is NAME, or NAME=VALUE at its first '=' outside quotes that is not its
 *   first character; quotes stay in NAME and VALUE as written;
 * - a double quote left open ends the list there, silently, with what follows it.
 * stp_optstr_map then says which of mnt_split_optstr's lists an item joins: mount(8)'s
 * own (libmount's userspace map), the kernel's flags (its Linux map), the file
 * system's (anything else), or none ("defaults").
 *
 * Items point into the list, which the caller keeps. No state; thread-safe.
 */
#ifndef STP_OPTSTR_H
#define STP_OPTSTR_H

#include <stdbool.h>
#include <stddef.h>

struct stp_opt {
	const char *name;   /* NAMESZ bytes, at least one; not NUL-terminated */
	size_t namesz;
	const char *val;    /* NULL: no '='; else VALSZ bytes (maybe none) */
	size_t valsz;
};

/* The next item at *CURSOR into *OP, and *CURSOR past it: true; false at the end of the
 * list or at a quote left open (*CURSOR unchanged). */
bool stp_optstr_next(const char **cursor, struct stp_opt *op);

/* The first item of LIST named NAME into *OP (may be NULL): 0, or -ENOENT. */
int stp_optstr_find(const char *list, const char *name, struct stp_opt *op);

enum stp_optstr_map {
	STP_OPTSTR_DROP, /* "defaults", with or without a value */
	STP_OPTSTR_USER, /* mount(8)'s: user, nofail, x-*, comment=, loop... */
	STP_OPTSTR_VFS,  /* the kernel's flags: ro, nosuid, noatime, bind... */
	STP_OPTSTR_FS,   /* the rest, and a flag given a value (ro=1) */
};

/* Where mnt_split_optstr puts OP. */
enum stp_optstr_map stp_optstr_map(const struct stp_opt *op);

#endif
