/* SPDX-License-Identifier: MIT */
/* Mount option lists as mount(8) splits them (optstr.h). */
#include "optstr.h"

#include <errno.h>
#include <string.h>

bool stp_optstr_next(const char **cursor, struct stp_opt *op)
{
	const char *start = *cursor + strspn(*cursor, ","), *sep = NULL;
	bool quoted = false;

	for (const char *p = start; *p; p++) {
		const char *stop;

		quoted ^= *p == '"';
		if (quoted)
			continue;
		if (!sep && p > start && *p == '=')
			sep = p;
		if (*p != ',' && p[1]) /* a comma or the last character ends the item */
			continue;
		stop = *p == ',' ? p : p + 1;
		*op = (struct stp_opt){ start, (size_t)((sep ? sep : stop) - start), NULL, 0 };
		if (sep) {
			op->val = sep + 1;
			op->valsz = (size_t)(stop - sep - 1);
		}
		*cursor = *stop ? stop + 1 : stop;
		return true;
	}
	return false;
}

static bool named(const struct stp_opt *op, const char *name)
{
	return strlen(name) == op->namesz && !memcmp(op->name, name, op->namesz);
}

int stp_optstr_find(const char *list, const char *name, struct stp_opt *op)
{
	struct stp_opt item;

	while (stp_optstr_next(&list, &item))
		if (named(&item, name)) {
			if (op)
				*op = item;
			return 0;
		}
	return -ENOENT;
}

/* libmount's two maps, spelt as it spells them: "NAME" takes no value (given one, the
 * item is the file system's), "NAME=" and "NAME[=]" take one. An entry matches an item
 * whose name is a prefix of it followed by its end, '=' or '[' (so "user[" matches
 * "user[=]", as in libmount). The entries Debian 12's libmount 2.38 has (its sub and
 * nosub are built only where MS_NOSUB is defined, which glibc 2.36 does not). */
static const char *const linux_map[] = {
	"ro", "rw", "exec", "noexec", "suid", "nosuid", "dev", "nodev", "sync", "async",
	"dirsync", "remount", "bind", "rbind", "silent", "loud", "mand", "nomand", "atime",
	"noatime", "iversion", "noiversion", "diratime", "nodiratime", "relatime",
	"norelatime", "strictatime", "nostrictatime", "lazytime", "nolazytime", "unbindable",
	"runbindable", "private", "rprivate", "slave", "rslave", "shared", "rshared",
	"symfollow", "nosymfollow", NULL,
};

static const char *const user_map[] = {
	"defaults", "auto", "noauto", "user[=]", "nouser", "users", "nousers", "owner",
	"noowner", "group", "nogroup", "_netdev", "comment=", "loop[=]", "offset=",
	"sizelimit=", "encryption=", "nofail", "uhelper=", "helper=", "verity.hashdevice=",
	"verity.roothash=", "verity.hashoffset=", "verity.roothashfile=", "verity.fecdevice=",
	"verity.fecoffset=", "verity.fecroots=", "verity.roothashsig=",
	"verity.oncorruption=", NULL,
};

/* The entry of MAP that OP's name matches, or NULL. */
static const char *entry_of(const char *const *map, const struct stp_opt *op)
{
	for (; *map; map++)
		if (strlen(*map) >= op->namesz && !memcmp(*map, op->name, op->namesz) &&
		    strchr("=[", (*map)[op->namesz])) /* or its end: strchr finds the NUL */
			return *map;
	return NULL;
}

enum stp_optstr_map stp_optstr_map(const struct stp_opt *op)
{
	const char *ent;

	if (entry_of(linux_map, op))
		return op->valsz ? STP_OPTSTR_FS : STP_OPTSTR_VFS;
	/* libmount's prefixes: x-* and X-* comments, with or without a value */
	if (op->namesz >= 2 && (op->name[0] == 'x' || op->name[0] == 'X') && op->name[1] == '-')
		return STP_OPTSTR_USER;
	ent = entry_of(user_map, op);
	if (!ent)
		return STP_OPTSTR_FS;
	if (!strcmp(ent, "defaults"))
		return STP_OPTSTR_DROP;
	return op->valsz && !strchr(ent, '=') ? STP_OPTSTR_FS : STP_OPTSTR_USER;
}
