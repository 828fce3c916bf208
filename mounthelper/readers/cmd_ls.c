/* SPDX-License-Identifier: MIT */
/* `stipple ls`: list a directory of the image, or one entry, like ls -ln. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "image.h"
#include "util.h"

static const struct stp_cli ls_cli = {
	.name = "ls",
	.synopsis = "[-l] IMAGE [PATH]",
	.summary = "List directory PATH of IMAGE (default: the root), or the entry PATH itself.",
	.options = "  -l, --long     mode, links, uid, gid, size, mtime, name and link target\n",
};

struct ls_state {
	const struct stp_image *img;
	const char *image;
	int long_format;
	int failed;
};

static void print_time(int64_t sec)
{
	time_t t = (time_t)sec;
	struct tm tm;
	char buf[32];

	if (!localtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm))
		strcpy(buf, "?");
	printf(" %s", buf);
}

static void print_size_field(const struct stp_inode *inode)
{
	if (S_ISCHR(inode->mode) || S_ISBLK(inode->mode))
		printf(" %4u, %4u", stp_cli_rdev_major(inode), stp_cli_rdev_minor(inode));
	else
		printf(" %10" PRIu64, inode->size);
}

/* NAME is LEN bytes and may come straight from the image's metadata (no NUL). Names
 * and targets are escaped (stp_cli_put_escaped): the image chose their bytes. */
static void print_entry(struct ls_state *st, const char *name, size_t len,
			const struct stp_inode *inode)
{
	char mode[11];

	if (st->long_format) {
		stp_cli_mode_string(inode->mode, mode);
		printf("%s %3u %5u %5u", mode, inode->nlink, inode->uid, inode->gid);
		print_size_field(inode);
		print_time(inode->mtime_sec);
		putchar(' ');
	}
	stp_cli_put_escaped(stdout, name, len);
	if (st->long_format && S_ISLNK(inode->mode)) {
		char target[STP_LINK_MAX + 1];
		size_t tlen;
		int err = stp_image_readlink(st->img, inode, target, &tlen);

		fputs(" -> ", stdout);
		if (err) {
			fputs("?", stdout);
			st->failed = 1;
		} else {
			stp_cli_put_escaped(stdout, target, tlen);
		}
	}
	putchar('\n');
}

static void list_directory(struct ls_state *st, const char *path, const struct stp_inode *dir)
{
	for (uint32_t i = 0; i < dir->count; i++) {
		struct stp_dirent d;
		struct stp_inode inode;
		char name[STP_NAME_MAX + 1];
		int err = stp_image_dirent(st->img, dir, i, &d, name);

		if (!err)
			err = stp_image_inode(st->img, d.ino, &inode);
		if (err) {
			stp_cli_problem(&ls_cli, st->image, path, "entry %u: %s", i,
					stp_strerror(err));
			st->failed = 1;
			continue;
		}
		print_entry(st, name, d.name_len, &inode);
	}
}

static int ls_run(const char *image, const char *path, int long_format)
{
	struct ls_state st = { .image = image, .long_format = long_format };
	struct stp_image *img;
	struct stp_inode inode;
	uint32_t ino;
	int err;

	if (stp_cli_open(&ls_cli, image, &img))
		return STP_EXIT_FAIL;
	st.img = img;
	err = stp_cli_resolve(&ls_cli, img, path, &ino);
	if (!err) {
		err = stp_image_inode(img, ino, &inode);
		if (err)
			stp_cli_problem(&ls_cli, image, path, "%s", stp_strerror(err));
	}
	if (!err) {
		if (S_ISDIR(inode.mode))
			list_directory(&st, path, &inode);
		else
			print_entry(&st, path, strlen(path), &inode);
	}
	if (fflush(stdout) || ferror(stdout)) {
		stp_cli_error(&ls_cli, "writing to standard output: %s", stp_strerror(-errno));
		st.failed = 1;
	}
	stp_image_close(img);
	return err || st.failed ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_ls(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "long", no_argument, NULL, 'l' }, STP_CLI_LONGOPTS, { 0 },
	};
	int long_format = 0, opt, status;

	stp_cli_init(&ls_cli, argv);
	while ((opt = getopt_long(argc, argv, "l" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 'l')
			long_format = 1;
		else
			return stp_cli_other_option(&ls_cli, opt);
	}
	if ((status = stp_cli_operands(&ls_cli, argc, 1, 2)))
		return status;
	return ls_run(argv[optind], optind + 1 < argc ? argv[optind + 1] : "/", long_format);
}
