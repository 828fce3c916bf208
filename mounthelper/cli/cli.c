/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "damage.h"
#include "escape.h"
#include "foreign.h"
#include "progress.h"
#include "httpurl.h"
#include "imgsrc.h"
#include "netrc.h"
#include "util.h"
#include "image.h"
#include "sign.h"
#include "log.h"
#include "treewalk.h"

static const char *log_prefix_name = "";
static char **cli_argv;

size_t stp_cli_utf8_len(const char *s, size_t len)
{
	return stp_escape_utf8_len(s, len);
}

void stp_cli_put_escaped(FILE *f, const char *s, size_t len)
{
	stp_escape_put(f, s, len);
}

static void put_escaped_str(FILE *f, const char *s)
{
	stp_cli_put_escaped(f, s, strlen(s));
}

/* --- bounded messages (stp_cli_bound_messages) --- */

#define KINDS_MAX 64   /* kinds told apart; the rest count as one more kind */
#define KIND_LEN 128   /* bytes of a kind's key and of its sample kept */

struct kind {
	char key[KIND_LEN];     /* kind_key's */
	char sample[KIND_LEN];  /* the first message of the kind, for the summary */
	unsigned long shown, hidden;
};

/* Shared by the log handler, which the library may call from any thread. */
static struct {
	pthread_mutex_t lock;
	unsigned limit;          /* messages shown per kind; 0: no bound */
	size_t n;                /* kinds in use */
	struct kind kinds[KINDS_MAX + 1]; /* the last: every kind past KINDS_MAX */
} bound = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Where the reason of a library message begins: its lines start with the image's path,
 * and a damage report's with "PATH: damaged image (FILE:LINE): " too. */
static const char *library_reason(const char *msg)
{
	const char *p = strstr(msg, ": damaged image (");

	if (p && (p = strstr(p, "): ")))
		return p + 3;
	if ((*msg == '/' || *msg == '.') && (p = strstr(msg, ": ")))
		return p + 2;
	return msg;
}

/* KEY: FMT (unless it only passes a message on, "%s"), then MSG (a library message from
 * its reason) up to its first '/', where a path begins, with each run of digits as one
 * '#': "block 7" and "block 12" are one kind, "cannot create /a" and "cannot open /b"
 * two, whatever the paths. */
static void kind_key(const char *fmt, const char *msg, char key[KIND_LEN])
{
	bool passed_on = !strcmp(fmt, "%s");
	size_t n = passed_on ? 0 : (size_t)snprintf(key, KIND_LEN, "%s|", fmt);

	if (passed_on)
		msg = library_reason(msg);
	for (const char *p = msg; *p && *p != '/' && n < KIND_LEN - 1; p++)
		if (*p < '0' || *p > '9')
			key[n++] = *p;
		else if (!n || key[n - 1] != '#')
			key[n++] = '#';
	key[n < KIND_LEN ? n : KIND_LEN - 1] = '\0';
}

static struct kind *kind_of(const char *key, const char *msg)
{
	struct kind *k;

	for (size_t i = 0; i < bound.n; i++)
		if (!strcmp(bound.kinds[i].key, key))
			return &bound.kinds[i];
	k = &bound.kinds[bound.n < KINDS_MAX ? bound.n++ : KINDS_MAX];
	if (!k->key[0]) {
		snprintf(k->key, KIND_LEN, "%s", key);
		snprintf(k->sample, KIND_LEN, "%s", msg);
	}
	return k;
}

/* Whether a message of format FMT, MSG once formatted, is to be printed: each kind up
 * to the limit, the rest counted. */
static bool message_shown(const char *fmt, const char *msg)
{
	char key[KIND_LEN];
	struct kind *k;
	bool shown;

	if (!bound.limit)
		return true;
	kind_key(fmt, msg, key);
	pthread_mutex_lock(&bound.lock);
	k = kind_of(key, msg);
	shown = k->shown < bound.limit;
	if (shown)
		k->shown++;
	else
		k->hidden++;
	pthread_mutex_unlock(&bound.lock);
	return shown;
}

