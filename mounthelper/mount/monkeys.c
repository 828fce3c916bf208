/* SPDX-License-Identifier: MIT */
/* verify='s keys, read by the monitor (monkeys.h), opened by monitor.c. */
#include "monkeys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "monchecks.h"
#include "monitor.h"
#include "monstate.h"
#include "mountopts.h"
#include "sign.h"
#include "trustkeys.h"

/* verify without a value: every *.pub of the trusted keys folder, in name order, each
 * opened beneath it. */
static int read_trusted_keys(struct stp_mon *m)
{
	int dirfd = stp_monitor_open_keys_dir();
	struct stp_trustkeys_names l;
	char shown[512];
	int err = stp_trustkeys_list(m->prog, dirfd, &l);

	if (!err && !(m->h.keys = calloc(l.n, sizeof(*m->h.keys))))
		err = -ENOMEM;
	for (unsigned i = 0; !err && i < l.n; i++) {
		int fd = stp_monitor_open_key(dirfd, l.names[i]->d_name);

		snprintf(shown, sizeof(shown), "%s/%s", STP_TRUSTED_KEYS_DIR, l.names[i]->d_name);
		err = m->checks->take_key(m->prog, fd, shown, &m->h.keys[i]);
		m->h.nkeys += !err;
	}
	stp_trustkeys_names_free(&l);
	if (dirfd >= 0)
		close(dirfd);
	return err;
}

/* verify's keys, read as the caller's own configuration before the image (trustkeys.h):
 * the file verify=PUBKEY names, or the trusted keys folder's. */
int stp_monkeys_read(struct stp_mon *m)
{
	int fd;

	if (!m->o->verify)
		return 0;
	if (!m->o->verify_key)
		return read_trusted_keys(m);
	m->h.keys = calloc(1, sizeof(*m->h.keys));
	if (!m->h.keys)
		return -ENOMEM;
	m->h.nkeys = 1;
	fd = stp_monitor_open_key(AT_FDCWD, m->o->verify_key);
	return m->checks->take_key(m->prog, fd, m->o->verify_key, m->h.keys);
}
