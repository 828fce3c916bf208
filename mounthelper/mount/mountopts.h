/* SPDX-License-Identifier: MIT */
/*
 * Mount options: the argv of a mount(8) helper, `-o` option lists, and the option string
 * handed to libfuse.
 *
 * An option list is split as mount(8) splits it (optstr.h, libmount's rules): at commas
 * outside double quotes; a backslash is an ordinary character. Options meant for mount(8) itself
 * (defaults, auto, noauto, nofail, _netdev, user, users, nouser, owner, group, x-*,
 * comment=, user=, uhelper=) are dropped; user, users, owner and group (mount(8) runs us
 * for a user) mark the mount as a user's. stipple's own settings (cache_budget=,
 * meta_cache=, readahead=, warm_workers=, noprime, nofill, stack, record=, sandbox=,
 * sandbox_user=, and for a URL ca=, proxy=, timeout=, cache_dir=, cache_size=, netrc=) fill the
 * fields below, their values without quotes. Known kernel and libfuse options are kept for libfuse as
 * written, quotes included: the kernel's parser keeps a quoted comma and removes the
 * quotes, while libfuse's splits at every comma no backslash escapes, so commas and
 * backslashes are escaped for it. Anything else is an error, or dropped under the
 * helper's -s (sloppy).
 * stp_mountopts_finish() then refuses a URL that holds a user name or password, forces
 * read-only, fsname=IMAGE (a URL without userinfo, query and fragment), subtype=stipple and max_read,
 * and adds default_permissions to allow_other.
 *
 * Functions return 0 or a negative errno; on failure ERR (ERRLEN bytes) holds a message
 * naming the culprit. The struct owns every string in it (stp_mountopts_free). None of these
 * functions keeps global state; a struct is not shared between threads while it is parsed.
 */
#ifndef STP_MOUNTOPTS_H
#define STP_MOUNTOPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "hotlist.h"
#include "sandbox.h"

/* The mode without sandbox=: on, unless built for a logging test run (meson_options.txt). */
#ifndef STP_SANDBOX_DEFAULT
#define STP_SANDBOX_DEFAULT STP_SANDBOX_ON
#endif

#define STP_CACHE_BUDGET_MAX (1u << 20)
/* Warming workers by default: one per online CPU, at most this many; more workers than
 * CPUs only hold more blocks. */
#define STP_WARM_WORKERS_CAP 12u
#define STP_WARM_WORKERS_MAX 256u

/* `verify` without a value: the image must be signed by one of the public keys here
 * (*.pub, PEM), which the monitor reads as trusted configuration. */
#define STP_TRUSTED_KEYS_DIR "/etc/stipple/keys"

/* The kernel's readahead on a mount, in bytes (readahead=): what it asks for around a
 * page that is read or faulted. mkstipple widens hot ranges by twice this
 * (STP_HOT_MARGIN_DEFAULT), so that the pages asked for beside the recorded ones are in
 * the hot region too; more readahead reaches cold blocks, each a whole decode. The
 * kernel lets a FUSE mount lower its readahead (128 KiB by default), not raise it. */
#define STP_READAHEAD_DEFAULT (STP_HOT_MARGIN_DEFAULT / 2)
#define STP_READAHEAD_MAX (128u << 10)

#define STP_URL_TIMEOUT_DEFAULT 10u
#define STP_URL_TIMEOUT_MAX 3600u

struct stp_mount_opts {
	char *image;          /* SOURCE as given */
	char *image_path;     /* absolute, set by stp_mountopts_finish; a URL without its
			       * userinfo, query and fragment (what fsname shows) */
	char *mountpoint;     /* absolute after stp_mountopts_finish */
	uint32_t cache_budget; /* 0: the image's default (stp_mountopts_cache_budget) */
	uint64_t meta_cache;  /* bytes of decoded metadata pages kept (paged images) */
	uint32_t readahead;   /* readahead=: the kernel's readahead in bytes (0 while recording) */
	uint32_t warm_workers;
	bool no_prime;        /* the hot files are not looked up at mount (prime.h) */
	bool no_fill;         /* blocks reads decode do not fill the page cache (fill.h) */
	bool no_deltas;       /* nodeltas: a published image's blocks fetched whole (published.h) */
	bool stack;           /* mount even where something is mounted already (monitor.h) */
	char *record;         /* hot list to write when the mount ends, or NULL */
	enum stp_sandbox_mode sandbox;
	char *sandbox_user;   /* NULL: the sandbox's default */
	bool verify;          /* the image must be signed: by verify_key, or by a trusted key */
	char *verify_key;     /* verify=PUBKEY, or NULL: the keys of STP_TRUSTED_KEYS_DIR */
	bool foreground;      /* stipple mount -f: no fork */
	bool allow_other;
	bool fake;            /* helper -f: check everything, mount nothing */
	bool sloppy;          /* helper -s: drop unknown options */
	bool verbose;         /* helper -v */
	char *ns;             /* helper -N: mount namespace (pid or path) */
	char *passthrough;    /* kept options for libfuse, comma-separated, or NULL */
	char *fuse_opts;      /* the full list for libfuse, set by stp_mountopts_finish */
	bool restricted;      /* a user's mount: not root, or user_mount (stp_mountopts_check_user) */
	/* A URL image (http:// or https://): the fetcher's settings and the disk cache. */
	bool is_url;
	char *ca_file;        /* ca=FILE: the CA bundle instead of the system's */
	char *proxy;          /* proxy=URL ("" for none), or NULL: from the environment */
	uint32_t timeout_s;   /* timeout=: deadline of one read, retries included */
	char *cache_dir;      /* cache_dir=, or NULL: stp_diskcache_default_dir() */
	uint64_t cache_size;  /* cache_size=: bytes the cache directory may hold; 0: no cache */
	char *netrc_file;     /* netrc=FILE: the server's login and password, read by the fetcher */
	bool user_mount;      /* user, users, owner or group given: mount(8) runs us for a user */
};

