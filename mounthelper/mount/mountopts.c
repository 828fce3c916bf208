/* SPDX-License-Identifier: MIT */
#include "fuseapi.h"
#include "mountopts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>
#include <sys/auxv.h>

#include "diskcache.h"
#include "http.h"
#include "imgsrc.h"
#include "optstr.h"
#include "util.h"
#include "image.h"

/* Meant for mount(8) and fstab, never for the filesystem. "ro" and "rw" are dropped too:
 * the mount is always read-only. user, users, owner and group are taken apart (take_mount8). */
static const char *const mount8_only[] = {
	"defaults", "auto", "noauto", "nofail", "_netdev", "nouser", "nousers", "noowner",
	"nogroup", "ro", "rw", NULL,
};

/* The same with a value: libmount passes user=NAME for a user's fstab mount. */
static const char *const mount8_valued[] = { "comment", "user", "uhelper", NULL };

/* Access-time flags: libfuse 3.14 refuses all but atime/noatime, and a read-only image
 * keeps no access times anyway, so they are dropped like mount(8)'s own options. */
static const char *const atime_flags[] = {
	"diratime", "nodiratime", "relatime", "norelatime", "strictatime", "nostrictatime",
	"lazytime", "nolazytime", NULL,
};

/* Kernel mount flags and libfuse options that a stipple mount accepts as they are. */
static const char *const fuse_flags[] = {
	"suid", "nosuid", "dev", "nodev", "exec", "noexec", "async", "sync", "dirsync",
	"atime", "noatime", "default_permissions", "debug", NULL,
};
static const char *const fuse_valued[] = {
	"context", "fscontext", "defcontext", "rootcontext", NULL,
};
/* Set by stp_mountopts_finish; a user's value is ignored. */
static const char *const forced_valued[] = { "fsname", "subtype", "max_read", NULL };

static bool in_list(const char *const *list, const char *s, size_t len)
{
	for (; *list; list++)
		if (strlen(*list) == len && !memcmp(*list, s, len))
			return true;
	return false;
}

unsigned stp_mountopts_default_workers(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpus < 1)
		return 1;
	return cpus > STP_WARM_WORKERS_CAP ? STP_WARM_WORKERS_CAP : (unsigned)cpus;
}

void stp_mountopts_init(struct stp_mount_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->meta_cache = STP_IMAGE_META_BUDGET;
	o->readahead = STP_READAHEAD_DEFAULT;
	o->warm_workers = stp_mountopts_default_workers();
	o->sandbox = STP_SANDBOX_DEFAULT;
	o->restricted = geteuid() != 0;
	o->timeout_s = STP_URL_TIMEOUT_DEFAULT;
	o->cache_size = STP_DISKCACHE_SIZE_DEFAULT;
}

void stp_mountopts_free(struct stp_mount_opts *o)
{
	free(o->image);
	free(o->image_path);
	free(o->mountpoint);
	free(o->record);
	free(o->sandbox_user);
	free(o->verify_key);
	free(o->ns);
	free(o->passthrough);
	free(o->fuse_opts);
	free(o->ca_file);
	free(o->proxy);
	free(o->cache_dir);
	free(o->netrc_file);
	stp_mountopts_init(o);
}

/* Appends S to *LIST after a comma, escaping the characters libfuse's parser splits on. */
static int append_escaped(char **list, const char *s)
{
	size_t old = *list ? strlen(*list) : 0;
	char *p = realloc(*list, old + 2 * strlen(s) + 2);

	if (!p)
		return -ENOMEM;
	*list = p;
	p += old;
	if (old)
		*p++ = ',';
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			*p++ = '\\';
		*p++ = *s;
	}
	*p = '\0';
	return 0;
}

