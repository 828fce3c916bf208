/* SPDX-License-Identifier: MIT */
/* `stipple cat`: write one regular file of the image to standard output. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "util.h"
#include "commands.h"
#include "fileread.h"
#include "image.h"

static const struct stp_cli cat_cli = {
	.name = "cat",
	.synopsis = "IMAGE PATH",
	.summary = "Write the bytes of regular file PATH of IMAGE to standard output.",
	.options = NULL,
};

#define CAT_CHUNK (1u << 20)

/* Copies the file's bytes to standard output; prints what failed. */
static int copy_file(const struct stp_image *img, const char *path, const struct stp_inode *inode)
{
	struct stp_cache *cache = NULL;
	char *buf = malloc(CAT_CHUNK);
	uint64_t off = 0;
	int err = buf ? stp_cache_new(img, 2, 1, &cache) : -ENOMEM;

	while (!err && off < inode->size) {
		ssize_t n = stp_file_read(img, cache, inode, off, CAT_CHUNK, buf);

		if (n <= 0) {
			err = n < 0 ? (int)n : -EIO;
			stp_cli_problem(&cat_cli, stp_image_path(img), path,
					"cannot read at offset %" PRIu64 ": %s", off,
					stp_strerror(err));
			break;
		}
		err = stp_write_full(STDOUT_FILENO, buf, (size_t)n);
		if (err)
			stp_cli_error(&cat_cli, "writing to standard output: %s",
				      stp_strerror(err));
		off += (uint64_t)n;
	}
	if (err == -ENOMEM)
		stp_cli_error(&cat_cli, "out of memory");
	if (cache)
		stp_cache_free(cache);
	free(buf);
	return err;
}

static const char *not_regular_reason(uint32_t mode)
{
	if (S_ISDIR(mode))
		return "is a directory";
	if (S_ISLNK(mode))
		return "is a symbolic link (give the path of its target)";
	return "is not a regular file";
}

static int cat_run(const char *image, const char *path)
{
	struct stp_image *img;
	struct stp_inode inode;
	uint32_t ino;
	int err;

	if (stp_cli_open(&cat_cli, image, &img))
		return STP_EXIT_FAIL;
	err = stp_cli_resolve(&cat_cli, img, path, &ino);
	if (err)
		goto out;
	err = stp_image_inode(img, ino, &inode);
	if (err) {
		stp_cli_problem(&cat_cli, image, path, "%s", stp_strerror(err));
		goto out;
	}
	if (!S_ISREG(inode.mode)) {
		stp_cli_problem(&cat_cli, image, path, "%s", not_regular_reason(inode.mode));
		err = -EISDIR;
		goto out;
	}
	err = copy_file(img, path, &inode);
out:
	stp_image_close(img);
	return err ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_cat(int argc, char **argv)
{
	static const struct option longopts[] = { STP_CLI_LONGOPTS, { 0 } };
	int opt, status;

	stp_cli_init(&cat_cli, argv);
	while ((opt = getopt_long(argc, argv, STP_CLI_SHORTOPTS, longopts, NULL)) != -1)
		return stp_cli_other_option(&cat_cli, opt);
	if ((status = stp_cli_operands(&cat_cli, argc, 2, 2)))
		return status;
	return cat_run(argv[optind], argv[optind + 1]);
}
