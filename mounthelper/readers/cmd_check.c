/* SPDX-License-Identifier: MIT */
/*
 * `stipple check`: verify an image completely. Opening it checks the superblock, the
 * metadata, the dictionary and every block table entry; stp_image_check_all (common/
 * check.h) then decodes every data block and walks the whole tree for what the
 * checksums cannot tell. This file adds what only the file can: bytes past the image.
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "check.h"
#include "cli.h"
#include "commands.h"
#include "image.h"

static const struct stp_cli check_cli = {
	.name = "check",
	.synopsis = "IMAGE",
	.summary = "Verify every checksum of IMAGE, decode every data block, and check that\n"
		   "the metadata is consistent. Exits 1 and names each problem if any.",
	.options = NULL,
};

static void print_problem(void *ctx, const char *path, const char *msg)
{
	stp_cli_problem(&check_cli, ctx, path, "%s", msg);
}

/* Opening checked that the file holds the image (a block device by its last byte); a
 * regular file may still hold more. A device is commonly larger than what it holds. */
static unsigned long check_trailing_bytes(const struct stp_image *img, const char *image)
{
	struct stat st;

	if (fstat(stp_image_fd(img), &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size <= stp_image_sb(img)->image_size)
		return 0;
	print_problem((void *)image, NULL, "the file has bytes past the end of the image");
	return 1;
}

static void print_summary(const char *image, const struct stp_superblock *sb,
			  const struct stp_check_counts *n)
{
	printf("%s: OK: %u inodes, %" PRIu64 " entries, %" PRIu64 " blocks, %" PRIu64
	       " bytes of data verified\n", image, sb->inode_count, n->entries, sb->block_count,
	       sb->data_size);
}

static int check_run(const char *image)
{
	struct stp_check_counts n;
	struct stp_image *img;
	unsigned long problems;
	int err;

	if (stp_cli_open(&check_cli, image, &img))
		return STP_EXIT_FAIL;
	problems = check_trailing_bytes(img, image);
	err = stp_image_check_all(img, print_problem, (void *)image, &n);
	problems += n.problems;
	if (err)
		stp_cli_problem(&check_cli, image, NULL, "check stopped: %s", stp_strerror(err));
	else if (problems)
		stp_cli_problem(&check_cli, image, NULL, "%lu problems found", problems);
	else
		print_summary(image, stp_image_sb(img), &n);
	stp_image_close(img);
	return err || problems ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = { STP_CLI_LONGOPTS, { 0 } };
	int opt, status;

	stp_cli_init(&check_cli, argv);
	while ((opt = getopt_long(argc, argv, STP_CLI_SHORTOPTS, longopts, NULL)) != -1)
		return stp_cli_other_option(&check_cli, opt);
	if ((status = stp_cli_operands(&check_cli, argc, 1, 1)))
		return status;
	return check_run(argv[optind]);
}
