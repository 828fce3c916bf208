/* SPDX-License-Identifier: MIT */
/*
 * What the subcommands of `stipple` share: option handling with --help and --version,
 * messages that name the command, the image and the path (cli.c); and for the readers
 * (info, ls, cat, extract, check...), opening an image (cliopen.c) and a walk of the
 * image's tree that survives a damaged image (cliwalk.c).
 *
 * Single-threaded: these helpers keep no global state except the log handler that
 * stp_cli_init() installs and the message counts of stp_cli_bound_messages(). Functions return 0 or a negative errno unless they say
 * otherwise; the ones that print say so.
 */
#ifndef STP_CLI_H
#define STP_CLI_H

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "format.h"
#include "treewalk.h"
#include "util.h"

struct stp_image;

/* Exit statuses of a subcommand (see commands.h). */
enum { STP_EXIT_OK = 0, STP_EXIT_FAIL = 1, STP_EXIT_USAGE = 2 };

/* Describes one subcommand for its messages and its --help text. */
struct stp_cli {
	const char *name;     /* "ls" */
	const char *synopsis; /* "[-l] IMAGE [PATH]" */
	const char *summary;  /* one sentence */
	const char *options;  /* the command's own options, one per line, or NULL */
	int own_h;            /* -h is the command's own (ls: human sizes); help is --help */
};

/* Options every subcommand accepts; put them into its getopt tables. */
#define STP_CLI_SHORTOPTS "hV"
#define STP_CLI_LONGOPTS { "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }
/* For a command whose -h is its own (own_h): --help gives this instead of 'h'. */
#define STP_CLI_OPT_HELP 0x100
#define STP_CLI_LONGOPTS_OWN_H { "help", no_argument, NULL, STP_CLI_OPT_HELP }, \
	{ "version", no_argument, NULL, 'V' }

/* Installs a log handler that prefixes the library's messages with "stipple NAME: ",
 * and resets getopt for ARGV. Call first. */
void stp_cli_init(const struct stp_cli *cli, char **argv);

/* Handles an option character the command did not: -h/--help (STP_CLI_OPT_HELP) and -V/--version print
 * and give 0, anything else prints a usage hint and gives 2. Returns the exit status. */
int stp_cli_other_option(const struct stp_cli *cli, int opt);

/* Standard output is a pipe whose reader has gone (`stipple extract --tar | head`): ends
 * the process quietly, killed by SIGPIPE as cat(1) and tar(1) are (a shell shows 141).
 * For a command that ignores SIGPIPE to clean up first. Does not return. */
void stp_cli_broken_pipe(void) __attribute__((noreturn));

/* Checks that MIN to MAX operands follow the options; prints a usage hint otherwise.
 * Returns 0, or the exit status 2. */
int stp_cli_operands(const struct stp_cli *cli, int argc, int min, int max);

/*
 * Names, link targets, paths and any text from an image or a mount may hold bytes that
 * a terminal acts on. Everything the readers print of them goes through the one rule of
 * escape.h (the mount's monitor uses it too): C0 and C1 controls, DEL, backslashes and
 * bytes that are not UTF-8 become a backslash and three octal digits.
 */
void stp_cli_put_escaped(FILE *f, const char *s, size_t len);

/* Length of the valid UTF-8 sequence at S (LEN bytes left; 1 for ASCII), or 0 when the
 * bytes there are not UTF-8 (stp_escape_utf8_len). */
size_t stp_cli_utf8_len(const char *s, size_t len);

