/* SPDX-License-Identifier: MIT */
/* stipple-readers: every `stipple` command but mount, which `stipple` runs itself
 * (mount/front.c) and execs this program for the others, with the same arguments. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "fetchsrc.h"
#include "util.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{ "mount", NULL, "serve an image through FUSE" }, /* `stipple`'s own */
	{ "status", stp_cmd_status, "show warming, cache use and memory of a mount" },
	{ "info", stp_cmd_info, "show the superblock and what the image holds" },
	{ "ls", stp_cmd_ls, "list a directory of the image" },
	{ "cat", stp_cmd_cat, "write a file of the image to standard output" },
	{ "diff", stp_cmd_diff, "compare two images, or an image and a directory" },
	{ "extract", stp_cmd_extract, "restore the tree into a directory" },
	{ "check", stp_cmd_check, "verify every checksum and the metadata" },
	{ "bench", stp_cmd_bench, "time reads through the library, without FUSE" },
	{ "keygen", stp_cmd_keygen, "make an Ed25519 key pair for signing images" },
	{ "sign", stp_cmd_sign, "sign an image in place with a secret key" },
	{ "verify", stp_cmd_verify, "check an image's signature and every hash" },
	{ "publish", stp_cmd_publish, "lay an image out as shared blocks for a web server" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: stipple COMMAND [OPTIONS] IMAGE ...\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(out, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(out, "\n'stipple COMMAND --help' describes one command; see stipple(1).\n");
}

int main(int argc, char **argv)
{
	if (stp_fill_stdio())
		return 1;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("stipple %s\n", STP_VERSION);
		return 0;
	}
	stp_cli_set_url_opener(stp_fetchsrc_open); /* a URL: through stipple-fetcher */
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name)) {
			if (subcommands[i].run)
				return subcommands[i].run(argc - 1, argv + 1);
			fprintf(stderr, "stipple: %s is run by stipple itself, not by %s\n",
				argv[1], argv[0]);
			return 2;
		}
	fprintf(stderr, "stipple: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
