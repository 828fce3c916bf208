/* SPDX-License-Identifier: MIT */
/* A URL's superblock and store, for the monitor (monurl.h). */
#include "monurl.h"

#include <stdlib.h>
#include <string.h>

#include "diskcache.h"
#include "fetcher.h"
#include "image.h"
#include "imgsrc.h"
#include "monlog.h"
#include "monchecks.h"
#include "monstate.h"
#include "mountopts.h"

/* A published image: its blocks' files in the store are handed to the fetcher
 * (store.h), unless -f or cache_size=0 say no store; the fetcher then serves. */
void stp_monurl_attach_store(struct stp_mon *m)
{
	const struct stp_mount_opts *o = m->o;
	char *dir = NULL;

	if (o->cache_size && !o->fake)
		dir = o->cache_dir ? strdup(o->cache_dir) : m->checks->cache_default_dir();
	if (dir)
		m->checks->store_attach(dir, o->cache_size, m->prog, m->h.fetcher.ctl[0], &m->sb,
					m->h.fetcher.blocks, stp_fetcher_file_max(&m->h.fetcher),
					m->h.fetcher.pid);
	free(dir);
	stp_fetcher_close_ctl(&m->h.fetcher);
}

int stp_monurl_open(struct stp_mon *m)
{
	const struct stp_mount_opts *o = m->o;
	struct stp_imgsrc *src = NULL;
	uint8_t raw[STP_SB_SIZE];
	struct stp_diskcache_id id = { o->image_path, raw, sizeof(raw), &m->sb, 0, "" };
	char *dir;
	int err = m->checks->remote_open(m->h.fetcher.chans, 1, m->h.fetcher.size,
				     stp_fetcher_silence_s(o->timeout_s),
				     stp_monlog_image(o), false, &src);
	if (!err)
		err = stp_image_read_superblock_src(src, &m->sb);
	if (!err)
		err = stp_imgsrc_read(src, raw, sizeof(raw), 0);
	stp_imgsrc_close(src);
	stp_monlog_unreadable(m->prog, m->o, err);
	/* -f checks, it leaves nothing behind; a published image has the store instead */
	if (err || !o->cache_size || o->fake || m->h.fetcher.blocks)
		return err;
	dir = o->cache_dir ? strdup(o->cache_dir) : m->checks->cache_default_dir();
	id.size = m->h.fetcher.size;
	id.validator = m->h.fetcher.validator;
	if (dir) /* sized by the checked superblock, not by what the fetcher says */
		m->checks->cache_open_file(dir, &id, o->cache_size, m->prog, &m->h.cache);
	free(dir);
	return 0;
}
