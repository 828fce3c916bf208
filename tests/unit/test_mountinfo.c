/* SPDX-License-Identifier: MIT */
/* What is mounted where (mounthelper/mount/mountinfo.c), read from a mountinfo file
 * written here in the kernel's format: an automounter's autofs trigger is no mount; the
 * reader sees what libmount sees, in this process's real table and in a crafted one
 * (escapes, optional fields, an empty source); lines it cannot take fail the read. */
#include <errno.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mountinfo.h"

#include "check.h"

/* systemd's x-systemd.automount on /srv/app, the real mount on top once triggered; an
 * autofs trigger alone on /srv/idle; a plain mount on /data. */
static const char table_text[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"40 22 0:45 / /srv/app rw,relatime shared:30 - autofs systemd-1 rw,fd=45,pgrp=1,"
	"timeout=0,minproto=5,maxproto=5,direct,pipe_ino=1234\n"
	"41 40 0:50 / /srv/app ro,nosuid,nodev,relatime shared:31 - fuse.stipple "
	"/srv/app.stipple ro,user_id=0,group_id=0\n"
	"42 22 0:46 / /srv/idle rw,relatime shared:32 - autofs systemd-1 rw,fd=46,pgrp=1,"
	"timeout=0,minproto=5,maxproto=5,direct,pipe_ino=1235\n"
	"43 22 8:2 / /data rw,relatime shared:33 - ext4 /dev/sda2 rw\n";

static char table[] = "/tmp/test_mountinfo.XXXXXX";

/* Writes TEXT (LEN bytes) to the file PATH. */
static void put(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f || fwrite(text, 1, len, f) != len || fclose(f))
		perror(path), exit(1);
}

/* The top mount at MP in the mountinfo file PATH. */
static int top_of(const char *path, const char *mp, char *source, char *fstype)
{
	FILE *f = fopen(path, "re");
	int rc;

	if (!f)
		perror(path), exit(1);
	rc = stp_mountinfo_top_in(f, mp, source, fstype, 64);
	fclose(f);
	return rc;
}

static int top(const char *mp, char *source, char *fstype)
{
	return top_of(table, mp, source, fstype);
}

static void test_autofs_is_not_a_mount(void)
{
	char source[64], fstype[64];

	CHECK(top("/srv/idle", source, fstype) == -ENOENT,
	      "an autofs trigger alone: a mount goes on top of it");
	CHECK(top("/srv/app", source, fstype) == 0, "the real mount on the trigger counts");
	CHECK(!strcmp(fstype, "fuse.stipple") && !strcmp(source, "/srv/app.stipple"),
	      "%s %s", source, fstype);
	CHECK(top("/data", source, fstype) == 0 && !strcmp(fstype, "ext4") &&
	      !strcmp(source, "/dev/sda2"));
	CHECK(top("/nothing", source, fstype) == -ENOENT);
}

struct seen {
	struct stp_mountinfo_entry e[4096];
	char *text[4096][5];
	size_t n;
};

static int keep(const struct stp_mountinfo_entry *e, void *ctx)
{
	struct seen *s = ctx;
	const char *f[5] = { e->root, e->target, e->fstype, e->source, e->options };

	if (s->n == sizeof(s->e) / sizeof(s->e[0]))
		return -E2BIG;
	s->e[s->n] = *e;
	for (int i = 0; i < 5; i++)
		s->text[s->n][i] = strdup(f[i]);
	s->n++;
	return 0;
}

static int same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* Reads PATH with both readers and checks every mount is the same, in the same order;
 * at least MIN of them. */
