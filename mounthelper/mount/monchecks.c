/* SPDX-License-Identifier: MIT */
/* What the monitor needs libcrypto for (monchecks.h): verify='s key files, and a URL's
 * modules, each named in the table. */
#include "monchecks.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachedir.h"
#include "diskcache.h"
#include "monlog.h"
#include "remote.h"
#include "sign.h"
#include "store.h"
#include "util.h"

/* verify: what the monitor reads of a key file, at most. */
#define KEY_FILE_MAX (64u << 10)

static int take_key(const char *prog, int fd, const char *shown, struct stp_pubkey *key)
{
	char *text = NULL;
	struct stat st;
	ssize_t n = -1;
	int err;

	if (fd < 0) {
		stp_monlog_say(prog, "public key %s: %s", shown,
			fd == -ELOOP ? "a symbolic link (refused)" : stp_strerror(fd));
		return fd;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > KEY_FILE_MAX) {
		stp_monlog_say(prog, "public key %s: not a regular file of at most %u KiB", shown,
		    KEY_FILE_MAX >> 10);
		close(fd);
		return -EINVAL;
	}
	text = malloc(KEY_FILE_MAX);
	if (text)
		n = read(fd, text, KEY_FILE_MAX);
	err = n < 0 ? (text ? -errno : -ENOMEM) : stp_sign_parse_pubkey(text, (size_t)n, key);
	if (err == -EINVAL)
		stp_monlog_say(prog, "public key %s: not a PEM Ed25519 public key (BEGIN PUBLIC KEY)", shown);
	else if (err)
		stp_monlog_say(prog, "public key %s: %s", shown, stp_strerror(err));
	free(text);
	close(fd);
	return err;
}

const struct stp_monitor_checks stp_monitor_checks = {
	.take_key = take_key,
	.remote_open = stp_remote_open,
	.cache_default_dir = stp_diskcache_default_dir,
	.cache_open_file = stp_cachedir_open_file,
	.store_attach = stp_store_attach,
};
