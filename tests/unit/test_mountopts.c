/* SPDX-License-Identifier: MIT */
/* Mount option parsing: the mount(8) helper argv, -o lists, and the string for libfuse. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_opt.h>

#include "fuseapi.h"
#include "netrc.h"
#include "mountopts.h"
#include "image.h"

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

/* The options libfuse 3.14's own parser (fuse_opt_parse, as fuse_session_new and the
 * mount code use it) finds in a -o list: an independent reader of o->fuse_opts. */
struct fuse_seen {
	char opts[16][256];
	int n;
};

static int collect_opt(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct fuse_seen *seen = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_OPT && seen->n < 16)
		snprintf(seen->opts[seen->n++], sizeof(seen->opts[0]), "%s", arg);
	return 0;
}

static void libfuse_options(const char *list, struct fuse_seen *seen)
{
	char *argv[] = { "test", "-o", (char *)list, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);

	memset(seen, 0, sizeof(*seen));
	CHECK(fuse_opt_parse(&args, seen, NULL, collect_opt) == 0);
	fuse_opt_free_args(&args);
}

static const char *seen_with_prefix(const struct fuse_seen *seen, const char *prefix)
{
	for (int i = 0; i < seen->n; i++)
		if (!strncmp(seen->opts[i], prefix, strlen(prefix)))
			return seen->opts[i];
	return NULL;
}

/* How the kernel's LSM option parser splits a mount's data: at commas outside double
 * quotes, which it then removes from the value. Returns the number of options. */
static int kernel_split(const char *data, char out[][256], int max)
{
	int n = 0;
	size_t len = 0;
	bool quoted = false;

	for (const char *p = data;; p++) {
		if (*p == '"') {
			quoted = !quoted;
			continue;
		}
		if (*p && (*p != ',' || quoted)) {
			if (n < max && len < 255)
				out[n][len++] = *p;
			continue;
		}
		if (n < max)
			out[n][len] = '\0';
		n++;
		len = 0;
		if (!*p)
			return n;
	}
}

/* Small blocks: 256 MiB of buffers at least, beyond it a 32nd of memory, but never more
 * buffers than the image has blocks; large blocks: eight, whatever the memory. */
static void test_default_budget_follows_memory(void)
{
	struct stp_superblock sb = { .block_log = 20, .block_count = 1000 };
	uint64_t buf = stp_cache_buffer_bytes(&sb), gib = 1ull << 30;

	CHECK(stp_cache_default_budget(&sb, 0) == 226);           /* memory not known */
	CHECK(stp_cache_default_budget(&sb, 4 * gib) == 226);     /* 128 MiB: the floor */
	CHECK(stp_cache_default_budget(&sb, 16 * gib) == (512ull << 20) / buf);
	CHECK(stp_cache_default_budget(&sb, 64 * gib) == 1000);   /* the whole image */
	sb.block_count = 100;
	CHECK(stp_cache_default_budget(&sb, 64 * gib) == 226);    /* never below 256 MiB */
	sb.block_log = 16;
	sb.block_count = 1u << 30;
	CHECK(stp_cache_default_budget(&sb, 1024 * gib) == STP_CACHE_DEFAULT_MAX);
	sb.block_log = 25;
	CHECK(stp_cache_default_budget(&sb, 1024 * gib) == 8);    /* the seed's eight */
	CHECK(stp_cache_default_bytes(64 * gib) == 2 * gib);
}

