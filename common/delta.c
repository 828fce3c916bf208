/* SPDX-License-Identifier: MIT */
/* Delta blocks: zstd frames with a reference prefix (delta.h). */
#include "delta.h"

#include <errno.h>
#define ZSTD_STATIC_LINKING_ONLY /* the buffer-less decode, a raw-content DDict */
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

/* Decodes DC's frame from SRC (LEN bytes) into OUT, exactly WANT bytes, zstd block by
 * zstd block, telling STEP (CTX) every STP_DELTA_STEP bytes and at the end. */
static int decode_steps(ZSTD_DCtx *dc, const uint8_t *src, size_t len, uint8_t *out,
			size_t want, stp_delta_step step, void *ctx)
{
	size_t ip = 0, op = 0, told = 0, need, n;

	while ((need = ZSTD_nextSrcSizeToDecompress(dc))) {
		if (need > len - ip)
			return -EUCLEAN;
		/* zstd writes nothing past the capacity, nor below OP: told bytes stay */
		n = ZSTD_decompressContinue(dc, out + op, want - op, src + ip, need);
		if (ZSTD_isError(n))
			return -EUCLEAN;
		op += n;
		ip += need;
		if (step && op - told >= STP_DELTA_STEP)
			step(ctx, told = op);
	}
	if (ip != len || op != want)
		return -EUCLEAN;
	if (step)
		step(ctx, op);
	return 0;
}

int stp_delta_apply_steps(const void *delta, size_t dlen, const void *prefix, size_t plen,
			  void *out, size_t want, stp_delta_step step, void *ctx)
{
	ZSTD_frameHeader fh;
	ZSTD_DDict *dd;
	ZSTD_DCtx *dc;
	int err;

	if (!stp_delta_one_frame(delta, dlen) || ZSTD_getFrameHeader(&fh, delta, dlen) ||
	    fh.frameType != ZSTD_frame ||
	    fh.windowSize > (1ull << window_log(plen + want)))
		return -EUCLEAN;
	/* the prefix as raw content, by reference: whatever its first bytes, never read as
	 * a zstd dictionary */
	dd = ZSTD_createDDict_advanced(prefix, plen, ZSTD_dlm_byRef, ZSTD_dct_rawContent,
				       ZSTD_defaultCMem);
	dc = ZSTD_createDCtx();
	err = dd && dc ? 0 : -ENOMEM;
	if (!err && ZSTD_isError(ZSTD_decompressBegin_usingDDict(dc, dd)))
		err = -EUCLEAN;
	if (!err)
		err = decode_steps(dc, delta, dlen, out, want, step, ctx);
	ZSTD_freeDCtx(dc);
	ZSTD_freeDDict(dd);
	return err;
}

int stp_delta_apply(const void *delta, size_t dlen, const void *prefix, size_t plen,
		    void *out, size_t want)
{
	return stp_delta_apply_steps(delta, dlen, prefix, plen, out, want, NULL, NULL);
}
