/* SPDX-License-Identifier: MIT */
/* verify's public keys, read by the monitor (trustkeys.h). */
#include "trustkeys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "monlog.h"
#include "mountopts.h"
#include "sign.h"
#include "util.h"

/* verify: what the monitor reads of trusted configuration, at most. */
#define KEY_FILE_MAX (64u << 10)
#define KEYS_MAX 64u

/* One public key file, NAME at DIRFD (SHOWN in messages): a regular file of at most
 * KEY_FILE_MAX bytes, reached without following a symbolic link, holding a PEM Ed25519
 * public key. */
static int read_key(const char *prog, int dirfd, const char *name, const char *shown,
		    struct stp_pubkey *key)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
	char *text = NULL;
	struct stat st;
	ssize_t n = -1;
	int err;

	if (fd < 0) {
		err = -errno;
		stp_monlog_say(prog, "public key %s: %s", shown,
			err == -ELOOP ? "a symbolic link (refused)" : stp_strerror(err));
		return err;
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

static int is_key_name(const struct dirent *e)
{
	size_t len = strlen(e->d_name);

	return e->d_name[0] != '.' && len > 4 && !strcmp(e->d_name + len - 4, ".pub");
}

/* verify without a value: every *.pub of STP_TRUSTED_KEYS_DIR, in name order. */
static int read_trusted_keys(const char *prog, struct stp_pubkey **keys, unsigned *nkeys)
{
	int dirfd = open(STP_TRUSTED_KEYS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0, n;
	struct dirent **names = NULL;
	char shown[512];

	if (dirfd < 0) {
		err = -errno;
		stp_monlog_say(prog, "verify: no trusted keys: %s: %s", STP_TRUSTED_KEYS_DIR,
		    stp_strerror(err));
		return err;
	}
	n = scandirat(dirfd, ".", &names, is_key_name, alphasort);
	if (n < 0) {
		err = -errno;
		stp_monlog_say(prog, "verify: %s: %s", STP_TRUSTED_KEYS_DIR,
			stp_strerror(err));
	} else if (n == 0 || (unsigned)n > KEYS_MAX) {
		stp_monlog_say(prog, "verify: %s holds %d keys (*.pub); it must hold 1 to %u",
		    STP_TRUSTED_KEYS_DIR, n, KEYS_MAX);
		err = n ? -E2BIG : -ENOKEY;
	} else if (!(*keys = calloc((size_t)n, sizeof(**keys)))) {
		err = -ENOMEM;
	}
	for (int i = 0; !err && i < n; i++) {
		snprintf(shown, sizeof(shown), "%s/%s", STP_TRUSTED_KEYS_DIR, names[i]->d_name);
		err = read_key(prog, dirfd, names[i]->d_name, shown, &(*keys)[*nkeys]);
		*nkeys += !err;
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	close(dirfd);
	return err;
}

int stp_trustkeys_read(const struct stp_mount_opts *o, const char *prog,
		       struct stp_pubkey **keys, unsigned *nkeys)
{
	*keys = NULL;
	*nkeys = 0;
	if (!o->verify)
		return 0;
	if (!o->verify_key)
		return read_trusted_keys(prog, keys, nkeys);
	*keys = calloc(1, sizeof(**keys));
	if (!*keys)
		return -ENOMEM;
	*nkeys = 1;
	return read_key(prog, AT_FDCWD, o->verify_key, o->verify_key, *keys);
}

int stp_trustkeys_check_signed(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			       const char *prog)
{
	if (!o->verify || (sb->feat_compat & STP_FEAT_COMPAT_SIGNED))
		return 0;
	stp_monlog_say(prog, "%s: not signed, and verify= asks for a signature", stp_monlog_image(o));
	return -ENOKEY;
}
