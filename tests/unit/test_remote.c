/* SPDX-License-Identifier: MIT */
/* A URL image's reads through the fetcher's channels (mounthelper/mount/remote.c) end in
 * bounded time whatever the fetcher sends: a fetcher turned hostile that answers with
 * keepalive frames forever, or with one byte a frame, had each frame re-arm the
 * channel's receive timeout, and held the read (and a FUSE thread) without end; so did
 * one frame claiming the whole request whose bytes came one per 100 ms (review 4 #1).
 * And a read goes to the channel that has been free longest: the fetcher's end of the
 * last one may still be writing what it sent into the store. */
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

/* The fetcher's end of channel ID: answers each request whole with bytes ID, counted
 * in SERVED, until the daemon's end is closed. */
struct answerer {
	int fd;
	uint8_t id;
	unsigned served;
};

static void *answer(void *arg)
{
	struct answerer *a = arg;
	struct stp_fetch_req req;
	uint8_t buf[4096];

	while (recv(a->fd, &req, sizeof(req), MSG_WAITALL) == (ssize_t)sizeof(req) &&
	       req.len <= sizeof(buf)) {
		struct stp_fetch_frame fr = { 0, (uint32_t)req.len, 1 };

		memset(buf, a->id, req.len);
		if (send(a->fd, &fr, sizeof(fr), MSG_NOSIGNAL) != (ssize_t)sizeof(fr) ||
		    send(a->fd, buf, req.len, MSG_NOSIGNAL) != (ssize_t)req.len)
			break;
		a->served++;
	}
	return NULL;
}

/* Reads one after the other take the two channels in turn, not the first each time. */
static void reads_take_turns(void)
{
	struct answerer a[2] = { { -1, 'a', 0 }, { -1, 'b', 0 } };
	struct stp_imgsrc *src = NULL;
	pthread_t tid[2];
	int ours[2], sv[2];
	uint8_t buf[512];

	for (unsigned k = 0; k < 2; k++) {
		CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
		ours[k] = sv[0];
		a[k].fd = sv[1];
		CHECK(!pthread_create(&tid[k], NULL, answer, &a[k]));
	}
	CHECK(!stp_remote_open(ours, 2, 1 << 20, 5, "http://stand-in/img.stp", false, &src));
	for (unsigned r = 0; src && r < 4; r++) {
		CHECK(src->pread(src, buf, sizeof(buf), 8192 * r) == 0);
		CHECK(buf[0] == a[r % 2].id && buf[sizeof(buf) - 1] == a[r % 2].id,
		      "read %u answered by channel '%c'", r, buf[0]);
	}
	stp_imgsrc_close(src);
	for (unsigned k = 0; k < 2; k++) {
		shutdown(ours[k], SHUT_RDWR);
		pthread_join(tid[k], NULL);
		close(ours[k]);
		close(a[k].fd);
	}
	CHECK(a[0].served == 2 && a[1].served == 2, "served %u and %u", a[0].served,
	      a[1].served);
}

int main(void)
{
	RUN(reads_take_turns);
	RUN(keepalives_forever_fail_the_read);
	RUN(one_byte_frames_fail_the_read);
	RUN(one_frame_trickled_fails_the_read);
	return tap_done();
}