void stp_cli_flush_messages(void)
{
	stp_progress_clear();
	pthread_mutex_lock(&bound.lock);
	stp_damage_flush(log_prefix_name);
	for (size_t i = 0; i <= KINDS_MAX; i++) {
		struct kind *k = &bound.kinds[i];

		if (!k->hidden)
			continue;
		fprintf(stderr, "stipple %s: ... and %lu more messages like \"", log_prefix_name,
			k->hidden);
		put_escaped_str(stderr, k->sample);
		fprintf(stderr, "\"%s (-v shows all)\n", strlen(k->sample) == KIND_LEN - 1 ?
			"..." : "");
		k->hidden = 0;
	}
	pthread_mutex_unlock(&bound.lock);
	fflush(stderr);
}

void stp_cli_bound_messages(unsigned limit)
{
	static bool registered;

	/* a buffer instead of a write(2) per byte: stderr is unbuffered by default */
	setvbuf(stderr, NULL, _IOFBF, 64u << 10);
	bound.limit = limit;
	stp_damage_group(!limit);
	if (!registered && !atexit(stp_cli_flush_messages))
		registered = true;
}

static atomic_ulong damage_reports; /* the library's "damaged image" lines printed */

unsigned long stp_cli_damage_reports(void)
{
	return atomic_load(&damage_reports);
}

static void cli_log(enum stp_log_level level, const char *msg)
{
	char plain[1024];

	if (level > STP_LOG_WARN || !stp_damage_library_message(msg) || !message_shown("%s", msg))
		return;
	if (strstr(msg, ": damaged image"))
		atomic_fetch_add(&damage_reports, 1);
	stp_progress_clear();
	fprintf(stderr, "stipple %s: ", log_prefix_name);
	put_escaped_str(stderr, stp_log_user_text(msg, plain, sizeof(plain)));
	fputc('\n', stderr);
}

void stp_cli_init(const struct stp_cli *cli, char **argv)
{
	cli_argv = argv;
	log_prefix_name = cli->name;
	stp_log_set_handler(cli_log);
	optind = 1;
	opterr = 0; /* stp_cli_other_option() says what was wrong */
}

static void print_help(const struct stp_cli *cli)
{
	printf("usage: stipple %s %s\n\n%s\n\noptions:\n", cli->name, cli->synopsis, cli->summary);
	if (cli->options)
		fputs(cli->options, stdout);
	printf("  %s--help     show this help and exit\n"
	       "  -V, --version  show the version and exit\n"
	       "\nSee stipple(1).\n", cli->own_h ? "    " : "-h, ");
}

static void usage_hint(const struct stp_cli *cli)
{
	fprintf(stderr, "usage: stipple %s %s\nTry 'stipple %s --help'.\n", cli->name,
		cli->synopsis, cli->name);
}

void stp_cli_broken_pipe(void)
{
	signal(SIGPIPE, SIG_DFL);
	raise(SIGPIPE);
	_exit(128 + SIGPIPE); /* SIGPIPE blocked: the status a shell would show */
}

int stp_cli_other_option(const struct stp_cli *cli, int opt)
{
	switch (opt) {
	case 'h':
	case STP_CLI_OPT_HELP:
		print_help(cli);
		return STP_EXIT_OK;
	case 'V':
		printf("stipple %s\n", STP_VERSION);
		return STP_EXIT_OK;
	default:
		/* getopt leaves the offending word just before optind */
		stp_cli_error(cli, "unknown option, or an option without its value: '%s'",
			      optind > 0 ? cli_argv[optind - 1] : "?");
		break;
	}
	usage_hint(cli);
	return STP_EXIT_USAGE;
}

int stp_cli_operands(const struct stp_cli *cli, int argc, int min, int max)
{
	int n = argc - optind;

	if (n >= min && n <= max)
		return 0;
	stp_cli_error(cli, n < min ? "missing operand" : "too many operands");
	usage_hint(cli);
	return STP_EXIT_USAGE;
}

