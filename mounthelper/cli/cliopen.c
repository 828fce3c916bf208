/* SPDX-License-Identifier: MIT */
/* Opening an image for a reader (cli.h): a file, or a URL through the opener, checked or
 * verified. Apart from cli.c so that a program that only parses its command line (`stipple
 * mount`) links none of it, nor libcrypto with it. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "foreign.h"
#include "httpurl.h"
#include "image.h"
#include "imgsrc.h"
#include "netrc.h"
#include "progress.h"
#include "sign.h"
#include "util.h"

/* A reader's bound on one read of a URL, retries included, without STIPPLE_TIMEOUT. */
#define READER_TIMEOUT_S 20u

static stp_cli_url_opener url_opener;

void stp_cli_set_url_opener(stp_cli_url_opener open)
{
	url_opener = open;
}

/* A URL is read through stipple-fetcher (the opener), never in this process: proxies
 * come from the environment, the CA store is the system's (STIPPLE_CA names another
 * bundle), STIPPLE_TIMEOUT bounds each read in seconds, and STIPPLE_NETRC names a netrc
 * file with the server's login, checked here so that a bad one is named as the variable:
 * credentials in the URL, which every local user can read on the command line, are
 * refused. */
static int open_url(const struct stp_cli *cli, const char *url, struct stp_imgsrc **src,
		    bool *said)
{
	const char *t = getenv("STIPPLE_TIMEOUT"), *netrc = getenv("STIPPLE_NETRC");
	struct stp_cli_url u = { url, getenv("STIPPLE_CA"), netrc && *netrc ? netrc : NULL,
				 READER_TIMEOUT_S };
	uint64_t secs;
	size_t len;
	char *text;
	int err;

	*said = true; /* whatever fails here says why */
	if (stp_http_url_has_userinfo(url)) {
		char *shown = stp_http_url_public(url);

		stp_cli_error(cli, "%s: a URL with a user name or password is refused (every "
			      "local user could read it); put the credentials in a netrc file "
			      "and name it in STIPPLE_NETRC", shown ? shown : "the URL");
		free(shown);
		return -EINVAL;
	}
	if (u.netrc_file && (err = stp_netrc_load(u.netrc_file, &text, &len))) {
		stp_cli_error(cli, "STIPPLE_NETRC=%s: %s", netrc, err == -EINVAL ?
			      "not a readable file of at most 64 KiB" : stp_strerror(err));
		return err;
	}
	if (u.netrc_file)
		stp_netrc_discard(text, len);
	if (u.ca_file && access(u.ca_file, R_OK)) { /* named as the variable, not as ca= */
		err = -errno;
		stp_cli_error(cli, "STIPPLE_CA=%s: %s", u.ca_file, stp_strerror(err));
		return err;
	}
	if (t && !stp_parse_uint(t, 1, 3600, &secs))
		u.timeout_s = (unsigned)secs;
	if (!url_opener) {
		stp_cli_problem(cli, url, NULL, "cannot open: this program reads no URL");
		return -EPROTONOSUPPORT;
	}
	err = url_opener(cli, &u, src);
	*said = err != 0;
	return err;
}

bool stp_cli_foreign(const struct stp_cli *cli, const char *image)
{
	char msg[512];

	if (stp_imgsrc_is_url(image) || !stp_foreign_describe(image, msg, sizeof(msg)))
		return false;
	stp_cli_problem(cli, image, NULL, "%s", msg);
	return true;
}

/* What every open by a command is followed by: a command walks the metadata soon. */
static void opened(struct stp_image *img)
{
	stp_image_read_meta_ahead(img);
	stp_progress_attach(img);
}

int stp_cli_open(const struct stp_cli *cli, const char *image, struct stp_image **out)
{
	unsigned long told = stp_cli_damage_reports();
	struct stp_imgsrc *src;
	bool said = false;
	int err;

	if (stp_cli_foreign(cli, image))
		return -EINVAL;
	if (stp_imgsrc_is_url(image))
		err = open_url(cli, image, &src, &said) ?: stp_image_open_src(src, out);
	else
		err = stp_image_open(image, out);

	/* the library's damage report named the image and the cause: one line is enough */
	said |= err == -EUCLEAN && stp_cli_damage_reports() != told;
	if (err && !said)
		stp_cli_problem(cli, image, NULL, "cannot open: %s", stp_strerror(err));
	if (!err)
		opened(*out);
	return err;
}

