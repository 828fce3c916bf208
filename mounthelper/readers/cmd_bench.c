/* SPDX-License-Identifier: MIT */
/*
 * `stipple bench`: the command line. The engine (bench_engine.h) makes the timed reads;
 * the report (bench_report.h) prints them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench_engine.h"
#include "bench_report.h"
#include "cli.h"
#include "commands.h"
#include "image.h"
#include "sign.h"
#include "util.h"

static const struct stp_cli bench_cli = {
	.name = "bench",
	.synopsis = "[OPTIONS] IMAGE",
	.summary = "Time reads of the files of IMAGE through the library and its block cache,\n"
		   "without FUSE, and report throughput, latency percentiles and cache figures.",
	.options =
		"  -n, --reads N          random reads to make (default 10000)\n"
		"  -s, --read-size BYTES  bytes per read, suffixes K, M (default 4K)\n"
		"  -t, --threads T        reading threads sharing one cache (default 1)\n"
		"      --seed S           seed of the random offsets (default 1)\n"
		"  -c, --cache-budget N   decoded blocks the cache keeps (default 8, or as many\n"
		"                         as fit in 256 MiB when blocks are smaller)\n"
		"      --warm             decode blocks into the cache before timing\n"
		"      --sequential       read every file once, in image order, instead\n"
		"      --key PUBKEY       open the image verified: every block checked against\n"
		"                         the hashes PUBKEY signed\n"
		"  -j, --json             print the report as one JSON object\n"
		"      --print-reads      list every read after the run (a debugging aid)\n",
};

static int bench_run(const char *image, const struct bench_opts *o)
{
	struct bench b = { .cli = &bench_cli, .o = o, .image = image };
	struct bench_summary s;
	int err;

	pthread_mutex_init(&b.go_lock, NULL);
	pthread_cond_init(&b.go_cond, NULL);
	err = bench_prepare(&b);
	if (!err)
		err = bench_workers_run(&b);
	if (!err)
		err = bench_report_failure(&b);
	if (!err && (err = bench_summarize(&b, &s)))
		stp_cli_error(&bench_cli, "%s", stp_strerror(err));
	if (!err) {
		if (o->print_reads)
			bench_print_reads(&b);
		if (!o->json)
			bench_print_text(&b, &s);
		else if ((err = bench_print_json(&b, &s)))
			stp_cli_error(&bench_cli, "%s", stp_strerror(err));
	}
	bench_free(&b);
	pthread_mutex_destroy(&b.go_lock);
	pthread_cond_destroy(&b.go_cond);
	if (!err && fflush(stdout)) {
		stp_cli_error(&bench_cli, "writing to standard output: %s", strerror(errno));
		err = -EIO;
	}
	return err ? STP_EXIT_FAIL : STP_EXIT_OK;
}

/* Parses the value of option NAME into *OUT, in [MIN, MAX]; prints why not. */
static int parse_count(const char *name, const char *arg, uint64_t min, uint64_t max,
		       int size, uint64_t *out)
{
	int err = size ? stp_parse_size(arg, out) : stp_parse_uint(arg, min, max, out);

	if (!err && (*out < min || *out > max))
		err = -ERANGE;
	if (err)
		stp_cli_error(&bench_cli, "%s '%s': want %s from %" PRIu64 " to %" PRIu64, name,
			      arg, size ? "a size" : "a number", min, max);
	return err;
}

enum { OPT_SEED = 256, OPT_WARM, OPT_SEQUENTIAL, OPT_PRINT_READS, OPT_KEY };

static struct stp_pubkey bench_key;

static int parse_option(int opt, struct bench_opts *o)
{
	uint64_t v;

	switch (opt) {
	case 'n':
		return parse_count("--reads", optarg, 1, BENCH_READS_MAX, 0, &o->reads);
	case 's':
		return parse_count("--read-size", optarg, 1, BENCH_READ_SIZE_MAX, 1, &o->read_size);
	case 't':
		if (parse_count("--threads", optarg, 1, BENCH_THREADS_MAX, 0, &v))
			return -EINVAL;
		o->threads = (uint32_t)v;
		return 0;
	case 'c':
		if (parse_count("--cache-budget", optarg, 1, UINT32_MAX, 0, &v))
			return -EINVAL;
		o->budget = (uint32_t)v;
		return 0;
	case OPT_SEED:
		return parse_count("--seed", optarg, 0, UINT64_MAX, 0, &o->seed);
	case OPT_WARM: o->warm = 1; return 0;
	case OPT_SEQUENTIAL: o->sequential = 1; return 0;
	case 'j': o->json = 1; return 0;
	case OPT_PRINT_READS: o->print_reads = 1; return 0;
	case OPT_KEY: /* loaded once the command line is known good */
		o->key_file = optarg;
		return 0;
	default: return 1;
	}
}

int stp_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reads", required_argument, NULL, 'n' },
		{ "read-size", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "cache-budget", required_argument, NULL, 'c' },
		{ "warm", no_argument, NULL, OPT_WARM },
		{ "sequential", no_argument, NULL, OPT_SEQUENTIAL },
		{ "json", no_argument, NULL, 'j' },
		{ "print-reads", no_argument, NULL, OPT_PRINT_READS },
		{ "key", required_argument, NULL, OPT_KEY },
		STP_CLI_LONGOPTS, { 0 },
	};
	struct bench_opts o = { .reads = 10000, .read_size = 4096, .seed = 1, .threads = 1 };
	int opt, status, rc;

	stp_cli_init(&bench_cli, argv);
	while ((opt = getopt_long(argc, argv, "n:s:t:c:j" STP_CLI_SHORTOPTS, longopts,
				  NULL)) != -1) {
		rc = parse_option(opt, &o);
		if (rc > 0)
			return stp_cli_other_option(&bench_cli, opt);
		if (rc < 0)
			return STP_EXIT_USAGE;
	}
	if ((status = stp_cli_operands(&bench_cli, argc, 1, 1)))
		return status;
	if (o.json && o.print_reads) {
		stp_cli_error(&bench_cli, "--print-reads and --json do not go together");
		return STP_EXIT_USAGE;
	}
	/* a key file that is missing is a failure (1), as a missing IMAGE is, not a usage error */
	if (o.key_file) {
		if (stp_cli_load_pubkey(&bench_cli, o.key_file, &bench_key))
			return STP_EXIT_FAIL;
		o.key = &bench_key;
	}
	return bench_run(argv[optind], &o);
}