/* "stipple NAME: [IMAGE: [PATH: ]]message", escaped, unless the bound leaves it out. */
static void vproblem(const struct stp_cli *cli, const char *image, const char *path,
		     const char *fmt, va_list ap)
{
	char *msg;
	int n = vasprintf(&msg, fmt, ap);

	if (n >= 0 && (!stp_damage_command_message(image, path, msg) || !message_shown(fmt, msg))) {
		free(msg);
		return;
	}
	stp_progress_clear();
	fprintf(stderr, "stipple %s: ", cli->name);
	if (image) {
		put_escaped_str(stderr, image);
		fputs(": ", stderr);
	}
	if (path) {
		put_escaped_str(stderr, path);
		fputs(": ", stderr);
	}
	if (n < 0)
		fputs("(message lost: out of memory)", stderr);
	else
		stp_cli_put_escaped(stderr, msg, (size_t)n);
	fputc('\n', stderr);
	free(n >= 0 ? msg : NULL);
}

void stp_cli_error(const struct stp_cli *cli, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vproblem(cli, NULL, NULL, fmt, ap);
	va_end(ap);
}

void stp_cli_problem(const struct stp_cli *cli, const char *image, const char *path,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vproblem(cli, image, path, fmt, ap);
	va_end(ap);
}

/* A reader's bound on one read of a URL, retries included, without STIPPLE_TIMEOUT. */
#define READER_TIMEOUT_S 20u

static stp_cli_url_opener url_opener;

void stp_cli_set_url_opener(stp_cli_url_opener open)
{
	url_opener = open;
}

/* A URL is read through stipple-fetcher (the opener), never in this process: proxies
 * come from the environment, the CA store is the system's (STIPPLE_CA names another
 * bundle), STIPPLE_TIMEOUT bounds each read in seconds, and STIPPLE_NETRC names a netrc
 * file with the server's login, checked here so that a bad one is named as the variable:
 * credentials in the URL, which every local user can read on the command line, are
 * refused. */
static int open_url(const struct stp_cli *cli, const char *url, struct stp_imgsrc **src,
		    bool *said)
{
	const char *t = getenv("STIPPLE_TIMEOUT"), *netrc = getenv("STIPPLE_NETRC");
	struct stp_cli_url u = { url, getenv("STIPPLE_CA"), netrc && *netrc ? netrc : NULL,
				 READER_TIMEOUT_S };
	uint64_t secs;
	size_t len;
	char *text;
	int err;

	*said = true; /* whatever fails here says why */
	if (stp_http_url_has_userinfo(url)) {
		char *shown = stp_http_url_public(url);

		stp_cli_error(cli, "%s: a URL with a user name or password is refused (every "
			      "local user could read it); put the credentials in a netrc file "
			      "and name it in STIPPLE_NETRC", shown ? shown : "the URL");
		free(shown);
		return -EINVAL;
	}
	if (u.netrc_file && (err = stp_netrc_load(u.netrc_file, &text, &len))) {
		stp_cli_error(cli, "STIPPLE_NETRC=%s: %s", netrc, err == -EINVAL ?
			      "not a readable file of at most 64 KiB" : stp_strerror(err));
		return err;
	}
	if (u.netrc_file)
		stp_netrc_discard(text, len);
	if (u.ca_file && access(u.ca_file, R_OK)) { /* named as the variable, not as ca= */
		err = -errno;
		stp_cli_error(cli, "STIPPLE_CA=%s: %s", u.ca_file, stp_strerror(err));
		return err;
	}
	if (t && !stp_parse_uint(t, 1, 3600, &secs))
		u.timeout_s = (unsigned)secs;
	if (!url_opener) {
		stp_cli_problem(cli, url, NULL, "cannot open: this program reads no URL");
		return -EPROTONOSUPPORT;
	}
	err = url_opener(cli, &u, src);
	*said = err != 0;
	return err;
}

bool stp_cli_foreign(const struct stp_cli *cli, const char *image)
{
	char msg[512];

	if (stp_imgsrc_is_url(image) || !stp_foreign_describe(image, msg, sizeof(msg)))
		return false;
	stp_cli_problem(cli, image, NULL, "%s", msg);
	return true;
}

int stp_cli_open(const struct stp_cli *cli, const char *image, struct stp_image **out)
{
	unsigned long told = stp_cli_damage_reports();
	struct stp_imgsrc *src;
	bool said = false;
	int err;

	if (stp_cli_foreign(cli, image))
		return -EINVAL;
	if (stp_imgsrc_is_url(image))
		err = open_url(cli, image, &src, &said) ?: stp_image_open_src(src, out);
	else
		err = stp_image_open(image, out);

	/* the library's damage report named the image and the cause: one line is enough */
	said |= err == -EUCLEAN && stp_cli_damage_reports() != told;
	if (err && !said)
		stp_cli_problem(cli, image, NULL, "cannot open: %s", stp_strerror(err));
	if (!err)
		stp_progress_attach(*out);
	return err;
}

