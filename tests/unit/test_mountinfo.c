/* SPDX-License-Identifier: MIT */
/* What is mounted where (mounthelper/mount/mountinfo.c), read from a mountinfo file
 * written here in the kernel's format: an automounter's autofs trigger is no mount. */
#include <errno.h>
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

static int top(const char *mp, char *source, char *fstype)
{
	return stp_mountinfo_top_from_file(table, mp, source, fstype, 64);
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

int main(void)
{
	int fd = mkstemp(table);

	if (fd < 0 || write(fd, table_text, sizeof(table_text) - 1) != sizeof(table_text) - 1)
		return perror(table), 1;
	close(fd);
	RUN(test_autofs_is_not_a_mount);
	unlink(table);
	return tap_done();
}
