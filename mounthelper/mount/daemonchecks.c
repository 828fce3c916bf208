/* SPDX-License-Identifier: MIT */
/* What the daemon needs libcrypto for (daemonchecks.h): a URL's disk cache, a signed
 * image's check. */
#include "daemonchecks.h"

#include <errno.h>
#include <string.h>

#include "diskcache.h"
#include "fetcher.h"
#include "image.h"
#include "imgsrc.h"
#include "mountopts.h"
#include "remote.h"
#include "sign.h"
#include "util.h"

/* verify: the key the signature block names, among the monitor's. A key of another
 * publisher is refused here, naming both ids; the library checks the signature. */
static int pick_key(struct stp_daemon *d, const struct stp_daemon_fds *fds,
		    struct stp_imgsrc *src, const struct stp_pubkey **key)
{
	const struct stp_mount_opts *o = stp_daemon_opts(d);
	uint8_t raw[STP_SIG_HDR_SIZE];
	struct stp_superblock sb;
	struct stp_sighdr h;
	char have[65], want[65];
	int err = stp_image_read_superblock_src(src, &sb);

	if (!err && !(sb.feat_compat & STP_FEAT_COMPAT_SIGNED))
		return stp_daemon_fail(d, -ENOKEY, "%s: not signed, and verify= asks for a signature", o->image);
	if (!err)
		err = stp_imgsrc_read(src, raw, sizeof(raw), sb.sig_offset);
	if (!err)
		err = stp_sighdr_decode(raw, &sb, &h);
	if (err)
		return stp_daemon_fail(d, err, "%s: signature block: %s", o->image, stp_strerror(err));
	for (unsigned i = 0; i < fds->nkeys; i++)
		if (!memcmp(fds->keys[i].id, h.key_id, sizeof(h.key_id))) {
			*key = &fds->keys[i];
			return 0;
		}
	stp_sign_key_hex(h.key_id, have);
	if (o->verify_key)
		return stp_daemon_fail(d, -EKEYREJECTED, "%s: signed by key %s, not by the key of %s (%s)",
			    o->image, have, o->verify_key, stp_sign_key_hex(fds->keys[0].id, want));
	return stp_daemon_fail(d, -EKEYREJECTED, "%s: signed by key %s, which is none of the %u trusted keys in %s",
		    o->image, have, fds->nkeys, STP_TRUSTED_KEYS_DIR);
}

/* The signature is checked over the superblock and the hashes before the metadata or the
 * dictionary is parsed; from then on the library checks every block as it decodes it. */
static int open_verified_src(struct stp_daemon *d, const struct stp_daemon_fds *fds,
			 struct stp_imgsrc *src, struct stp_image **img)
{
	const char *image = stp_daemon_opts(d)->image;
	const struct stp_pubkey *key = NULL;
	char id[65];
	int err = pick_key(d, fds, src, &key);

	if (err) {
		stp_imgsrc_close(src);
		return err;
	}
	err = stp_image_open_src_verified(src, key, img);
	if (err == -EKEYREJECTED)
		return stp_daemon_fail(d, err, "%s: bad signature: the image is not the one key %s signed",
			    image, stp_sign_key_hex(key->id, id));
	if (err == -ENOKEY)
		return stp_daemon_fail(d, err, "%s: not signed, and verify= asks for a signature", image);
	if (err == -EUCLEAN)
		return stp_daemon_fail(d, err, "%s: damaged, or changed since it was signed", image);
	return err ? stp_daemon_open_failed(d, err) : 0;
}

static int expect_range(void *ctx, uint64_t off, uint64_t len, uint64_t sum)
{
	return stp_diskcache_expect(ctx, off, len, sum);
}

/* Paged metadata: the pages, each with its checksum, so that those the open reads come
 * from the cache too. A table that does not match is left for the open to report. */
static int expect_pages(struct stp_diskcache *c, struct stp_imgsrc *src,
			const struct stp_superblock *sb)
{
	int err = stp_image_page_ranges(src, sb, expect_range, c);

	return err == -EUCLEAN ? 0 : err;
}

/* A URL's disk cache checks what the superblock vouches for (the metadata and the
 * dictionary) before the open reads them; the blocks, once the table is known. */
static int expect_superblock(struct stp_diskcache *c, struct stp_imgsrc *src)
{
	struct stp_superblock sb;
	int err = stp_image_read_superblock_src(src, &sb);

	if (!err)
		err = stp_diskcache_expect(c, sb.meta_offset, sb.meta_stored_size, sb.meta_checksum);
	if (!err)
		err = stp_diskcache_expect(c, sb.dict_offset, sb.dict_size, sb.dict_checksum);
	if (!err)
		err = expect_pages(c, src, &sb);
	stp_diskcache_ready(c);
	return err;
}

static void expect_blocks(struct stp_diskcache *c, const struct stp_image *img)
{
	struct stp_blockent be;

	for (uint64_t b = 0; b < stp_image_sb(img)->block_count; b++)
		if (stp_image_block(img, b, &be) ||
		    stp_diskcache_expect(c, be.offset, be.stored_size, be.checksum))
			break;
	stp_diskcache_ready(c);
}

/* A URL's source: the fetcher's channels, with the disk cache when the monitor could
 * open it (without it when it cannot be used). */
static int open_url(struct stp_daemon *d, const struct stp_daemon_fds *fds,
		    struct stp_imgsrc **src, struct stp_diskcache **cache)
{
	const struct stp_mount_opts *o = stp_daemon_opts(d);
	int err = stp_remote_open(fds->chans, fds->nchans, fds->url_size,
				  stp_fetcher_silence_s(o->timeout_s),
				  o->image_path, true, src);

	if (err || fds->cache.fd < 0)
		return err;
	if (stp_diskcache_new(&fds->cache, o->cache_size, cache))
		return 0;
	if (expect_superblock(*cache, *src)) {
		stp_diskcache_free(*cache);
		*cache = NULL;
		return 0;
	}
	stp_remote_set_cache(*src, *cache);
	return 0;
}

static void halt_url(void *src)
{
	stp_remote_halt(src);
}

const struct stp_daemon_checks stp_daemon_checks = {
	.init = stp_sign_init,
	.open_url = open_url,
	.open_verified = open_verified_src,
	.expect_blocks = expect_blocks,
	.halt_url = halt_url,
};