/* What a failed verified open means, beyond what the library logged. */
static const char *verify_error(int err)
{
	switch (err) {
	case -ENOKEY: return "the image is not signed";
	case -EKEYREJECTED: return "the signature is not valid for this key";
	default: return stp_strerror(err);
	}
}

int stp_cli_open_verified(const struct stp_cli *cli, const char *image,
			  const struct stp_pubkey *key, struct stp_image **out)
{
	unsigned long told = stp_cli_damage_reports();
	struct stp_imgsrc *src;
	bool said = false;
	int fd, err;

	if (stp_cli_foreign(cli, image))
		return -EINVAL;
	if (stp_imgsrc_is_url(image)) {
		err = open_url(cli, image, &src, &said) ?:
		      stp_image_open_src_verified(src, key, out);
		said |= err == -EUCLEAN && stp_cli_damage_reports() != told;
		if (err && !said && err != -ENOKEY && err != -EKEYREJECTED)
			stp_cli_problem(cli, image, NULL, "cannot open: %s", verify_error(err));
		if (!err)
			stp_progress_attach(*out);
		return err;
	}
	fd = stp_open_if(image, O_RDONLY, stp_node_is_image); /* no device's open (util.h) */
	if (fd < 0) {
		stp_cli_problem(cli, image, NULL, "cannot open: %s",
				fd == -EINVAL ? "not a regular file" : stp_strerror(fd));
		return fd;
	}
	err = stp_image_open_verified(fd, image, key, out);
	/* the library named the image and the keys for these two, and told the damage */
	said = err == -EUCLEAN && stp_cli_damage_reports() != told;
	if (err && !said && err != -ENOKEY && err != -EKEYREJECTED)
		stp_cli_problem(cli, image, NULL, "cannot open: %s", verify_error(err));
	if (!err)
		stp_progress_attach(*out);
	return err;
}

int stp_cli_open_checked(const struct stp_cli *cli, const char *image,
			 const struct stp_pubkey *key, struct stp_image **img)
{
	struct stp_superblock sb;
	unsigned long told;
	int fd, err;

	if (key || stp_cli_foreign(cli, image))
		return key ? stp_cli_open_verified(cli, image, key, img) : -EINVAL;
	fd = stp_open_if(image, O_RDONLY, stp_node_is_image);
	if (fd < 0)
		return stp_cli_open(cli, image, img); /* says why */
	told = stp_cli_damage_reports();
	err = stp_image_read_superblock(fd, image, &sb);
	close(fd);
	if (err) { /* reported by the library: opening again would say it twice */
		if (err != -EUCLEAN || stp_cli_damage_reports() == told)
			stp_cli_problem(cli, image, NULL, "cannot open: %s",
					stp_strerror(err));
		return err;
	}
	if (sb.feat_compat & STP_FEAT_COMPAT_SIGNED)
		return stp_cli_open_verified(cli, image, NULL, img);
	return stp_cli_open(cli, image, img);
}

int stp_cli_load_pubkey(const struct stp_cli *cli, const char *path, struct stp_pubkey *key)
{
	int err = stp_sign_load_pubkey(path, key);

	if (err == -EINVAL)
		stp_cli_error(cli, "%s: not an Ed25519 public key in PEM", path);
	else if (err)
		stp_cli_error(cli, "%s: %s", path, stp_strerror(err));
	return err;
}

int stp_cli_resolve(const struct stp_cli *cli, const struct stp_image *img, const char *path,
		    uint32_t *ino)
{
	int err = stp_image_resolve(img, path, ino);

	if (err)
		stp_cli_problem(cli, stp_image_path(img), path, "%s",
				err == -ENOTDIR ? "a component is not a directory"
						: stp_strerror(err));
	return err;
}

