/* SPDX-License-Identifier: MIT */
/* A URL image's reads through the fetcher's channels (mounthelper/mount/remote.c) end in
 * bounded time whatever the fetcher sends: a fetcher turned hostile that answers with
 * keepalive frames forever, or with one byte a frame, had each frame re-arm the
 * channel's receive timeout, and held the read (and a FUSE thread) without end; so did
 * one frame claiming the whole request whose bytes came one per 100 ms (review 4 #1). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fetcher.h"
#include "imgsrc.h"
#include "remote.h"
#include "util.h"

#include "check.h"

#define STALL_S 30 /* how long the stand-in fetcher keeps at it */

/* PIECE for one frame header claiming the whole request, then its bytes one at a time. */
#define ONE_FRAME UINT32_MAX

struct stand_in {
	int fd;
	uint32_t piece; /* bytes of each frame: 0 for keepalives, or ONE_FRAME */
};

/* A frame header of S's kind for REQ, but for ONE_FRAME only the first time. */
static int send_header(const struct stand_in *s, const struct stp_fetch_req *req, unsigned i)
{
	struct stp_fetch_frame fr = { 0, s->piece, s->piece ? 1 : 0 };

	if (s->piece == ONE_FRAME) {
		if (i)
			return 0;
		fr.len = (uint32_t)req->len;
	}
	return send(s->fd, &fr, sizeof(fr), MSG_NOSIGNAL) == (ssize_t)sizeof(fr) ? 0 : -1;
}

/* The fetcher's end: takes one request, then sends a frame (or a byte) every 100 ms for
 * STALL_S seconds or until the daemon's end is closed. */
static void *stall(void *arg)
{
	struct stand_in *s = arg;
	struct stp_fetch_req req;
	static const uint8_t byte = 'x';

	if (recv(s->fd, &req, sizeof(req), MSG_WAITALL) != (ssize_t)sizeof(req))
		return NULL;
	for (unsigned i = 0; i < STALL_S * 10; i++) {
		if (send_header(s, &req, i) ||
		    (s->piece && send(s->fd, &byte, 1, MSG_NOSIGNAL) != 1))
			break;
		usleep(100000);
	}
	return NULL;
}

/* Reads 4 KiB from a stand-in that sends frames of PIECE bytes: the read must fail with
 * EIO, well before the stand-in stops. The channel's receive timeout is 1 s, so the
 * bound is 1 s plus four times 4 KiB at 16 KiB/s: 2 s. */
static void read_against(uint32_t piece)
{
	struct timeval tv = { 1, 0 };
	struct stp_imgsrc *src = NULL;
	struct stand_in s = { -1, piece };
	uint8_t buf[4096];
	pthread_t tid;
	int sv[2];

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	CHECK(!setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	s.fd = sv[1];
	CHECK(!pthread_create(&tid, NULL, stall, &s));
	CHECK(!stp_remote_open(&sv[0], 1, 1 << 20, 1, "http://stand-in/img.stp", false, &src));
	uint64_t start = stp_now_ns();
	int rc = src->pread(src, buf, sizeof(buf), 4096);
	double took = (double)(stp_now_ns() - start) / 1e9;

	CHECK(rc == -EIO, "rc %d", rc);
	CHECK(took > 1.5 && took < 6, "the read ended after %.1f s", took);
	stp_imgsrc_close(src);
	close(sv[0]); /* the stand-in's next send fails */
	pthread_join(tid, NULL);
	close(sv[1]);
}

static void keepalives_forever_fail_the_read(void)
{
	read_against(0);
}

static void one_byte_frames_fail_the_read(void)
{
	read_against(1);
}

static void one_frame_trickled_fails_the_read(void)
{
	read_against(ONE_FRAME);
}

int main(void)
{
	RUN(keepalives_forever_fail_the_read);
	RUN(one_byte_frames_fail_the_read);
	RUN(one_frame_trickled_fails_the_read);
	return tap_done();
}
