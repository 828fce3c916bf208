/* SPDX-License-Identifier: MIT */
/* Mount option parsing: the mount(8) helper argv, -o lists, and the string for libfuse. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mountopts.h"

#include "check.h"

static char image[64];

/* Parses a helper argv given as a NULL-terminated list; returns the parser's result. */
static int parse_helper(struct stp_mount_opts *o, char *err, const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = "mount.stipple";
	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	stp_mountopts_init(o);
	return stp_mountopts_parse_helper(o, argc, argv, err, 256);
}

static void test_helper_defaults(void)
{
	struct stp_mount_opts o;
	char err[256], want[256];

	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "rw", NULL) == 0);
	CHECK(!strcmp(o.image, image) && !strcmp(o.mountpoint, "/tmp"));
	CHECK(o.cache_budget == STP_CACHE_BUDGET_DEFAULT);
	CHECK(o.sandbox == STP_SANDBOX_ON);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "ro,fsname=%s,subtype=stipple,max_read=%u", o.image_path,
		 STP_MAX_READ);
	CHECK(!strcmp(o.fuse_opts, want));
	CHECK(o.image_path[0] == '/');
	stp_mountopts_free(&o);
}

static void test_helper_flags(void)
{
	struct stp_mount_opts o;
	char err[256];

	/* options before the positionals, as some callers order them */
	CHECK(parse_helper(&o, err, "-s", "-f", "-n", "-v", "-t", "fuse.stipple", "-N", "1234",
			   image, "/tmp", NULL) == 0);
	CHECK(o.sloppy && o.fake && o.verbose);
	CHECK(o.ns && !strcmp(o.ns, "1234"));
	CHECK(!strcmp(o.mountpoint, "/tmp"));
	stp_mountopts_free(&o);

	CHECK(parse_helper(&o, err, image, NULL) == -EINVAL);
	stp_mountopts_free(&o);
	CHECK(parse_helper(&o, err, image, "/tmp", "/extra", NULL) == -EINVAL);
	CHECK(strstr(err, "/extra") != NULL);
	stp_mountopts_free(&o);
	CHECK(parse_helper(&o, err, image, "/tmp", "-x", NULL) == -EINVAL);
	stp_mountopts_free(&o);
	CHECK(parse_helper(&o, err, image, "/tmp", "-o", NULL) == -EINVAL);
	stp_mountopts_free(&o);
}

static void test_mount8_options_dropped(void)
{
	struct stp_mount_opts o;
	char err[256];

	CHECK(parse_helper(&o, err, image, "/tmp", "-o",
			   "defaults,auto,noauto,nofail,_netdev,user,users,nouser,x-systemd.automount,"
			   "X-mount.mkdir,comment=\"a,b\",user=alice,uhelper=udisks2,rw,ro", NULL) == 0);
	CHECK(o.passthrough == NULL);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	CHECK(strncmp(o.fuse_opts, "ro,", 3) == 0);
	CHECK(strstr(o.fuse_opts, "rw") == NULL && strstr(o.fuse_opts, "nofail") == NULL);
	stp_mountopts_free(&o);
}

static void test_own_options(void)
{
	struct stp_mount_opts o;
	char err[256];

	CHECK(parse_helper(&o, err, image, "/tmp", "-o",
			   "cache_budget=3,warm_workers=0,record=/tmp/hot.list,sandbox=log,"
			   "sandbox_user=nobody,noprime", NULL) == 0);
	CHECK(o.cache_budget == 3 && o.warm_workers == 0 && o.no_prime);
	CHECK(o.record && !strcmp(o.record, "/tmp/hot.list"));
	CHECK(o.sandbox == STP_SANDBOX_LOG);
	CHECK(o.sandbox_user && !strcmp(o.sandbox_user, "nobody"));
	CHECK(o.passthrough == NULL);
	stp_mountopts_free(&o);

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "cache_budget=0", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "cache_budget=0") && strstr(err, "at least 1"));
	CHECK(stp_mountopts_parse_list(&o, "cache_budget=x", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "cache_budget", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "warm_workers=100000", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "sandbox=maybe", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "sandbox=maybe") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "record=", err, sizeof(err)) == -EINVAL);
	CHECK(!o.no_prime);
	CHECK(stp_mountopts_parse_list(&o, "noprime=1", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "noprime") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "sandbox=off", err, sizeof(err)) == 0);
	CHECK(o.sandbox == STP_SANDBOX_OFF);
	stp_mountopts_free(&o);
}

static void test_fuse_options(void)
{
	struct stp_mount_opts o;
	char err[256];

	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "allow_other,nosuid,nodev",
			   "-o", "noatime,fsname=other,subtype=evil,max_read=4096", NULL) == 0);
	CHECK(o.allow_other);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	CHECK(strstr(o.fuse_opts, ",allow_other,default_permissions") != NULL);
	CHECK(strstr(o.fuse_opts, ",nosuid,nodev,noatime") != NULL);
	CHECK(strstr(o.fuse_opts, "other") == strstr(o.fuse_opts, "allow_other") + 6);
	CHECK(strstr(o.fuse_opts, "evil") == NULL && strstr(o.fuse_opts, "4096") == NULL);
	stp_mountopts_free(&o);

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "nosuid,bogus", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "'bogus'") != NULL);
	stp_mountopts_free(&o);

	/* -s anywhere makes unknown options harmless */
	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "bogus,nodev", "-s", NULL) == 0);
	CHECK(o.passthrough && !strcmp(o.passthrough, "nodev"));
	stp_mountopts_free(&o);
}

static void test_escaping(void)
{
	struct stp_mount_opts o;
	char dir[] = "/tmp/stp-opts-XXXXXX", path[128], err[256], want[256];
	FILE *f;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/a,b\\c.img", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	stp_mountopts_init(&o);
	o.image = strdup(path);
	o.mountpoint = strdup("/tmp");
	CHECK(stp_mountopts_parse_list(&o, "context=\"u:r:t:s0:c1,c2\"", err, sizeof(err)) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "fsname=%s/a\\,b\\\\c.img,", dir);
	CHECK(strstr(o.fuse_opts, want) != NULL);
	CHECK(strstr(o.fuse_opts, ",context=u:r:t:s0:c1\\,c2") != NULL);
	stp_mountopts_free(&o);
	unlink(path);
	rmdir(dir);

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "comment=\"open", err, sizeof(err)) == -EINVAL);
	o.image = strdup("/nonexistent/image.stipple");
	o.mountpoint = strdup("/tmp");
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == -ENOENT);
	CHECK(strstr(err, "/nonexistent/image.stipple") != NULL);
	stp_mountopts_free(&o);

	stp_mountopts_init(&o);
	o.image = strdup(image);
	o.mountpoint = strdup("/nonexistent/mnt");
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == -ENOENT);
	CHECK(strstr(err, "mount point /nonexistent/mnt") != NULL);
	stp_mountopts_free(&o);
}

int main(void)
{
	int fd;

	snprintf(image, sizeof(image), "/tmp/stp-test-image-XXXXXX");
	fd = mkstemp(image);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	test_helper_defaults();
	test_helper_flags();
	test_mount8_options_dropped();
	test_own_options();
	test_fuse_options();
	test_escaping();
	unlink(image);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