void stp_cli_mode_string(uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	char type;

	switch (mode & S_IFMT) {
	case S_IFDIR: type = 'd'; break;
	case S_IFLNK: type = 'l'; break;
	case S_IFCHR: type = 'c'; break;
	case S_IFBLK: type = 'b'; break;
	case S_IFIFO: type = 'p'; break;
	case S_IFSOCK: type = 's'; break;
	case S_IFREG: type = '-'; break;
	default: type = '?'; break;
	}
	out[0] = type;
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	if (mode & S_ISUID)
		out[3] = (mode & S_IXUSR) ? 's' : 'S';
	if (mode & S_ISGID)
		out[6] = (mode & S_IXGRP) ? 's' : 'S';
	if (mode & S_ISVTX)
		out[9] = (mode & S_IXOTH) ? 't' : 'T';
	out[10] = '\0';
}

/* --- the tree walk --- */

void stp_walk_problem(struct stp_walk *w, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vproblem(w->cli, w->image, path, fmt, ap);
	va_end(ap);
	w->problems++;
}

int stp_walk_link_target(struct stp_walk *w, const struct stp_walk_entry *e, char **target)
{
	char t[STP_LINK_MAX + 1];
	size_t len;
	int err = stp_image_readlink(w->img, &e->inode, t, &len);

	if (err) {
		stp_walk_problem(w, e->path, "symlink target: %s", stp_strerror(err));
		return err;
	}
	*target = strndup(t, len);
	return *target ? 0 : -ENOMEM;
}

static void walk_entry_of(struct stp_walk *w, const struct stp_tree_entry *t,
			  struct stp_walk_entry *e)
{
	*e = (struct stp_walk_entry){ .path = t->rooted, .name = t->name, .name_len = t->name_len,
				      .ino = t->ino, .dir = t->dir, .index = t->index,
				      .dtype = t->dtype, .depth = t->depth, .inode = *t->inode };
}

static int walk_enter(void *ctx, const struct stp_tree_entry *t)
{
	struct stp_walk *w = ctx;
	struct stp_walk_entry e;
	int err;

	walk_entry_of(w, t, &e);
	err = w->enter(w, &e);
	return err < 0 || err == STP_WALK_SKIP ? err : 0;
}

static int walk_leave(void *ctx, const struct stp_tree_entry *t)
{
	struct stp_walk *w = ctx;
	struct stp_walk_entry e;

	walk_entry_of(w, t, &e);
	return w->leave ? w->leave(w, &e) : 0;
}

static int walk_damage(void *ctx, const struct stp_tree_problem *p)
{
	struct stp_walk *w = ctx;
	char msg[128];

	stp_check_tree_problem(p, msg, sizeof(msg));
	if (p->what == STP_TREE_ABANDONED)
		stp_cli_problem(w->cli, w->image, p->rooted, "%s", msg); /* not counted */
	else
		stp_walk_problem(w, p->rooted, "%s", msg);
	return 0;
}

/* The root, which common's walk does not visit: its enter, the walk, its leave. */
int stp_walk_tree(struct stp_walk *w)
{
	/* rooted paths stay below STP_WALK_PATH_MAX bytes with their NUL */
	static const struct stp_treewalk_ops ops = {
		.enter = walk_enter, .leave = walk_leave, .problem = walk_damage,
		.path_max = STP_WALK_PATH_MAX - 1, .inodes = 1,
	};
	struct stp_walk_entry root = { .path = "/", .name = "", .ino = STP_ROOT_INO,
				       .dir = STP_ROOT_INO, .dtype = DT_DIR };
	int err;

	w->problems = 0;
	/* inodes that share records would make the walk quadratic: refused before it starts,
	 * so that nothing is written of an image that breaks the rule */
	err = stp_treewalk_files(w->img, NULL, NULL);
	if (err)
		return err;
	err = stp_image_inode(w->img, STP_ROOT_INO, &root.inode);
	if (err) {
		stp_walk_problem(w, "/", "root inode: %s", stp_strerror(err));
		return 0;
	}
	err = w->enter(w, &root);
	if (err < 0 || err == STP_WALK_SKIP)
		return err < 0 ? err : 0;
	err = stp_treewalk(w->img, &ops, w);
	if (err == STP_WALK_SKIP)
		err = 0;
	if (err)
		return err;
	return w->leave ? w->leave(w, &root) : 0;
}
