/* SPDX-License-Identifier: MIT */
/* What is mounted where (mountinfo.h), through libmount. */
#include "mountinfo.h"

#include <errno.h>
#include <libmount.h>
#include <stdio.h>
#include <string.h>

typedef void (*look_fn)(struct libmnt_fs *fs, void *ctx);

/* Calls FN for each mount at MOUNTPOINT in the mountinfo file TABLE, in the order they
 * were made (the last is on top). No path is canonicalised: nothing on the mount is
 * looked at. */
static int each_mount_at(const char *table, const char *mountpoint, look_fn fn, void *ctx)
{
	struct libmnt_table *tb = mnt_new_table_from_file(table);
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int err = 0;

	if (!tb || !it)
		err = errno ? -errno : -ENOMEM;

	while (!err && !mnt_table_next_fs(tb, it, &fs)) {
		const char *target = mnt_fs_get_target(fs);

		if (target && !strcmp(target, mountpoint))
			fn(fs, ctx);
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return err;
}

struct ours {
	const char *source;
	unsigned *count;
	int *top;
};

static void look_ours(struct libmnt_fs *fs, void *ctx)
{
	struct ours *o = ctx;
	const char *type = mnt_fs_get_fstype(fs), *src = mnt_fs_get_source(fs);

	*o->top = type && src && !strcmp(type, "fuse.stipple") && !strcmp(src, o->source);
	*o->count += (unsigned)*o->top;
}

int stp_mountinfo_ours(const char *mountpoint, const char *source, unsigned *count, int *top)
{
	struct ours o = { source, count, top };

	*count = 0;
	*top = 0;
	return each_mount_at(STP_MOUNTINFO_SELF, mountpoint, look_ours, &o);
}

/* Whether FS's superblock option user_id= is UID. */
static int user_is(struct libmnt_fs *fs, uid_t uid)
{
	const char *opts = mnt_fs_get_fs_options(fs);
	char *value = NULL, num[24];
	size_t len = 0;

	if (!opts || mnt_optstr_get_option(opts, "user_id", &value, &len) || !value ||
	    len >= sizeof(num))
		return 0;
	snprintf(num, sizeof(num), "%u", (unsigned)uid);
	return strlen(num) == len && !memcmp(num, value, len);
}

int stp_mountinfo_made_for(dev_t dev, const char *source, uid_t uid)
{
	struct libmnt_table *tb = mnt_new_table_from_file(STP_MOUNTINFO_SELF);
	struct libmnt_fs *fs = tb ? mnt_table_find_devno(tb, dev, MNT_ITER_BACKWARD) : NULL;
	const char *type = fs ? mnt_fs_get_fstype(fs) : NULL;
	const char *src = fs ? mnt_fs_get_source(fs) : NULL;
	int ours = type && src && !strcmp(type, "fuse.stipple") && !strcmp(src, source) &&
		   user_is(fs, uid);

	if (!tb)
		return errno ? -errno : -ENOMEM;
	mnt_unref_table(tb);
	return ours ? 0 : -ESTALE;
}

struct top {
	char *source, *fstype;
	size_t cap;
	int found;
};

static void look_top(struct libmnt_fs *fs, void *ctx)
{
	struct top *t = ctx;
	const char *src = mnt_fs_get_source(fs), *type = mnt_fs_get_fstype(fs);

	snprintf(t->source, t->cap, "%s", src ? src : "none");
	snprintf(t->fstype, t->cap, "%s", type ? type : "?");
	/* an automounter's trigger waits for the real mount to go on top of it */
	t->found = !type || strcmp(type, "autofs");
}

int stp_mountinfo_top_from_file(const char *table, const char *mountpoint, char *source,
				char *fstype, size_t cap)
{
	struct top t = { source, fstype, cap, 0 };
	int err = each_mount_at(table, mountpoint, look_top, &t);

	return err ? err : t.found ? 0 : -ENOENT;
}

int stp_mountinfo_top(const char *mountpoint, char *source, char *fstype, size_t cap)
{
	return stp_mountinfo_top_from_file(STP_MOUNTINFO_SELF, mountpoint, source, fstype, cap);
}
