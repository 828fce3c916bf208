/* SPDX-License-Identifier: MIT */
/*
 * mkstipple's command line. A usage error is one line naming the option and a hint to
 * run --help; an option of mksquashfs (-comp, -all-root, -e, ...) gets a line naming what
 * stipple does instead. Not thread-safe (main thread, once).
 */
#ifndef MKSTP_OPTIONS_H
#define MKSTP_OPTIONS_H

#include <stdint.h>

#include "attrs.h"
#include "exclude.h"
#include "pack.h"
#include "pseudo.h"
#include "scan.h"
#include "select.h"
#include "sign.h"

struct options {
	const char *source, *image, *hot_list, *sign_key;
	uint64_t hot_margin;
	const char *hot_block_arg; /* --hot-block-size, as given */
	const char *files_from;    /* -T, read once every option is known (--null) */
	const char *base;          /* --base: the image whose layout to keep */
	struct stp_seckey *key;
	struct pack_opts pack;
	struct attr_opts attrs;
	struct exclude exclude;
	struct select select;      /* -T's paths */
	struct pseudo pseudo;      /* -p, -pf */
	struct scan_opts scan;
	int all_root;
	int quiet;
	int verbose;               /* -v: list every entry */
	int dry_run;
	int json;
	int null_names;            /* --null: -T's names end with NUL */
	int code_apart;
	int whole_meta;            /* --no-meta-pages */
	int cut_inside;            /* --cut-inside (the default with --base; --no-cut-inside):
				    * large files cut by content (chunks.h) */
	unsigned cut_mean_log;     /* its mean chunk; 0: chunks.h's default */
};

/* Parses ARGV into O (zeroed by the caller). --help and --version print and exit 0.
 * Returns 0, or 2 after printing a usage error (or a bad value, naming the option). O
 * owns what it loads (the exclude and -T lists, the pseudo definitions): options_free. */
int options_parse(int argc, char **argv, struct options *o);
void options_free(struct options *o);

#endif