static void test_helper_defaults(void)
{
	struct stp_mount_opts o;
	char err[256], want[256];

	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "rw", NULL) == 0);
	CHECK(!strcmp(o.image, image) && !strcmp(o.mountpoint, "/tmp"));
	CHECK(o.cache_budget == 0); /* the image's default, resolved against its superblock */
	{
		struct stp_superblock sb = { .block_log = 25 };

		CHECK(stp_mountopts_cache_budget(&o, &sb) == 8);  /* 32 MiB: eight blocks */
		sb.block_log = 26;
		CHECK(stp_mountopts_cache_budget(&o, &sb) == 8);  /* larger ones: still eight */
		/* smaller: as many buffers as fit in 256 MiB, each a block and zstd's margin */
		sb.block_log = 20;
		CHECK(stp_mountopts_cache_budget(&o, &sb) == (256u << 20) / stp_cache_buffer_bytes(&sb));
		CHECK(stp_mountopts_cache_budget(&o, &sb) == 226);
		sb.block_log = 16;
		CHECK(stp_mountopts_cache_budget(&o, &sb) == 1337);
		CHECK(stp_cache_buffer_bytes(&sb) % 4096 == 0 &&
		      stp_cache_buffer_bytes(&sb) >= (64u << 10) + (128u << 10));
	}
	test_default_budget_follows_memory();
	CHECK(o.sandbox == STP_SANDBOX_DEFAULT);
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
			   "sandbox_user=nobody,noprime,nofill", NULL) == 0);
	CHECK(o.cache_budget == 3 && o.warm_workers == 0 && o.no_prime && o.no_fill);
	CHECK(!stp_mountopts_fills(&o)); /* recording and nofill both turn it off */
	CHECK(o.record && !strcmp(o.record, "/tmp/hot.list"));
	CHECK(o.sandbox == STP_SANDBOX_LOG);
	CHECK(o.sandbox_user && !strcmp(o.sandbox_user, "nobody"));
	CHECK(o.passthrough == NULL);
	stp_mountopts_free(&o);

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "cache_budget=0", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "cache_budget=0") && strstr(err, "at least 1"));
	CHECK(stp_mountopts_parse_list(&o, "cache_budget=x", err, sizeof(err)) == -EINVAL);
	CHECK(o.meta_cache == STP_IMAGE_META_BUDGET);
	CHECK(stp_mountopts_parse_list(&o, "meta_cache=1M", err, sizeof(err)) == 0);
	CHECK(o.meta_cache == 1 << 20);
	CHECK(stp_mountopts_parse_list(&o, "meta_cache=64K", err, sizeof(err)) == 0);
	CHECK(stp_mountopts_parse_list(&o, "meta_cache=65535", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "meta_cache=65535") && strstr(err, "64K"));
	CHECK(stp_mountopts_parse_list(&o, "meta_cache=2G", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "meta_cache", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "cache_budget", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "warm_workers=100000", err, sizeof(err)) == -EINVAL);
	CHECK(stp_mountopts_parse_list(&o, "sandbox=maybe", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "sandbox=maybe") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "record=", err, sizeof(err)) == -EINVAL);
	CHECK(!o.no_prime);
	CHECK(stp_mountopts_parse_list(&o, "noprime=1", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "noprime") != NULL);
	CHECK(!o.no_fill && stp_mountopts_fills(&o));
	CHECK(stp_mountopts_parse_list(&o, "nofill=off", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "nofill takes no value") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "nofill", err, sizeof(err)) == 0);
	CHECK(o.no_fill && !stp_mountopts_fills(&o));
	CHECK(stp_mountopts_parse_list(&o, "sandbox=off", err, sizeof(err)) == 0);
	CHECK(o.sandbox == STP_SANDBOX_OFF);
	stp_mountopts_free(&o);
}

static int check_list(bool restricted, const char *list, char *err, bool *user_mount);

/* A URL names the mount without what may be secret in it (issue 28, item 12): userinfo
 * is refused, the query and fragment stay out of fsname and off the command line. */
static void test_url_secrets(void)
{
	char url[] = "https://h.example:8443/p/a.stp?X-Amz-Signature=S3CRET#frag";
	char with_user[] = "http://u:pw@h.example/a.stp";
	struct stp_mount_opts o;
	char err[256];

	CHECK(parse_helper(&o, err, url, "/tmp", "-o", "netrc=/etc/n", NULL) == 0);
	CHECK(!strcmp(url, "https://h.example:8443/p/a.stp")); /* argv, as ps sees it */
	CHECK(!strcmp(o.image, "https://h.example:8443/p/a.stp?X-Amz-Signature=S3CRET#frag"));
	CHECK(o.netrc_file && !strcmp(o.netrc_file, "/etc/n"));
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	CHECK(!strcmp(o.image_path, "https://h.example:8443/p/a.stp"));
	CHECK(strstr(o.fuse_opts, "fsname=https://h.example:8443/p/a.stp,") &&
	      !strstr(o.fuse_opts, "S3CRET"));
	stp_mountopts_free(&o);

	CHECK(parse_helper(&o, err, with_user, "/tmp", NULL) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "netrc=") && !strstr(err, "pw"));
	stp_mountopts_free(&o);

	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "netrc=/etc/n", NULL) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == -EINVAL && strstr(err, "netrc="));
	stp_mountopts_free(&o);
}

/* nodeltas: a flag, for a URL only (a one-file image has no deltas to pass over). */
static void test_nodeltas(void)
{
	char url[] = "http://h.example/app-1.3.stp";
	struct stp_mount_opts o;
	char err[256];

	CHECK(parse_helper(&o, err, url, "/tmp", "-o", "nodeltas", NULL) == 0);
	CHECK(o.no_deltas && stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	stp_mountopts_free(&o);
	CHECK(parse_helper(&o, err, url, "/tmp", NULL) == 0 && !o.no_deltas);
	stp_mountopts_free(&o);
	CHECK(parse_helper(&o, err, url, "/tmp", "-o", "nodeltas=1", NULL) == -EINVAL);
	CHECK(strstr(err, "nodeltas takes no value") != NULL);
	stp_mountopts_free(&o);
	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "nodeltas", NULL) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "nodeltas") && strstr(err, image));
	stp_mountopts_free(&o);
}

