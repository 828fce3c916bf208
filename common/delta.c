/* SPDX-License-Identifier: MIT */
/* Delta blocks: zstd frames with a reference prefix (delta.h). */
#include "delta.h"

#include <errno.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "format.h"

/* The window log that covers LEN bytes: the prefix and the content, as zstd needs to
 * reach back over both (at least zstd's least, at most STP_DELTA_WINDOW_LOG_MAX). */
static int window_log(size_t len)
{
	int log = 10; /* ZSTD_WINDOWLOG_ABSOLUTEMIN */

	while (log < STP_DELTA_WINDOW_LOG_MAX && ((size_t)1 << log) < len)
		log++;
	return log;
}

/* A one-shot decode of exactly one frame of SRC into DST (at most CAP bytes), the
 * window bounded by LOG: the decoded length, or an errno. */
static int decode_frame(ZSTD_DCtx *dc, const void *src, size_t len, void *dst, size_t cap,
			int log, size_t *outlen)
{
	size_t n;

	if (!stp_delta_one_frame(src, len))
		return -EUCLEAN; /* no trailing bytes taken in */
	if (ZSTD_isError(ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, log)))
		return -EUCLEAN;
	n = ZSTD_decompressDCtx(dc, dst, cap, src, len);
	if (ZSTD_isError(n))
		return -EUCLEAN;
	*outlen = n;
	return 0;
}

bool stp_delta_one_frame(const void *stored, size_t len)
{
	const uint8_t *p = stored;
	size_t frame = ZSTD_findFrameCompressedSize(stored, len);

	/* a data frame, not a skippable one, which the size alone would pass */
	return !ZSTD_isError(frame) && frame == len && len >= 4 &&
	       stp_le32(p) == ZSTD_MAGICNUMBER;
}

int stp_delta_content(const void *stored, size_t len, void *out, size_t cap, size_t *outlen)
{
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	int err;

	if (!dc)
		return -ENOMEM;
	/* a frame that names a dictionary fails here: none is loaded */
	err = decode_frame(dc, stored, len, out, cap, window_log(cap), outlen);
	ZSTD_freeDCtx(dc);
	return err;
}

/* The parameters every delta is made with. */
static int delta_params(ZSTD_CCtx *cc, int level, size_t total)
{
	size_t r = ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);

	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, window_log(total));
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cc, ZSTD_c_enableLongDistanceMatching, 1);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0); /* the caller hashes */
	return ZSTD_isError(r) ? -EINVAL : 0;
}

int stp_delta_make(const void *content, size_t len, const void *prefix, size_t plen, int level,
		   void *out, size_t cap, size_t *outlen)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	size_t n;
	int err;

	if (!cc)
		return -ENOMEM;
	err = delta_params(cc, level, plen + len);
	if (!err && ZSTD_isError(ZSTD_CCtx_refPrefix(cc, prefix, plen)))
		err = -EINVAL;
	if (!err) {
		n = ZSTD_compress2(cc, out, cap, content, len);
		if (ZSTD_isError(n))
			err = ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall ? -ENOSPC : -EINVAL;
		else
			*outlen = n;
	}
	ZSTD_freeCCtx(cc);
	return err;
}

int stp_delta_apply(const void *delta, size_t dlen, const void *prefix, size_t plen,
		    void *out, size_t want)
{
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	size_t got = 0;
	int err;

	if (!dc)
		return -ENOMEM;
	err = ZSTD_isError(ZSTD_DCtx_refPrefix(dc, prefix, plen)) ? -ENOMEM : 0;
	if (!err)
		err = decode_frame(dc, delta, dlen, out, want, window_log(plen + want), &got);
	ZSTD_freeDCtx(dc);
	return !err && got != want ? -EUCLEAN : err;
}
