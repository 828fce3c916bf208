/* SPDX-License-Identifier: MIT */
/*
 * `stipple verify IMAGE PUBKEY`: is IMAGE, every byte of it, what the holder of PUBKEY
 * signed? The verified open checks the signature over the superblock and the hashes,
 * then the metadata's and the dictionary's hashes; each block is then read and checked
 * against its hash (and decoded, so a signed but undecodable block is reported too).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "image.h"
#include "sign.h"

static const struct stp_cli verify_cli = {
	.name = "verify",
	.synopsis = "IMAGE PUBKEY",
	.summary = "Check that IMAGE is signed by the Ed25519 public key PUBKEY and that its\n"
		   "metadata, dictionary and every data block match the signed hashes.",
	.options = NULL,
};

/* Every block against its hash: the number that fail. */
static uint64_t verify_blocks(const struct stp_image *img, const char *image)
{
	uint64_t bad = 0, n = stp_image_sb(img)->block_count;
	void *buf = malloc(stp_image_block_buffer_size(img));

	if (!buf) {
		stp_cli_error(&verify_cli, "out of memory");
		return 1;
	}
	for (uint64_t b = 0; b < n; b++) {
		int err = stp_image_decode_block(img, b, buf);

		if (err) {
			stp_cli_problem(&verify_cli, image, NULL, "data block %" PRIu64 ": %s", b,
					stp_strerror(err));
			bad++;
		}
	}
	free(buf);
	return bad;
}

static int verify_run(const char *image, const char *keyfile)
{
	struct stp_pubkey key;
	struct stp_image *img;
	uint64_t bad;
	char hex[65];

	if (stp_cli_load_pubkey(&verify_cli, keyfile, &key) ||
	    stp_cli_open_verified(&verify_cli, image, &key, &img))
		return STP_EXIT_FAIL;
	bad = verify_blocks(img, image);
	if (bad)
		stp_cli_problem(&verify_cli, image, NULL, "%" PRIu64 " of %" PRIu64
				" blocks do not match the signature", bad,
				stp_image_sb(img)->block_count);
	else
		printf("%s: OK: signed by key %s; metadata, dictionary and %" PRIu64
		       " blocks match\n", image, stp_sign_key_hex(key.id, hex),
		       stp_image_sb(img)->block_count);
	stp_image_close(img);
	return bad ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_verify(int argc, char **argv)
{
	static const struct option longopts[] = { STP_CLI_LONGOPTS, { 0 } };
	int opt, status;

	stp_cli_init(&verify_cli, argv);
	while ((opt = getopt_long(argc, argv, STP_CLI_SHORTOPTS, longopts, NULL)) != -1)
		return stp_cli_other_option(&verify_cli, opt);
	if ((status = stp_cli_operands(&verify_cli, argc, 2, 2)))
		return status;
	return verify_run(argv[optind], argv[optind + 1]);
}
