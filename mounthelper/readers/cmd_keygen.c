/* SPDX-License-Identifier: MIT */
/*
 * `stipple keygen SECKEY PUBKEY`: a new Ed25519 key pair, in the PEM files OpenSSL's own
 * tools read and write (sign.h). Each file is written to a temporary file beside it
 * (mkostemp: mode 0600 from the start, so the secret key is never readable by others),
 * synced, and put in place with link(), which fails when the name exists: an existing
 * key is never overwritten, unless --force, which renames over it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "cli.h"
#include "commands.h"
#include "sign.h"
#include "util.h"

static const struct stp_cli keygen_cli = {
	.name = "keygen",
	.synopsis = "[--force] SECKEY PUBKEY",
	.summary = "Make a new Ed25519 key pair: the secret key SECKEY (PKCS#8 PEM, mode 0600)\n"
		   "signs images, the public key PUBKEY (PEM) verifies them.",
	.options = "  -f, --force   replace SECKEY and PUBKEY if they exist\n",
};

/* Writes LEN bytes of TEXT to a new file PATH with MODE (see the top of the file). */
static int write_key_file(const char *path, const char *text, size_t len, mode_t mode,
			  int force)
{
	char *temp;
	int fd, err = 0;

	if (asprintf(&temp, "%s.tmp.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(temp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(temp);
		return err;
	}
	err = stp_pwrite_full(fd, text, len, 0);
	if (!err && (fchmod(fd, mode) || fsync(fd)))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && (force ? rename(temp, path) : link(temp, path)))
		err = -errno;
	if (err || !force)
		unlink(temp);
	free(temp);
	return err;
}

static int write_pair(const struct stp_seckey *key, const char *sec, const char *pub,
		      int force)
{
	mode_t mask = umask(0);
	char *sec_pem = NULL, *pub_pem = NULL;
	size_t sec_len, pub_len;
	int err;

	umask(mask);
	err = stp_sign_seckey_pem(key, &sec_pem, &sec_len);
	if (!err)
		err = stp_sign_pubkey_pem(key, &pub_pem, &pub_len);
	if (err) {
		stp_cli_error(&keygen_cli, "encoding the key: %s", stp_strerror(err));
	} else if ((err = write_key_file(sec, sec_pem, sec_len, 0600, force))) {
		stp_cli_error(&keygen_cli, "%s: %s%s", sec, stp_strerror(err),
			      err == -EEXIST ? " (--force replaces it)" : "");
	} else if ((err = write_key_file(pub, pub_pem, pub_len, 0644 & ~mask, force))) {
		stp_cli_error(&keygen_cli, "%s: %s%s", pub, stp_strerror(err),
			      err == -EEXIST ? " (--force replaces it)" : "");
		unlink(sec); /* no secret key without its public half */
	}
	if (sec_pem)
		OPENSSL_cleanse(sec_pem, sec_len);
	free(sec_pem);
	free(pub_pem);
	return err;
}

static int keygen_run(const char *sec, const char *pub, int force)
{
	struct stp_seckey *key;
	struct stp_pubkey pk;
	char hex[65];
	int err;

	if (!strcmp(sec, pub)) {
		stp_cli_error(&keygen_cli, "SECKEY and PUBKEY are the same file");
		return STP_EXIT_USAGE;
	}
	/* refuse before writing anything: the secret key is not left without its pair */
	if (!force && (!access(sec, F_OK) || !access(pub, F_OK))) {
		stp_cli_error(&keygen_cli, "%s: exists (--force replaces it)",
			      !access(sec, F_OK) ? sec : pub);
		return STP_EXIT_FAIL;
	}
	if ((err = stp_sign_keygen(&key))) {
		stp_cli_error(&keygen_cli, "making a key: %s", stp_strerror(err));
		return STP_EXIT_FAIL;
	}
	err = write_pair(key, sec, pub, force);
	stp_sign_seckey_pubkey(key, &pk);
	stp_sign_seckey_free(key);
	if (err)
		return STP_EXIT_FAIL;
	printf("key %s\n", stp_sign_key_hex(pk.id, hex));
	return STP_EXIT_OK;
}

int stp_cmd_keygen(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "force", no_argument, NULL, 'f' }, STP_CLI_LONGOPTS, { 0 },
	};
	int force = 0, opt, status;

	stp_cli_init(&keygen_cli, argv);
	while ((opt = getopt_long(argc, argv, "f" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 'f')
			force = 1;
		else
			return stp_cli_other_option(&keygen_cli, opt);
	}
	if ((status = stp_cli_operands(&keygen_cli, argc, 2, 2)))
		return status;
	return keygen_run(argv[optind], argv[optind + 1], force);
}
