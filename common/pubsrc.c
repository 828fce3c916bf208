/* SPDX-License-Identifier: MIT */
/* A published image as an image source (pubsrc.h). */
#include "pubsrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "imgsrc.h"
#include "log.h"
#include "published.h"

struct pub_src {
	struct stp_imgsrc src;
	struct stp_http *h;
	struct stp_published *pub;
};

/* Part by part: the superblock copy and the tail from memory, each block checked whole. */
static int pub_pread(struct stp_imgsrc *s, void *buf, size_t len, uint64_t off)
{
	struct pub_src *ps = (struct pub_src *)s;
	char why[512];

	if (off > s->size || len > s->size - off)
		return STP_IMGSRC_END;
	for (size_t done = 0; done < len;) {
		struct stp_published_part part;
		int err = stp_published_get(ps->pub, off + done, len - done, NULL, &part, why,
					    sizeof(why));

		if (err) {
			if (err == STP_IMGSRC_END)
				return err;
			stp_log(STP_LOG_ERR, "%s: %s", s->name, why);
			return -EIO;
		}
		memcpy((char *)buf + done, part.ptr, part.len);
		done += part.len;
		stp_published_put(ps->pub, &part);
	}
	return 0;
}

static void pub_close(struct stp_imgsrc *s)
{
	struct pub_src *ps = (struct pub_src *)s;

	stp_published_free(ps->pub);
	stp_http_close(ps->h);
	free(s->name);
	free(ps);
}

int stp_pubsrc_open(const char *url, const struct stp_http_opts *o, struct stp_imgsrc **out)
{
	struct stp_published *pub = NULL;
	struct pub_src *ps;
	struct stp_http *h;
	char why[512];
	int err = stp_http_open_logged(url, o, &h);

	if (err)
		return err;
	err = stp_published_open(h, url, url, &pub, why, sizeof(why));
	if (err) {
		stp_log(STP_LOG_ERR, "%s: %s", url, why);
		stp_http_close(h);
		return err;
	}
	if (!pub)
		return stp_http_src_wrap(h, url, out);
	ps = calloc(1, sizeof(*ps));
	if (!ps || !(ps->src.name = strdup(url))) {
		free(ps);
		stp_published_free(pub);
		stp_http_close(h);
		return -ENOMEM;
	}
	ps->h = h;
	ps->pub = pub;
	ps->src.pread = pub_pread;
	ps->src.close = pub_close;
	ps->src.size = stp_published_size(pub);
	ps->src.fd = -1;
	*out = &ps->src;
	return 0;
}