/* netrc as curl reads it: the first entry for the host, else default; quoted tokens,
 * macdef bodies skipped. */
static void test_netrc(void)
{
	static const char text[] =
		"macdef init\nmachine h.example login evil password evil\n\n"
		"machine other login o password o\n"
		"machine h.example\n\tlogin \"a b\"\n\tpassword \"p\\\"q\" account x\n"
		"machine h.example login second password second\n"
		"default login d password e\n";
	char *login, *password;

	CHECK(stp_netrc_find(text, strlen(text), "h.example", &login, &password) == 0);
	CHECK(login && !strcmp(login, "a b") && password && !strcmp(password, "p\"q"));
	free(login);
	free(password);
	CHECK(stp_netrc_find(text, strlen(text), "z.example", &login, &password) == 0);
	CHECK(login && !strcmp(login, "d") && password && !strcmp(password, "e"));
	free(login);
	free(password);
	CHECK(stp_netrc_find(text, strlen(text) - 27, "z.example", &login, &password) ==
	      -ENOENT);
	CHECK(!login && !password);
	CHECK(stp_netrc_find("machine", 7, "h.example", &login, &password) == -ENOENT);
	CHECK(stp_netrc_find("machine h.example login \"x\\", 27, "h.example", &login,
				  &password) == 0);
	CHECK(login && !strcmp(login, "x\\") && !password);
	free(login);
}

static void test_verify_options(void)
{
	struct stp_mount_opts o;
	char err[256];

	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "verify=/etc/k.pub,nodev", NULL) == 0);
	CHECK(o.verify && o.verify_key && !strcmp(o.verify_key, "/etc/k.pub"));
	CHECK(o.passthrough && !strcmp(o.passthrough, "nodev"));
	/* the last one wins: verify alone means the trusted keys */
	CHECK(stp_mountopts_parse_list(&o, "verify", err, sizeof(err)) == 0);
	CHECK(o.verify && o.verify_key == NULL);
	CHECK(stp_mountopts_parse_list(&o, "verify=\"/a,b.pub\"", err, sizeof(err)) == 0);
	CHECK(o.verify_key && !strcmp(o.verify_key, "/a,b.pub"));
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	CHECK(strstr(o.fuse_opts, "verify") == NULL);
	stp_mountopts_free(&o);
	CHECK(!o.verify && !o.verify_key);

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "verify=", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "verify=") && strstr(err, STP_TRUSTED_KEYS_DIR));
	stp_mountopts_free(&o);

	/* a user's mount may ask for a signature: the key is read with the user's rights */
	CHECK(check_list(true, "verify=/home/u/k.pub,nosuid", err, NULL) == 0);
	CHECK(check_list(false, "user=alice,verify", err, NULL) == 0);
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
	char dir[] = "/tmp/stp-opts-XXXXXX", path[128], err[256], want[256], kern[4][256];
	struct fuse_seen seen;
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
	CHECK(stp_mountopts_parse_list(&o, "context=\"system_u:object_r:tmp_t:s0:c1,c2\",nodev",
				       err, sizeof(err)) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "fsname=%s/a\\,b\\\\c.img,", dir);
	CHECK(strstr(o.fuse_opts, want) != NULL);
	/* the quotes stay, the comma is escaped for libfuse */
	CHECK(strstr(o.fuse_opts, ",context=\"system_u:object_r:tmp_t:s0:c1\\,c2\"") != NULL);
	/* libfuse gets the option back whole, and the kernel one value with both categories */
	libfuse_options(o.fuse_opts, &seen);
	snprintf(want, sizeof(want), "fsname=%s/a,b\\c.img", dir);
	CHECK(seen_with_prefix(&seen, "fsname=") && !strcmp(seen_with_prefix(&seen, "fsname="), want));
	CHECK(seen_with_prefix(&seen, "context=") &&
	      !strcmp(seen_with_prefix(&seen, "context="), "context=\"system_u:object_r:tmp_t:s0:c1,c2\""));
	CHECK(seen_with_prefix(&seen, "c2") == NULL);
	if (seen_with_prefix(&seen, "context=")) {
		CHECK(kernel_split(seen_with_prefix(&seen, "context="), kern, 4) == 1);
		CHECK(!strcmp(kern[0], "context=system_u:object_r:tmp_t:s0:c1,c2"));
	}
	stp_mountopts_free(&o);
	unlink(path);
	rmdir(dir);

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "comment=\"open", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "unbalanced quote") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "nodev,context=\"a,b", err, sizeof(err)) == -EINVAL);
	CHECK(o.passthrough == NULL);
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