/* Blanks, in place, the query and fragment of ARG when it is a URL (a presigned query
 * may be a credential): the process's command line, which ps shows every local user,
 * then holds none of it once the options are parsed. The caller keeps its copy. */
void stp_mountopts_hide_query(char *arg);

/* `stipple mount URL` hands mount.stipple the whole URL in this variable, its operand
 * being the URL without its query (a command line is anyone's to read, an environment
 * only its owner's). */
#define STP_MOUNT_URL_ENV "STIPPLE_MOUNT_URL"

/* Takes the URL from STP_MOUNT_URL_ENV, if set, as O's image in place of the operand
 * parsed, which must be that URL without its query; the variable is then wiped and
 * unset, so that nothing run later inherits it. 0, or -EINVAL or -ENOMEM with a
 * message in ERR. */
int stp_mountopts_take_url_env(struct stp_mount_opts *o, char *err, size_t errlen);

/* Whether the mount needs libcrypto: a URL (its disk cache's tags, its store) or verify=
 * (the keys). Valid once stp_mountopts_parse_helper has succeeded. mount.stipple then
 * execs mount.stipple-checked, and the monitor runs stipple-mountd-checked (progpath.h). */
bool stp_mountopts_needs_checks(const struct stp_mount_opts *o);

/* Whether warming may push pages into the page cache: not while recording, since a
 * read the page cache answers never reaches the daemon, and the hot list would miss it. */
static inline bool stp_mountopts_stores_pages(const struct stp_mount_opts *o)
{
	return !o->record;
}

/* Whether blocks that reads decode fill the page cache: as above, and unless nofill. */
static inline bool stp_mountopts_fills(const struct stp_mount_opts *o)
{
	return stp_mountopts_stores_pages(o) && !o->no_fill;
}

/* Block buffers the daemon's cache may hold beyond the budget: one per warming worker
 * and one for the readers. The warmer's blocks (max(budget - 1, 1) held or decoding, and
 * one pinned by each worker and by its store thread while the kernel takes its pages)
 * must leave the readers a buffer, or a read the page-cache store waits for could wait
 * for the store: with a budget of 1, that takes one more. The filler pins one resident
 * block at a time, which may wait in a store too: with the warmer's, that makes at most
 * max(budget - 1, 1) + 1 buffers, still fewer than budget + extra. */
static inline uint32_t stp_mountopts_cache_extra(const struct stp_mount_opts *o)
{
	return o->warm_workers + 1 + (o->cache_budget == 1 && o->warm_workers);
}

/* The budget in blocks for an image with superblock SB: cache_budget= as given, else
 * stp_cache_default_budget for this machine's memory (eight blocks, more when they are
 * under 32 MiB); the monitor and the daemon see the same memory, so the same budget. */
static inline uint32_t stp_mountopts_cache_budget(const struct stp_mount_opts *o,
						  const struct stp_superblock *sb)
{
	return o->cache_budget ? o->cache_budget :
				 stp_cache_default_budget(sb, stp_cache_machine_memory());
}

/* The default number of warming workers on this machine. */
unsigned stp_mountopts_default_workers(void);

/* Defaults: cache budget 8, warming workers as above, sandbox on, restricted when the
 * effective uid is not 0, nothing else set. */
void stp_mountopts_init(struct stp_mount_opts *o);
void stp_mountopts_free(struct stp_mount_opts *o);

/* Parses one comma-separated list as given to -o. A comma inside double quotes does not
 * split. -EINVAL: a bad value, an unbalanced quote or (unless o->sloppy) an unknown
 * option. */
int stp_mountopts_parse_list(struct stp_mount_opts *o, const char *list, char *err,
			     size_t errlen);

/* Parses a mount(8) helper argv: SOURCE DIR [-s] [-f] [-n] [-v] [-o OPTS] [-t TYPE]
 * [-N NS]. -EINVAL on a usage error. Does not finish. */
int stp_mountopts_parse_helper(struct stp_mount_opts *o, int argc, char **argv, char *err,
			       size_t errlen);

/* For a restricted mount, refuses suid, dev, sandbox=off and sandbox=log, sandbox_user=
 * and -N, and on a user's line (user_mount) record= too: -EPERM with the option named.
 * 0 otherwise. Call it after every option is parsed; stp_mountopts_finish calls it. */
int stp_mountopts_check_user(const struct stp_mount_opts *o, char *err, size_t errlen);

/* Refuses a process made setuid or setgid, or given file capabilities (the kernel's
 * AT_SECURE): -EPERM with the ids in ERR, else 0. The mount's front ends are never meant
 * to run so, since users mount through mount(8) and fusermount3. */
int stp_mountopts_check_setid(char *err, size_t errlen);

/* Refuses what stp_mountopts_check_user refuses (-EPERM), then resolves the image path
 * and the mount point to absolute paths (-ENOENT etc. when one does not exist) and builds
 * o->fuse_opts. */
int stp_mountopts_finish(struct stp_mount_opts *o, char *err, size_t errlen);

#endif