/* The messages below escape the image, the path and the formatted text by that rule. */
/* "stipple NAME: message" on stderr. */
void stp_cli_error(const struct stp_cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "stipple NAME: IMAGE: PATH: message" on stderr; PATH may be NULL. */
void stp_cli_problem(const struct stp_cli *cli, const char *image, const char *path,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same with the arguments in AP; IMAGE may be NULL too. */
void stp_cli_vproblem(const struct stp_cli *cli, const char *image, const char *path,
		      const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

/*
 * For a command that may report many problems with one image (check, extract): stderr
 * gets a buffer (a write(2) per buffer, not per byte), and at most LIMIT messages of
 * each kind are printed (LIMIT 0: all, for -v); the rest are counted, and
 * stp_cli_flush_messages, which exit() also calls, prints one line per kind saying how
 * many were left out, with the first of them. A kind is the format of a message and
 * its text up to the first '/' (where a path would begin) with every number alike.
 * Call after stp_cli_init, before anything is printed. Thread-safe, as the library's
 * log handler must be.
 */
#define STP_CLI_KIND_LIMIT 20
void stp_cli_bound_messages(unsigned limit);
/* Prints what stp_cli_bound_messages left out so far, and flushes stderr. */
void stp_cli_flush_messages(void);

/* Whether the local file IMAGE is something else a user may take for an image (an
 * empty file, an archive, squashfs, erofs: foreign.h); if so prints what it is and what
 * to run instead. stp_cli_open and stp_cli_open_verified ask first (-EINVAL). */
bool stp_cli_foreign(const struct stp_cli *cli, const char *image);

/* How many of the library's "damaged image" reports have been printed so far: an open
 * that fails after one says nothing more. Thread-safe. */
unsigned long stp_cli_damage_reports(void);

/* A URL to read and how, from the environment (stipple(1)): STIPPLE_CA, STIPPLE_NETRC,
 * STIPPLE_TIMEOUT; proxies from http_proxy and the like. */
struct stp_cli_url {
	const char *url;
	const char *ca_file;    /* another CA bundle than the system's, or NULL */
	const char *netrc_file; /* the server's login and password, or NULL */
	unsigned timeout_s;     /* bound of one read, retries included */
};
struct stp_imgsrc;
/* How a URL becomes an image source: 0, or a negative errno with the cause printed
 * (naming the URL, after "stipple NAME: "). The readers set it (stp_cli_set_url_opener)
 * to stipple-fetcher's client, which lives with the mount, above cli/; without one a URL
 * cannot be opened (-EPROTONOSUPPORT). */
typedef int (*stp_cli_url_opener)(const struct stp_cli *cli, const struct stp_cli_url *u,
				  struct stp_imgsrc **out);
void stp_cli_set_url_opener(stp_cli_url_opener open);

/* Opens IMAGE (a file, or a URL through the opener above); on failure prints why
 * (naming IMAGE) and returns the negative errno. */
int stp_cli_open(const struct stp_cli *cli, const char *image, struct stp_image **out);

struct stp_pubkey;
/* The same, opened verified (image.h): every hash checked, and with KEY (NULL: any
 * signer, integrity alone) the signature. */
int stp_cli_open_verified(const struct stp_cli *cli, const char *image,
			  const struct stp_pubkey *key, struct stp_image **out);
/* Opens IMAGE as `stipple check` does: a signed image verified (every hash checked),
 * with KEY also its signature (then an unsigned image fails), else stp_cli_open.
 * On failure prints why, naming IMAGE. */
int stp_cli_open_checked(const struct stp_cli *cli, const char *image,
			 const struct stp_pubkey *key, struct stp_image **img);
/* Loads the public key file PATH; on failure prints why (naming PATH). */
int stp_cli_load_pubkey(const struct stp_cli *cli, const char *path, struct stp_pubkey *key);

/* Resolves PATH ("/a/b", "a/b/", "/" or "") in the image; prints a message naming
 * PATH and the image on failure. */
int stp_cli_resolve(const struct stp_cli *cli, const struct stp_image *img, const char *path,
		    uint32_t *ino);

/* The device number of a character or block device inode (format.h). */
static inline uint32_t stp_cli_rdev_major(const struct stp_inode *in)
{
	return stp_rdev_major(in->data);
}
static inline uint32_t stp_cli_rdev_minor(const struct stp_inode *in)
{
	return stp_rdev_minor(in->data);
}

/* "drwxr-xr-x" from a mode, into OUT (11 bytes with the NUL). */
void stp_cli_mode_string(uint32_t mode, char out[11]);

/*
 * The tree walk: common/treewalk.h's, with the root, messages and a count of problems.
 * Directories are visited depth first, entries in the order the image stores them. A directory reached a second time (a cycle or a hard-linked directory),
 * an entry or inode that cannot be decoded, a bad name or a path longer than PATH_MAX
 * is reported with stp_cli_problem(), counted in problems, and skipped with what lies
 * below it; the walk then goes on.
 */
#define STP_WALK_PATH_MAX (STP_LINK_MAX + 1) /* PATH_MAX: bytes with the NUL */

struct stp_walk_entry {
	const char *path;     /* "/" for the root, else "/a/b": NUL-terminated */
	const char *name;     /* last component, NUL-terminated ("" for the root) */
	size_t name_len;
	uint32_t ino, dir;    /* the inode and the directory listing it (root: 0, 0) */
	uint32_t index;       /* of the entry in its directory */
	uint8_t dtype;        /* what the directory entry says (root: DT_DIR) */
	unsigned depth;       /* 0 for the root */
	struct stp_inode inode;
};

struct stp_walk;
/* Returns 0 to go on, STP_WALK_SKIP (from enter, on a directory) to skip what lies
 * below it and its leave call, or a negative errno to stop the walk. */
typedef int (*stp_walk_fn)(struct stp_walk *w, const struct stp_walk_entry *e);
#define STP_WALK_SKIP STP_TREEWALK_SKIP

struct stp_walk {
	/* set by the caller */
	const struct stp_cli *cli;
	const struct stp_image *img;
	const char *image;       /* path for messages */
	stp_walk_fn enter;       /* every entry, a directory before its children */
	stp_walk_fn leave;       /* a directory after its children; may be NULL */
	void *ctx;
	/* kept by the walk */
	unsigned long problems;
};

/* Walks the whole tree. Returns 0 when it reached the end (look at problems), or the
 * negative errno a callback stopped it with, or -ENOMEM; -EUCLEAN, before any callback,
 * when inodes share extent or directory entry records (stp_treewalk_files, reported). */
int stp_walk_tree(struct stp_walk *w);

/* The target of symlink E as a new NUL-terminated string in *TARGET (the caller frees
 * it). An empty target or one holding a NUL is damage: reported and counted, as a read
 * error is; returns 0, that -errno, or -ENOMEM. */
int stp_walk_link_target(struct stp_walk *w, const struct stp_walk_entry *e, char **target);

/* Reports a problem found at entry E the way the walk does, and counts it. */
void stp_walk_problem(struct stp_walk *w, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