static void check_as_libmount(const char *path, size_t min)
{
	static struct seen s;
	struct libmnt_table *tb = mnt_new_table_from_file(path);
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	size_t i = 0;

	s.n = 0;
	CHECK(tb && it, "libmount cannot read %s", path);
	FILE *f = fopen(path, "re");

	CHECK(f && stp_mountinfo_each(f, keep, &s) == 0, "%s", path);
	if (f)
		fclose(f);
	while (tb && it && !mnt_table_next_fs(tb, it, &fs) && i < s.n) {
		char **t = s.text[i];

		CHECK(s.e[i].dev == mnt_fs_get_devno(fs) && same(t[0], mnt_fs_get_root(fs)) &&
		      same(t[1], mnt_fs_get_target(fs)) && same(t[2], mnt_fs_get_fstype(fs)) &&
		      same(t[3], mnt_fs_get_source(fs)) && same(t[4], mnt_fs_get_fs_options(fs)),
		      "%s, mount %zu: %s %s %s '%s' %s", path, i, t[0], t[1], t[2], t[3], t[4]);
		for (int k = 0; k < 5; k++)
			free(t[k]);
		i++;
	}
	CHECK(i == s.n && s.n >= min && (size_t)mnt_table_get_nents(tb) == s.n,
	      "%s: %zu mounts, %d for libmount", path, s.n, mnt_table_get_nents(tb));
	mnt_free_iter(it);
	mnt_unref_table(tb);
}

static void test_the_real_table_reads_as_libmount_reads_it(void)
{
	check_as_libmount("/proc/self/mountinfo", 1);
}

/* Escaped paths, types and sources (space, tab, newline, backslash, and a backslash that
 * escapes nothing), no optional field or several, an empty source. */
static const char crafted[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"50 22 0:61 /sub\\040dir /srv/my\\040app\\011x rw,nosuid - fuse.stipple "
	"/srv/a\\134b\\012c.stp ro,user_id=1000,group_id=1000\n"
	"51 22 0:62 / /srv/plain rw master:3 propagate_from:2 unbindable - tmpfs  rw,size=4k\n"
	"52 22 259:65537 / /srv/back\\slash\\9 ro - squashfs none ro\n"
	"53 52 0:63 / /srv/back\\slash\\9 ro shared:9 - fuse.stipple\\040x src\\04 "
	"ro,user_id=0\n";

static void test_a_crafted_table_reads_as_libmount_reads_it(void)
{
	char source[64], fstype[64];

	put(table, crafted, sizeof(crafted) - 1);
	check_as_libmount(table, 5);
	CHECK(top_of(table, "/srv/my app\tx", source, fstype) == 0 &&
	      !strcmp(source, "/srv/a\\b\nc.stp") && !strcmp(fstype, "fuse.stipple"),
	      "%s %s", source, fstype);
	CHECK(top_of(table, "/srv/plain", source, fstype) == 0 &&
	      !*source && !strcmp(fstype, "tmpfs"), "'%s' %s", source, fstype);
}

/* Lines the kernel never writes fail the whole read rather than hide a mount. */
static void test_bad_lines_fail_the_read(void)
{
	static const char *const bad[] = {
		"22 1 8:1 / / rw,relatime shared:1 ext4 /dev/sda1 rw\n", /* no " - " */
		"22 1 8:1 / / rw - ext4\n",                               /* no source */
		"x 1 8:1 / / rw - ext4 /dev/sda1 rw\n",
		"22 1 8-1 / / rw - ext4 /dev/sda1 rw\n",
		"22 1 8:1 / / rw - ext4 /dev/sda1 rw extra\n",
	};
	size_t long_len = STP_MOUNTINFO_LINE_MAX + 64;
	char *longer = malloc(long_len + 1), source[64], fstype[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(table, bad[i], strlen(bad[i]));
		CHECK(top_of(table, "/", source, fstype) == -EBADMSG,
		      "%s", bad[i]);
	}
	if (!longer)
		return;
	snprintf(longer, long_len + 1, "22 1 8:1 / / rw - ext4 /dev/sda1 rw,");
	memset(longer + strlen(longer), 'a', long_len - strlen(longer));
	longer[long_len - 1] = '\n';
	put(table, longer, long_len);
	CHECK(top_of(table, "/", source, fstype) == -EOVERFLOW);
	free(longer);
}

int main(void)
{
	int fd = mkstemp(table);

	if (fd < 0 || write(fd, table_text, sizeof(table_text) - 1) != sizeof(table_text) - 1)
		return perror(table), 1;
	close(fd);
	RUN(test_autofs_is_not_a_mount);
	RUN(test_the_real_table_reads_as_libmount_reads_it);
	RUN(test_a_crafted_table_reads_as_libmount_reads_it);
	RUN(test_bad_lines_fail_the_read);
	unlink(table);
	return tap_done();
}