/* A quoted comma never makes an option of its own: not allow_other without
 * default_permissions, not anything else. */
static void test_quoted_comma_stays_in_its_value(void)
{
	struct stp_mount_opts o;
	char err[256], kern[4][256];
	struct fuse_seen seen;

	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "context=\"x,allow_other\"", NULL) == 0);
	CHECK(!o.allow_other);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	CHECK(strstr(o.fuse_opts, "default_permissions") == NULL);
	libfuse_options(o.fuse_opts, &seen);
	CHECK(seen_with_prefix(&seen, "allow_other") == NULL);
	CHECK(seen_with_prefix(&seen, "context=") &&
	      !strcmp(seen_with_prefix(&seen, "context="), "context=\"x,allow_other\""));
	if (seen_with_prefix(&seen, "context=")) {
		CHECK(kernel_split(seen_with_prefix(&seen, "context="), kern, 4) == 1);
		CHECK(!strcmp(kern[0], "context=x,allow_other"));
	}
	stp_mountopts_free(&o);

	/* a backslash is an ordinary character: libfuse must not read \101 as 'A' */
	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "context=u\\101,fscontext=\"a\\,b\"", NULL) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == 0);
	libfuse_options(o.fuse_opts, &seen);
	CHECK(seen_with_prefix(&seen, "context=") &&
	      !strcmp(seen_with_prefix(&seen, "context="), "context=u\\101"));
	CHECK(seen_with_prefix(&seen, "fscontext=") &&
	      !strcmp(seen_with_prefix(&seen, "fscontext="), "fscontext=\"a\\,b\""));
	CHECK(seen_with_prefix(&seen, "b\"") == NULL);
	stp_mountopts_free(&o);

	/* stipple's own values lose their quotes, as the kernel's do */
	stp_mountopts_init(&o);
	CHECK(stp_mountopts_parse_list(&o, "record=\"/tmp/a,b.list\",cache_budget=\"3\"", err,
				       sizeof(err)) == 0);
	CHECK(o.record && !strcmp(o.record, "/tmp/a,b.list"));
	CHECK(o.cache_budget == 3 && o.passthrough == NULL);
	/* empty items, as mount(8) allows them */
	CHECK(stp_mountopts_parse_list(&o, ",nodev,,noexec,", err, sizeof(err)) == 0);
	CHECK(o.passthrough && !strcmp(o.passthrough, "nodev,noexec"));
	/* libmount's other userspace and kernel options are not ours */
	CHECK(stp_mountopts_parse_list(&o, "loop", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "'loop'") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "bind", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "'bind'") != NULL);
	CHECK(stp_mountopts_parse_list(&o, "users=x", err, sizeof(err)) == -EINVAL);
	stp_mountopts_free(&o);
}

/* Parses LIST for a mount that is RESTRICTED (or not) and returns the user check. */
static int check_list(bool restricted, const char *list, char *err, bool *user_mount)
{
	struct stp_mount_opts o;
	int ret;

	stp_mountopts_init(&o);
	o.restricted = restricted;
	ret = stp_mountopts_parse_list(&o, list, err, 256);
	CHECK(ret == 0);
	if (user_mount)
		*user_mount = o.user_mount;
	ret = stp_mountopts_check_user(&o, err, 256);
	stp_mountopts_free(&o);
	return ret;
}

