/* SPDX-License-Identifier: MIT */
/*
 * `stipple sign IMAGE SECKEY`: sign a built image without rebuilding it. The signed image
 * is the old one's bytes with a new superblock and a signature block at the end (an
 * already signed image loses its old signature block); it is written to a temporary
 * file beside IMAGE, synced, and renamed over IMAGE, whose directory is then synced, as
 * mkstipple writes. IMAGE is either the old image or the signed one, never half of each.
 * A symlink is written through: the file it leads to is signed, keeping its mode, and the
 * link stays.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "image.h"
#include "imgsrc.h"
#include "output.h"
#include "sign.h"
#include "util.h"

static const struct stp_cli sign_cli = {
	.name = "sign",
	.synopsis = "IMAGE SECKEY",
	.summary = "Sign IMAGE in place with the Ed25519 secret key SECKEY (stipple keygen),\n"
		   "replacing any signature it has.",
	.options = NULL,
};

/* Copies LEN bytes from IN to OUT, both at offset 0 onwards. */
static int copy_prefix(int in, int out, uint64_t len)
{
	loff_t ioff = 0, ooff = 0;
	static char buf[1 << 16];

	while ((uint64_t)ioff < len) {
		ssize_t n = copy_file_range(in, &ioff, out, &ooff, len - (uint64_t)ioff, 0);

		if (n > 0)
			continue;
		if (n == 0)
			return -EIO; /* the image shrank under us */
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
			return -errno;
		/* no in-kernel copy between these files: by hand */
		for (; (uint64_t)ioff < len; ioff += n) {
			size_t want = len - (uint64_t)ioff < sizeof(buf) ? len - (uint64_t)ioff : sizeof(buf);
			int err = stp_pread_full(in, buf, want, (uint64_t)ioff);

			if (!err)
				err = stp_pwrite_full(out, buf, want, (uint64_t)ioff);
			if (err)
				return err;
			n = (ssize_t)want;
		}
	}
	return 0;
}

/* Writes the signed image into FD. */
static int write_signed(const struct stp_image *img, const struct stp_seckey *key, int fd)
{
	uint8_t sb[STP_SB_SIZE], *block;
	uint64_t keep;
	size_t len;
	int err = stp_sign_image(img, key, sb, &block, &len, &keep);

	if (err)
		return err;
	err = copy_prefix(stp_image_fd(img), fd, keep);
	if (!err)
		err = stp_pwrite_full(fd, sb, sizeof(sb), 0);
	if (!err)
		err = stp_pwrite_full(fd, block, len, keep);
	free(block);
	return err;
}

/* The file the image was read from must be the one the output replaces: a symlink
 * changed in between would sign one file into another. */
static int same_file(const struct stat *read, const struct stp_output *out)
{
	return out->dest_exists && read->st_dev == out->dest.st_dev &&
	       read->st_ino == out->dest.st_ino;
}

static int sign_image_file(const char *image, const struct stp_image *img,
			   const struct stp_seckey *key)
{
	struct stp_output out;
	const char *step = NULL;
	struct stat st;
	int err;

	if (fstat(stp_image_fd(img), &st) || !S_ISREG(st.st_mode)) {
		stp_cli_problem(&sign_cli, image, NULL, "not a regular file");
		return -EINVAL;
	}
	/* IMAGE is a path, as for every reader: "-" is a file of that name */
	err = stp_output_open(strcmp(image, "-") ? image : "./-", &out, &step);
	if (!err && !same_file(&st, &out)) {
		out.refused = 1;
		step = "changed while it was read: not signed";
		err = -ESTALE;
	}
	if (!err) {
		err = write_signed(img, key, out.fd);
		if (err)
			step = "signing failed";
		else
			err = stp_output_commit(&out, stp_output_mode(&out), &step);
	}
	if (err && out.refused)
		stp_cli_problem(&sign_cli, image, NULL, "%s", step);
	else if (err)
		stp_cli_problem(&sign_cli, image, NULL, "%s: %s", step, stp_strerror(err));
	stp_output_abort(&out);
	return err;
}

static int sign_run(const char *image, const char *keyfile)
{
	struct stp_seckey *key;
	struct stp_pubkey pub;
	struct stp_image *img;
	char hex[65];
	struct stat st;
	int err = stp_sign_load_seckey(keyfile, &key);

	if (err) {
		stp_cli_error(&sign_cli, "%s: %s", keyfile, err == -EINVAL ?
			      "not an unencrypted Ed25519 secret key in PEM" : stp_strerror(err));
		return STP_EXIT_FAIL;
	}
	/* opening a FIFO would wait for a writer */
	if (!stp_imgsrc_is_url(image) && !stat(image, &st) && !S_ISREG(st.st_mode)) {
		stp_cli_problem(&sign_cli, image, NULL, "not a regular file");
		err = -EINVAL;
	} else if (!stp_cli_open(&sign_cli, image, &img)) {
		err = sign_image_file(image, img, key);
		stp_image_close(img);
	} else {
		err = -EUCLEAN;
	}
	stp_sign_seckey_pubkey(key, &pub);
	stp_sign_seckey_free(key);
	if (err)
		return STP_EXIT_FAIL;
	printf("%s: signed with key %s\n", image, stp_sign_key_hex(pub.id, hex));
	return STP_EXIT_OK;
}

int stp_cmd_sign(int argc, char **argv)
{
	static const struct option longopts[] = { STP_CLI_LONGOPTS, { 0 } };
	int opt, status;

	stp_cli_init(&sign_cli, argv);
	while ((opt = getopt_long(argc, argv, STP_CLI_SHORTOPTS, longopts, NULL)) != -1)
		return stp_cli_other_option(&sign_cli, opt);
	if ((status = stp_cli_operands(&sign_cli, argc, 2, 2)))
		return status;
	return sign_run(argv[optind], argv[optind + 1]);
}
