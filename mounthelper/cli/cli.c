/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "damage.h"
#include "escape.h"
#include "progress.h"
#include "util.h"
#include "log.h"

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
void stp_cli_vproblem(const struct stp_cli *cli, const char *image, const char *path,
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
	stp_cli_vproblem(cli, NULL, NULL, fmt, ap);
	va_end(ap);
}

void stp_cli_problem(const struct stp_cli *cli, const char *image, const char *path,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	stp_cli_vproblem(cli, image, path, fmt, ap);
	va_end(ap);
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