static void test_user_line_refusals(void)
{
	static const struct { const char *list, *named; } refused[] = {
		{ "user=alice,suid", "option suid:" },
		{ "users,dev", "option dev:" },
		{ "owner,record=/tmp/hot.list", "option record=/tmp/hot.list:" },
		{ "group,sandbox=off", "option sandbox=off:" },
		{ "user,sandbox=log", "option sandbox=log:" },
		{ "sandbox_user=daemon,user", "option sandbox_user=daemon:" },
		/* options after the user option, and before it, are refused alike */
		{ "suid,user=alice", "option suid:" },
	};
	struct stp_mount_opts o;
	char err[256];
	bool user_mount;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		err[0] = '\0';
		CHECK(check_list(false, refused[i].list, err, &user_mount) == -EPERM);
		CHECK(user_mount);
		if (!strstr(err, refused[i].named) || !strstr(err, "refused"))
			fprintf(stderr, "%s: '%s'\n", refused[i].list, err);
		CHECK(strstr(err, refused[i].named) != NULL && strstr(err, "refused") != NULL);
	}
	/* what mount(8) passes for a plain user line is fine */
	CHECK(check_list(false, "nosuid,nodev,noexec,user=alice,cache_budget=2", err, &user_mount) == 0);
	CHECK(user_mount);
	CHECK(check_list(false, "user,exec,noprime,sandbox=on", err, NULL) == 0);
	CHECK(check_list(false, "nouser,suid,dev,record=/tmp/x,sandbox=off", err, &user_mount) == 0);
	CHECK(!user_mount);

	/* -N from the helper's argv */
	CHECK(parse_helper(&o, err, image, "/tmp", "-N", "1", "-o", "users", NULL) == 0);
	CHECK(o.restricted && stp_mountopts_check_user(&o, err, sizeof(err)) == -EPERM);
	CHECK(strstr(err, "-N 1") != NULL);
	stp_mountopts_free(&o);

	/* finish refuses too, so `stipple mount` gets the same answer */
	CHECK(parse_helper(&o, err, image, "/tmp", "-o", "user=alice,dev", NULL) == 0);
	CHECK(stp_mountopts_finish(&o, err, sizeof(err)) == -EPERM);
	CHECK(strstr(err, "option dev:") != NULL && o.fuse_opts == NULL);
	stp_mountopts_free(&o);
}

static void test_not_root_refusals(void)
{
	struct stp_mount_opts o;
	char err[256];
	bool user_mount;

	stp_mountopts_init(&o);
	CHECK(o.restricted == (geteuid() != 0) && !o.user_mount);
	stp_mountopts_free(&o);

	CHECK(check_list(true, "suid", err, NULL) == -EPERM && strstr(err, "option suid:"));
	CHECK(check_list(true, "nosuid,dev", err, NULL) == -EPERM && strstr(err, "option dev:"));
	CHECK(check_list(true, "sandbox=off", err, NULL) == -EPERM && strstr(err, "sandbox=off"));
	CHECK(check_list(true, "sandbox=log", err, NULL) == -EPERM && strstr(err, "sandbox=log"));
	CHECK(check_list(true, "sandbox_user=daemon", err, NULL) == -EPERM &&
	      strstr(err, "sandbox_user=daemon"));
	/* a user's own `stipple mount --record` writes the user's own file */
	CHECK(check_list(true, "record=/tmp/hot.list,nodev,nosuid,exec", err, &user_mount) == 0);
	CHECK(!user_mount);
	CHECK(check_list(false, "suid,dev,sandbox=off,sandbox_user=daemon", err, NULL) == 0);
}

/* stipple mount's hand-over of a URL with a query: taken from the environment only when
 * it is the operand's URL, then wiped and unset. */
static void test_url_from_environment(void)
{
	struct stp_mount_opts o;
	char err[256], *seen;

	stp_mountopts_init(&o);
	CHECK(stp_mountopts_take_url_env(&o, err, sizeof(err)) == 0 && !o.image, "none set");
	o.image = strdup("http://h/a.stp");
	setenv(STP_MOUNT_URL_ENV, "http://h/a.stp?sig=S", 1);
	seen = getenv(STP_MOUNT_URL_ENV);
	CHECK(stp_mountopts_take_url_env(&o, err, sizeof(err)) == 0);
	CHECK(!strcmp(o.image, "http://h/a.stp?sig=S"), "%s", o.image);
	CHECK(!getenv(STP_MOUNT_URL_ENV) && !strchr(seen, 'S'), "wiped and unset");
	setenv(STP_MOUNT_URL_ENV, "http://other/b.stp?sig=S", 1);
	CHECK(stp_mountopts_take_url_env(&o, err, sizeof(err)) == -EINVAL, "another URL");
	CHECK(!strcmp(o.image, "http://h/a.stp?sig=S") && strstr(err, STP_MOUNT_URL_ENV), "%s", err);
	CHECK(!getenv(STP_MOUNT_URL_ENV));
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
	RUN(test_helper_defaults);
	RUN(test_helper_flags);
	RUN(test_mount8_options_dropped);
	RUN(test_own_options);
	RUN(test_verify_options);
	RUN(test_fuse_options);
	RUN(test_escaping);
	RUN(test_quoted_comma_stays_in_its_value);
	RUN(test_user_line_refusals);
	RUN(test_not_root_refusals);
	RUN(test_url_secrets);
	RUN(test_nodeltas);
	RUN(test_netrc);
	RUN(test_url_from_environment);
	unlink(image);
	return tap_done();
}