static int replace_string(char **field, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

static int parse_count(const char *name, const char *value, uint64_t min, uint64_t max,
		       uint32_t *out, char *err, size_t errlen)
{
	uint64_t v;

	if (stp_parse_uint(value, min, max, &v))
		return stp_errf(err, errlen, -EINVAL, "option %s=%s: expected a whole number from %llu to %llu",
			    name, value, (unsigned long long)min, (unsigned long long)max);
	*out = (uint32_t)v;
	return 0;
}

static int parse_sandbox(struct stp_mount_opts *o, const char *value, char *err, size_t errlen)
{
	if (stp_sandbox_parse_mode(value, &o->sandbox))
		return stp_errf(err, errlen, -EINVAL, "option sandbox=%s: expected on, log or off", value);
	return 0;
}

/* verify: the trusted keys; verify=PUBKEY: that key alone (the last one given wins). */
static int parse_verify(struct stp_mount_opts *o, const char *value, char *err, size_t errlen)
{
	o->verify = true;
	if (!value) {
		free(o->verify_key);
		o->verify_key = NULL;
		return 0;
	}
	if (!*value)
		return stp_errf(err, errlen, -EINVAL,
			    "option verify= needs a public key file (or no '=' for the keys in "
			    STP_TRUSTED_KEYS_DIR ")");
	return replace_string(&o->verify_key, value);
}

/* stipple's sizes (meta_cache=, readahead=, cache_size=): as parse_own. */
static int parse_size(struct stp_mount_opts *o, const char *name, const char *value, char *err,
		      size_t errlen)
{
	if (!strcmp(name, "meta_cache")) {
		uint64_t v;

		if (!value || stp_parse_size(value, &v) || v < STP_META_PAGE_SIZE ||
		    v > STP_META_SIZE_MAX)
			return stp_errf(err, errlen, -EINVAL, "option meta_cache=%s: a size from 64K "
					"to 1G", value ? value : "");
		o->meta_cache = v;
		return 1;
	}
	if (!strcmp(name, "readahead")) {
		uint64_t v;

		if (!value || stp_parse_size(value, &v) || v > STP_READAHEAD_MAX)
			return stp_errf(err, errlen, -EINVAL, "option readahead=%s: a size from 0 to "
					"128K (the kernel lets a FUSE mount lower its readahead, not "
					"raise it)", value ? value : "");
		o->readahead = (uint32_t)v;
		return 1;
	}
	if (!strcmp(name, "cache_size")) {
		if (!value || stp_parse_size(value, &o->cache_size))
			return stp_errf(err, errlen, -EINVAL, "option cache_size=%s: expected a size "
				    "(bytes, or with K, M, G; 0 turns the disk cache off)", value ? value : "");
		return 1;
	}
	return 0;
}

/* stipple's strings (proxy=, ca=, cache_dir=, netrc=, record=, sandbox_user=): as
 * parse_own. */
static int parse_string(struct stp_mount_opts *o, const char *name, const char *value,
			char *err, size_t errlen)
{
	if (!strcmp(name, "proxy"))
		return replace_string(&o->proxy, value ? value : "") ?: 1;
	if (!strcmp(name, "ca") || !strcmp(name, "cache_dir") || !strcmp(name, "netrc")) {
		char **field = !strcmp(name, "ca") ? &o->ca_file :
			       !strcmp(name, "netrc") ? &o->netrc_file : &o->cache_dir;

		if (!value || !*value)
			return stp_errf(err, errlen, -EINVAL, "option %s= needs a value", name);
		return replace_string(field, value) ?: 1;
	}
	if (!strcmp(name, "record") || !strcmp(name, "sandbox_user")) {
		if (!value || !*value)
			return stp_errf(err, errlen, -EINVAL, "option %s= needs a value", name);
		return replace_string(!strcmp(name, "record") ? &o->record : &o->sandbox_user, value) ?: 1;
	}
	return 0;
}

/* stipple's own settings: 1 if NAME was one, 0 if not, or a negative errno. */
static int parse_own(struct stp_mount_opts *o, const char *name, const char *value, char *err,
		     size_t errlen)
{
	if (!strcmp(name, "cache_budget")) {
		if (value && !strcmp(value, "0"))
			return stp_errf(err, errlen, -EINVAL,
				    "option cache_budget=0: the cache must hold at least 1 block");
		return parse_count(name, value ? value : "", 1, STP_CACHE_BUDGET_MAX, &o->cache_budget,
				   err, errlen) ?: 1;
	}
	if (!strcmp(name, "warm_workers"))
		return parse_count(name, value ? value : "", 0, STP_WARM_WORKERS_MAX, &o->warm_workers,
				   err, errlen) ?: 1;
	if (!strcmp(name, "noprime") || !strcmp(name, "nofill") || !strcmp(name, "stack") ||
	    !strcmp(name, "nodeltas")) {
		if (value)
			return stp_errf(err, errlen, -EINVAL, "option %s takes no value", name);
		*(!strcmp(name, "noprime") ? &o->no_prime :
		  !strcmp(name, "nofill") ? &o->no_fill :
		  !strcmp(name, "nodeltas") ? &o->no_deltas : &o->stack) = true;
		return 1;
	}
	if (!strcmp(name, "sandbox"))
		return parse_sandbox(o, value ? value : "", err, errlen) ?: 1;
	if (!strcmp(name, "verify"))
		return parse_verify(o, value, err, errlen) ?: 1;
	if (!strcmp(name, "timeout"))
		return parse_count(name, value ? value : "", 1, STP_URL_TIMEOUT_MAX, &o->timeout_s,
				   err, errlen) ?: 1;
	return parse_size(o, name, value, err, errlen) ?:
	       parse_string(o, name, value, err, errlen);
}

/* An option as mount(8) splits it (optstr.h): NAME (NAMESZ bytes), then VAL (VALSZ
 * bytes) or no value (VAL NULL); TEXT is the whole option, NUL-terminated, quotes kept. */
struct opt {
	const char *name;
	size_t namesz;
	const char *val;
	size_t valsz;
	const char *text;
};

static bool is(const struct opt *op, const char *name)
{
	return strlen(name) == op->namesz && !memcmp(op->name, name, op->namesz);
}

static int unknown(struct stp_mount_opts *o, const struct opt *op, char *err, size_t errlen)
{
	if (o->sloppy)
		return 0;
	return stp_errf(err, errlen, -EINVAL, "unknown mount option '%s'", op->text);
}

/* libmount's userspace map: options for mount(8). A few tell that mount(8) runs us on
 * behalf of a user (mount(8) passes user=NAME for a `user` line). */
static int take_mount8(struct stp_mount_opts *o, const struct opt *op, char *err,
		       size_t errlen)
{
	if (is(op, "user") || is(op, "users") || is(op, "owner") || is(op, "group")) {
		o->user_mount = o->restricted = true;
		return 0;
	}
	if (!op->val && in_list(mount8_only, op->name, op->namesz))
		return 0;
	if (op->val && in_list(mount8_valued, op->name, op->namesz))
		return 0;
	if (!strncasecmp(op->name, "x-", 2))
		return 0;
	return unknown(o, op, err, errlen); /* loop=, offset=, helper=...: not ours */
}

/* libmount's Linux map: the MS_* flags. */
static int take_vfs(struct stp_mount_opts *o, const struct opt *op, char *err, size_t errlen)
{
	if (op->val)
		return unknown(o, op, err, errlen);
	if (in_list(mount8_only, op->name, op->namesz) ||
	    in_list(atime_flags, op->name, op->namesz))
		return 0;
	if (in_list(fuse_flags, op->name, op->namesz))
		return append_escaped(&o->passthrough, op->text);
	return unknown(o, op, err, errlen); /* bind, remount, mand, nosymfollow... */
}

/* Our own values, quotes removed as the kernel removes them from its own. */
static char *unquote(const struct opt *op)
{
	char *s = malloc(op->valsz + 1), *d = s;

	if (!s)
		return NULL;
	for (size_t i = 0; i < op->valsz; i++)
		if (op->val[i] != '"')
			*d++ = op->val[i];
	*d = '\0';
	return s;
}

/* Everything else: stipple's settings, then libfuse's and the kernel's. */
static int take_fs(struct stp_mount_opts *o, const struct opt *op, char *err, size_t errlen)
{
	char name[64], *value = NULL;
	int ret = 0;

	if (op->namesz < sizeof(name)) {
		memcpy(name, op->name, op->namesz);
		name[op->namesz] = '\0';
		if (op->val && !(value = unquote(op)))
			return stp_errf(err, errlen, -ENOMEM, "out of memory");
		ret = parse_own(o, name, value, err, errlen);
		free(value);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	if (!op->val && is(op, "allow_other")) {
		o->allow_other = true;
		return 0;
	}
	if (op->val && in_list(forced_valued, op->name, op->namesz))
		return 0;
	if (!op->val && op->namesz == 12 && !memcmp(op->name, "auto_unmount", 12))
		return stp_errf(err, errlen, -EINVAL, "option auto_unmount is refused: it needs a socket "
			    "to fusermount3 that the sandbox closes, so it would do nothing; after "
			    "a crash, unmount with umount or fusermount3 -u");
	if ((!op->val && in_list(fuse_flags, op->name, op->namesz)) ||
	    (op->val && in_list(fuse_valued, op->name, op->namesz)))
		return append_escaped(&o->passthrough, op->text);
	return unknown(o, op, err, errlen);
}

typedef int (*take_fn)(struct stp_mount_opts *, const struct opt *, char *, size_t);

/* Hands each option of LIST that mount(8) would put in MAP's list to TAKE, in order. */
static int each_option(struct stp_mount_opts *o, const char *list, enum stp_optstr_map map,
		       take_fn take, char *err, size_t errlen)
{
	struct stp_opt item;
	int ret = 0;

	while (!ret && stp_optstr_next(&list, &item)) {
		size_t len = item.val ? (size_t)(item.val + item.valsz - item.name) : item.namesz;
		struct opt op = { item.name, item.namesz, item.val, item.valsz, NULL };
		char *text;

		if (stp_optstr_map(&item) != map)
			continue;
		if (!(text = strndup(item.name, len)))
			return stp_errf(err, errlen, -ENOMEM, "out of memory");
		op.text = text;
		ret = take(o, &op, err, errlen);
		if (ret == -ENOMEM)
			stp_errf(err, errlen, ret, "out of memory");
		free(text);
	}
	return ret;
}

/* A double quote left open would end the list there without a word (optstr.h): an odd
 * count is refused instead. */
static bool quotes_balanced(const char *list)
{
	size_t n = 0;

	for (; *list; list++)
		n += *list == '"';
	return n % 2 == 0;
}

/* mount(8)'s options first, then the kernel's flags, then the rest, as mount(8) hands
 * them over. */
int stp_mountopts_parse_list(struct stp_mount_opts *o, const char *list, char *err,
			     size_t errlen)
{
	int ret;

	if (!quotes_balanced(list))
		return stp_errf(err, errlen, -EINVAL, "unbalanced quote in mount options '%s'", list);
	ret = each_option(o, list, STP_OPTSTR_USER, take_mount8, err, errlen);
	if (!ret)
		ret = each_option(o, list, STP_OPTSTR_VFS, take_vfs, err, errlen);
	if (!ret)
		ret = each_option(o, list, STP_OPTSTR_FS, take_fs, err, errlen);
	return ret;
}

void stp_mountopts_hide_query(char *arg)
{
	char *auth = strstr(arg, "://");

	if (!stp_imgsrc_is_url(arg) || !auth)
		return;
	auth += 3;
	auth += stp_http_url_authority_end(auth);
	auth += strcspn(auth, "?#");
	memset(auth, 0, strlen(auth));
}

int stp_mountopts_take_url_env(struct stp_mount_opts *o, char *err, size_t errlen)
{
	char *url = getenv(STP_MOUNT_URL_ENV);
	int ret = 0;

	if (!url)
		return 0;
	if (!o->image || !stp_imgsrc_is_url(url) || strncmp(url, o->image, strlen(o->image)))
		ret = stp_errf(err, errlen, -EINVAL, "%s does not hold the URL given",
			       STP_MOUNT_URL_ENV);
	else if (replace_string(&o->image, url))
		ret = stp_errf(err, errlen, -ENOMEM, "out of memory");
	explicit_bzero(url, strlen(url));
	unsetenv(STP_MOUNT_URL_ENV);
	return ret;
}

bool stp_mountopts_needs_checks(const struct stp_mount_opts *o)
{
	return o->verify || stp_imgsrc_is_url(o->image);
}

/* -o lists are parsed after the whole argv, so -s applies wherever it stands. */
int stp_mountopts_parse_helper(struct stp_mount_opts *o, int argc, char **argv, char *err,
			       size_t errlen)
{
	const char *lists[32];
	int nlists = 0, c, ret;

	optind = 0;
	opterr = 0;
	while ((c = getopt(argc, argv, "-sfnvo:t:N:")) != -1) {
		switch (c) {
		case 1:
			if (!o->image) {
				ret = replace_string(&o->image, optarg);
				stp_mountopts_hide_query(optarg);
			} else if (!o->mountpoint)
				ret = replace_string(&o->mountpoint, optarg);
			else
				return stp_errf(err, errlen, -EINVAL, "unexpected argument '%s'", optarg);
			if (ret)
				return stp_errf(err, errlen, ret, "out of memory");
			break;
		case 's': o->sloppy = true; break;
		case 'f': o->fake = true; break;
		case 'n': break; /* there is no mtab to write */
		case 'v': o->verbose = true; break;
		case 't': break; /* fuse.stipple or stipple: either way, us */
		case 'o':
			if (nlists == (int)(sizeof(lists) / sizeof(lists[0])))
				return stp_errf(err, errlen, -EINVAL, "too many -o options");
			lists[nlists++] = optarg;
			break;
		case 'N':
			if (replace_string(&o->ns, optarg))
				return stp_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		default:
			if (optopt && strchr("otN", optopt))
				return stp_errf(err, errlen, -EINVAL, "option -%c needs a value", optopt);
			return stp_errf(err, errlen, -EINVAL, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!o->mountpoint)
		return stp_errf(err, errlen, -EINVAL, "expected SOURCE and DIR");
	for (int i = 0; i < nlists; i++) {
		ret = stp_mountopts_parse_list(o, lists[i], err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* A user's mount: fusermount3 forces nosuid and nodev on every mount it makes for a user,
 * so suid and dev are refused rather than silently lost; the daemon of a user's mount is
 * always confined. On a user's fstab line the options are root's, but the daemon runs as
 * whoever mounts: it must not write a file where root said (record=). */
int stp_mountopts_check_user(const struct stp_mount_opts *o, char *err, size_t errlen)
{
	static const char *const flags[] = { "suid", "dev", NULL };

	if (!o->restricted)
		return 0;
	for (const char *const *f = flags; *f; f++)
		if (o->passthrough && !stp_optstr_find(o->passthrough, *f, NULL))
			return stp_errf(err, errlen, -EPERM,
				    "option %s: refused for a user's mount (fusermount3 always mounts nosuid,nodev for users)",
				    *f);
	if (o->sandbox != STP_SANDBOX_DEFAULT)
		return stp_errf(err, errlen, -EPERM,
			    "option sandbox=%s: refused for a user's mount: its daemon is always confined",
			    o->sandbox == STP_SANDBOX_LOG ? "log" : "off");
	if (o->sandbox_user)
		return stp_errf(err, errlen, -EPERM,
			    "option sandbox_user=%s: refused for a user's mount: its daemon runs as that user",
			    o->sandbox_user);
	if (o->ns)
		return stp_errf(err, errlen, -EPERM,
			    "option -N %s: refused for a user's mount: it mounts in the user's namespace",
			    o->ns);
	if (o->user_mount && o->record)
		return stp_errf(err, errlen, -EPERM,
			    "option record=%s: refused on a user, users, owner or group line: the daemon would write it as whoever mounts",
			    o->record);
	return 0;
}

static int build_fuse_opts(struct stp_mount_opts *o)
{
	char *fsname = NULL;
	int n;

	if (append_escaped(&fsname, o->image_path))
		return -ENOMEM;
	free(o->fuse_opts);
	n = asprintf(&o->fuse_opts, "ro,fsname=%s,subtype=stipple,max_read=%u%s%s%s", fsname,
		     STP_MAX_READ, o->allow_other ? ",allow_other,default_permissions" : "",
		     o->passthrough ? "," : "", o->passthrough ? o->passthrough : "");
	free(fsname);
	if (n < 0) {
		o->fuse_opts = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Credentials in the URL would show in ps and (before they are hidden) in messages: the
 * URL names a server, netrc= says who we are to it. */
static int check_url(const struct stp_mount_opts *o, char *err, size_t errlen)
{
	if (!o->is_url) {
		if (o->ca_file || o->proxy || o->cache_dir || o->netrc_file || o->no_deltas)
			return stp_errf(err, errlen, -EINVAL, "options ca=, proxy=, cache_dir=, "
					"netrc= and nodeltas are for an image given as a URL, not %s",
					o->image);
		return 0;
	}
	if (stp_http_url_has_userinfo(o->image))
		return stp_errf(err, errlen, -EINVAL, "%.*s...: a URL with a user name or password "
				"is refused (every local user could read it); put the credentials "
				"in a netrc file and give -o netrc=FILE",
				(int)(strstr(o->image, "://") + 3 - o->image), o->image);
	return 0;
}

/* mount(8) drops its setuid before it execs a helper, so ids that differ, or a process
 * the kernel marks secure, mean that someone set the bits on our program. */
int stp_mountopts_check_setid(char *err, size_t errlen)
{
	if (getuid() == geteuid() && getgid() == getegid() && !getauxval(AT_SECURE))
		return 0;
	return stp_errf(err, errlen, -EPERM, "refusing to run setuid or setgid (uid %u, euid %u, "
			"gid %u, egid %u): users mount through mount(8) and fusermount3",
			(unsigned)getuid(), (unsigned)geteuid(), (unsigned)getgid(),
			(unsigned)getegid());
}

int stp_mountopts_finish(struct stp_mount_opts *o, char *err, size_t errlen)
{
	char *path;

	int ret;

	if (!o->image || !o->mountpoint)
		return stp_errf(err, errlen, -EINVAL, "expected an image and a mount point");
	ret = stp_mountopts_check_user(o, err, errlen);
	if (ret)
		return ret;
	o->is_url = stp_imgsrc_is_url(o->image);
	ret = check_url(o, err, errlen);
	if (ret)
		return ret;
	/* a URL names the mount (fsname, status) without what may be secret in it */
	path = o->is_url ? stp_http_url_public(o->image) : realpath(o->image, NULL);
	if (!path)
		return stp_errf(err, errlen, -errno, "%s: %s", o->image, stp_strerror(-errno));
	free(o->image_path);
	o->image_path = path;
	/* Absolute, so that the daemon can leave its working directory. */
	path = realpath(o->mountpoint, NULL);
	if (!path)
		return stp_errf(err, errlen, -errno, "mount point %s: %s", o->mountpoint,
			    stp_strerror(-errno));
	free(o->mountpoint);
	o->mountpoint = path;
	if (build_fuse_opts(o))
		return stp_errf(err, errlen, -ENOMEM, "out of memory");
	return 0;
}