/* What a failed verified open means, beyond what the library logged. */
static const char *verify_error(int err)
{
	switch (err) {
	case -ENOKEY: return "the image is not signed";
	case -EKEYREJECTED: return "the signature is not valid for this key";
	default: return stp_strerror(err);
	}
}

int stp_cli_open_verified(const struct stp_cli *cli, const char *image,
			  const struct stp_pubkey *key, struct stp_image **out)
{
	unsigned long told = stp_cli_damage_reports();
	struct stp_imgsrc *src;
	bool said = false;
	int fd, err;

	if (stp_cli_foreign(cli, image))
		return -EINVAL;
	if (stp_imgsrc_is_url(image)) {
		err = open_url(cli, image, &src, &said) ?:
		      stp_image_open_src_verified(src, key, out);
		said |= err == -EUCLEAN && stp_cli_damage_reports() != told;
		if (err && !said && err != -ENOKEY && err != -EKEYREJECTED)
			stp_cli_problem(cli, image, NULL, "cannot open: %s", verify_error(err));
		if (!err)
			opened(*out);
		return err;
	}
	fd = stp_open_if(image, O_RDONLY, stp_node_is_image); /* no device's open (util.h) */
	if (fd < 0) {
		stp_cli_problem(cli, image, NULL, "cannot open: %s",
				fd == -EINVAL ? "not a regular file" : stp_strerror(fd));
		return fd;
	}
	err = stp_image_open_verified(fd, image, key, out);
	/* the library named the image and the keys for these two, and told the damage */
	said = err == -EUCLEAN && stp_cli_damage_reports() != told;
	if (err && !said && err != -ENOKEY && err != -EKEYREJECTED)
		stp_cli_problem(cli, image, NULL, "cannot open: %s", verify_error(err));
	if (!err)
		opened(*out);
	return err;
}

int stp_cli_open_checked(const struct stp_cli *cli, const char *image,
			 const struct stp_pubkey *key, struct stp_image **img)
{
	struct stp_superblock sb;
	unsigned long told;
	int fd, err;

	if (key || stp_cli_foreign(cli, image))
		return key ? stp_cli_open_verified(cli, image, key, img) : -EINVAL;
	fd = stp_open_if(image, O_RDONLY, stp_node_is_image);
	if (fd < 0)
		return stp_cli_open(cli, image, img); /* says why */
	told = stp_cli_damage_reports();
	err = stp_image_read_superblock(fd, image, &sb);
	close(fd);
	if (err) { /* reported by the library: opening again would say it twice */
		if (err != -EUCLEAN || stp_cli_damage_reports() == told)
			stp_cli_problem(cli, image, NULL, "cannot open: %s",
					stp_strerror(err));
		return err;
	}
	if (sb.feat_compat & STP_FEAT_COMPAT_SIGNED)
		return stp_cli_open_verified(cli, image, NULL, img);
	return stp_cli_open(cli, image, img);
}

int stp_cli_load_pubkey(const struct stp_cli *cli, const char *path, struct stp_pubkey *key)
{
	int err = stp_sign_load_pubkey(path, key);

	if (err == -EINVAL)
		stp_cli_error(cli, "%s: not an Ed25519 public key in PEM", path);
	else if (err)
		stp_cli_error(cli, "%s: %s", path, stp_strerror(err));
	return err;
}

int stp_cli_resolve(const struct stp_cli *cli, const struct stp_image *img, const char *path,
		    uint32_t *ino)
{
	int err = stp_image_resolve(img, path, ino);

	if (err)
		stp_cli_problem(cli, stp_image_path(img), path, "%s",
				err == -ENOTDIR ? "a component is not a directory"
						: stp_strerror(err));
	return err;
}
