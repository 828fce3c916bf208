/* SPDX-License-Identifier: MIT */
/* verify's trusted keys folder and the signed bit, for the monitor (trustkeys.h); the
 * key files are parsed by monchecks.c. */
#include "trustkeys.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "monlog.h"
#include "mountopts.h"
#include "util.h"

/* verify: the most keys the monitor reads from the trusted folder. */
#define KEYS_MAX 64u

static int is_key_name(const struct dirent *e)
{
	size_t len = strlen(e->d_name);

	return e->d_name[0] != '.' && len > 4 && !strcmp(e->d_name + len - 4, ".pub");
}

int stp_trustkeys_list(const char *prog, int dirfd, struct stp_trustkeys_names *out)
{
	int n;

	*out = (struct stp_trustkeys_names){ 0 };
	if (dirfd < 0) {
		stp_monlog_say(prog, "verify: no trusted keys: %s: %s", STP_TRUSTED_KEYS_DIR,
		    stp_strerror(dirfd));
		return dirfd;
	}
	n = scandirat(dirfd, ".", &out->names, is_key_name, alphasort);
	if (n < 0) {
		stp_monlog_say(prog, "verify: %s: %s", STP_TRUSTED_KEYS_DIR, stp_strerror(-errno));
		return -errno;
	}
	out->n = (unsigned)n;
	if (n == 0 || (unsigned)n > KEYS_MAX) {
		stp_monlog_say(prog, "verify: %s holds %d keys (*.pub); it must hold 1 to %u",
		    STP_TRUSTED_KEYS_DIR, n, KEYS_MAX);
		return n ? -E2BIG : -ENOKEY;
	}
	return 0;
}

void stp_trustkeys_names_free(struct stp_trustkeys_names *l)
{
	for (unsigned i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	*l = (struct stp_trustkeys_names){ 0 };
}

int stp_trustkeys_check_signed(const struct stp_mount_opts *o, const struct stp_superblock *sb,
			       const char *prog)
{
	if (!o->verify || (sb->feat_compat & STP_FEAT_COMPAT_SIGNED))
		return 0;
	stp_monlog_say(prog, "%s: not signed, and verify= asks for a signature", stp_monlog_image(o));
	return -ENOKEY;
}
