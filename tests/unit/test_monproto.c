/* SPDX-License-Identifier: MIT */
/* The monitor's sends to a peer that may read nothing (mounthelper/mount/monproto.c):
 * stp_msg_send_fds_by gives up by its deadline, with or without descriptors, instead of
 * waiting in sendmsg for good once the socket is full (review 10 #3); a peer that reads
 * again gets every message whole, descriptors included. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "monproto.h"
#include "util.h"

#include "check.h"

#define MS 1000000ll

/* Fills SV[0]'s way to a peer that reads nothing: messages of LEN bytes until one does not
 * go within 50 ms. How many went. */
static unsigned fill(int fd, size_t len)
{
	static uint8_t payload[STP_MSG_MAX];
	unsigned n = 0;

	while (!stp_msg_send_fds_by(fd, (int64_t)stp_now_ns() + 50 * MS, STP_MSG_STORE, payload,
				    len, NULL, 0))
		n++;
	return n;
}

static void a_deaf_peer_times_out(void)
{
	int sv[2], fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int64_t start;
	unsigned sent;
	int rc;

	CHECK(fd >= 0 && !socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	sent = fill(sv[0], 148);
	CHECK(sent > 0, "no message went to an empty socket");
	start = (int64_t)stp_now_ns();
	rc = stp_msg_send_fds_by(sv[0], start + 200 * MS, STP_MSG_STORE, "x", 1, &fd, 1);
	CHECK(rc == -ETIMEDOUT, "a full socket: %s", strerror(-rc));
	CHECK((int64_t)stp_now_ns() - start < 5000 * MS, "it waited %lld ms past a 200 ms deadline",
	      (long long)(((int64_t)stp_now_ns() - start) / MS));
	/* a deadline already passed still tries once */
	rc = stp_msg_send_fds_by(sv[0], 0, STP_MSG_STORE, "x", 1, NULL, 0);
	CHECK(rc == -ETIMEDOUT, "a passed deadline: %s", strerror(-rc));
	close(sv[0]);
	close(sv[1]);
	close(fd);
}

static void a_reading_peer_gets_every_message(void)
{
	static uint8_t buf[STP_MSG_MAX];
	int sv[2], fd = open("/dev/null", O_RDONLY | O_CLOEXEC), got;
	unsigned sent, nfds;
	uint32_t type;
	size_t len;

	CHECK(fd >= 0 && !socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	sent = fill(sv[0], 4096);
	for (unsigned i = 0; i < sent; i++)
		CHECK(!stp_msg_recv(sv[1], (int64_t)stp_now_ns() + 1000 * MS, &type, buf,
				    sizeof(buf), &len) && type == STP_MSG_STORE && len == 4096);
	CHECK(!stp_msg_send_fds_by(sv[0], (int64_t)stp_now_ns() + 1000 * MS, STP_MSG_ROOM, "ab",
				   2, &fd, 1));
	CHECK(!stp_msg_recv_fds(sv[1], (int64_t)stp_now_ns() + 1000 * MS, &type, buf, sizeof(buf),
				&len, &got, 1, &nfds));
	CHECK(type == STP_MSG_ROOM && len == 2 && !memcmp(buf, "ab", 2) && nfds == 1);
	close(got);
	/* the peer gone: said at once */
	close(sv[1]);
	CHECK(stp_msg_send_fds_by(sv[0], (int64_t)stp_now_ns() + 1000 * MS, STP_MSG_ROOM, "ab", 2,
				  NULL, 0) == -EPIPE);
	close(sv[0]);
	close(fd);
}

int main(void)
{
	RUN(a_deaf_peer_times_out);
	RUN(a_reading_peer_gets_every_message);
	return tap_done();
}
