/* SPDX-License-Identifier: MIT */
/*
 * `stipple check`: verify an image completely. Opening it checks the superblock, the
 * metadata, the dictionary and every block table entry; stp_image_check_all (common/
 * check.h) then decodes every data block and walks the whole tree for what the
 * checksums cannot tell. This file adds what only the file can: bytes past the image.
 * A signed image is opened verified: the signed hashes are checked as each part is
 * read, with --key the signature as well.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"
#include "commands.h"
#include "image.h"
#include "jsonout.h"
#include "progress.h"
#include "sign.h"

static const struct stp_cli check_cli = {
	.name = "check",
	.synopsis = "[-qv] [--json] [--key PUBKEY] IMAGE",
	.summary = "Verify every checksum of IMAGE, decode every data block, and check that\n"
		   "the metadata is consistent. Exits 1 and names the problems if any (the\n"
		   "first 20 of each kind, then how many more). A signed image has every signed\n"
		   "hash checked too.",
	.options = "  -k, --key PUBKEY   also check that the signature is PUBKEY's\n"
		   "  -q, --quiet        no progress line on a terminal\n"
		   "  -v, --verbose      name every problem, however many of a kind\n"
		   "  -j, --json         the verdict as one JSON document (stipple(1))\n",
};

/* What a run reports to: stderr, and with --json a list of the problems too. */
struct check_out {
	const char *image;
	json_t *problems;   /* --json, else NULL */
};

static void print_problem(void *ctx, const char *path, const char *msg)
{
	struct check_out *out = ctx;

	stp_cli_problem(&check_cli, out->image, path, "%s", msg);
	if (out->problems)
		json_array_append_new(out->problems, json_pack("{s:o?,s:s}", "path",
				      path ? stp_json_bytes(path, strlen(path)) : json_null(),
				      "message", msg));
}

/* Opening checked that the file holds the image (a block device by its last byte); a
 * regular file may still hold more. A device is commonly larger than what it holds. */
static unsigned long check_trailing_bytes(const struct stp_image *img, struct check_out *out)
{
	struct stat st;

	if (fstat(stp_image_fd(img), &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size <= stp_image_sb(img)->image_size)
		return 0;
	print_problem(out, NULL, "the file has bytes past the end of the image");
	return 1;
}

static void print_summary(const char *image, const struct stp_image *img,
			  const struct stp_check_counts *n, int keyed)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	uint8_t id[32];
	char hex[65];

	printf("%s: OK: %u inodes, %" PRIu64 " entries, %" PRIu64 " blocks, %" PRIu64
	       " bytes of data verified", image, sb->inode_count, n->entries, sb->block_count,
	       sb->data_size);
	if (stp_image_verified(img) && stp_image_signer(img, id))
		printf("; signed hashes match%s%s", keyed ? ", signed by key " : "",
		       keyed ? stp_sign_key_hex(id, hex) : "");
	putchar('\n');
}


/* --json: the verdict, the figures and every problem reported (stipple(1)). */
static int print_json(struct check_out *out, const struct stp_image *img,
		      const struct stp_check_counts *n, unsigned long problems, int err)
{
	const struct stp_superblock *sb = img ? stp_image_sb(img) : NULL;
	uint8_t id[32];
	char hex[65];
	json_t *doc = json_pack("{s:o?,s:b,s:s?,s:I,s:o}",
		"image", stp_json_bytes(out->image, strlen(out->image)),
		"ok", !err && !problems, "stopped", err ? stp_strerror(err) : NULL,
		"problem_count", (json_int_t)problems, "problems", json_incref(out->problems));

	if (doc && sb)
		json_object_update_new(doc, json_pack("{s:I,s:I,s:I,s:I,s:o}",
			"inodes", (json_int_t)sb->inode_count, "entries", (json_int_t)n->entries,
			"blocks", (json_int_t)sb->block_count, "data_size", (json_int_t)sb->data_size,
			"signer", stp_image_verified(img) && stp_image_signer(img, id) ?
				  json_string(stp_sign_key_hex(id, hex)) : json_null()));
	return stp_json_print(&check_cli, doc);
}

static int check_run(const char *image, const struct stp_pubkey *key, int json)
{
	struct check_out out = { .image = image, .problems = json ? json_array() : NULL };
	struct stp_check_counts n = { 0 };
	struct stp_image *img;
	unsigned long problems = 0;
	int err;

	if ((err = stp_cli_open_checked(&check_cli, image, key, &img))) {
		if (json) { /* the open said why on stderr */
			json_array_append_new(out.problems, json_pack("{s:n,s:s+}", "path",
					      "message", "cannot open: ", stp_strerror(err)));
			print_json(&out, NULL, &n, 1, 0);
		}
		json_decref(out.problems);
		return STP_EXIT_FAIL;
	}
	problems = check_trailing_bytes(img, &out);
	err = stp_image_check_all(img, print_problem, &out, &n);
	problems += n.problems;
	stp_cli_flush_messages(); /* what was left out, before the verdict */
	if (err)
		stp_cli_problem(&check_cli, image, NULL, "check stopped: %s", stp_strerror(err));
	else if (problems)
		stp_cli_problem(&check_cli, image, NULL, "%lu problems found", problems);
	else if (!json)
		print_summary(image, img, &n, key != NULL);
	if (json && print_json(&out, img, &n, problems, err))
		err = -EIO;
	json_decref(out.problems);
	stp_image_close(img);
	return err || problems ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' }, { "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' }, { "quiet", no_argument, NULL, 'q' },
		STP_CLI_LONGOPTS, { 0 },
	};
	struct stp_pubkey key;
	const char *keyfile = NULL;
	int opt, status, verbose = 0, json = 0, quiet = 0;

	stp_cli_init(&check_cli, argv);
	while ((opt = getopt_long(argc, argv, "jk:qv" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 'k')
			keyfile = optarg;
		else if (opt == 'v')
			verbose = 1;
		else if (opt == 'j')
			json = 1;
		else if (opt == 'q')
			quiet = 1;
		else
			return stp_cli_other_option(&check_cli, opt);
	}
	stp_cli_bound_messages(verbose ? 0 : STP_CLI_KIND_LIMIT);
	if ((status = stp_cli_operands(&check_cli, argc, 1, 1)))
		return status;
	if (keyfile && stp_cli_load_pubkey(&check_cli, keyfile, &key))
		return STP_EXIT_FAIL;
	stp_progress_want(check_cli.name, quiet);
	return check_run(argv[optind], keyfile ? &key : NULL, json);
}
