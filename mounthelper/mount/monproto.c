/* SPDX-License-Identifier: MIT */
#include "monproto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util.h"

int stp_msg_send(int fd, uint32_t type, const void *payload, size_t len)
{
	struct iovec iov[2] = { { &type, sizeof(type) }, { (void *)payload, len } };
	ssize_t n;

	if (len > STP_MSG_MAX)
		return -EMSGSIZE;
	do
		n = writev(fd, iov, len ? 2 : 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == (ssize_t)(sizeof(type) + len) ? 0 : -EIO;
}

int stp_msg_send_failed(int fd, int err, const char *text)
{
	uint8_t buf[512];
	int32_t e = err;
	size_t n = strnlen(text, sizeof(buf) - sizeof(e));

	memcpy(buf, &e, sizeof(e));
	memcpy(buf + sizeof(e), text, n);
	return stp_msg_send(fd, STP_MSG_FAILED, buf, sizeof(e) + n);
}

/* Waits for FD to be readable until DEADLINE_NS (a deadline passed still looks once). */
static int wait_readable(int fd, int64_t deadline_ns)
{
	for (;;) {
		int64_t left = deadline_ns - (int64_t)stp_now_ns();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, left > 0 ? (int)((left + 999999) / 1000000) : 0);

		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n == 0 && left <= 0)
			return -ETIMEDOUT;
	}
}

int stp_msg_recv(int fd, int64_t deadline_ns, uint32_t *type, void *buf, size_t cap,
		 size_t *len)
{
	struct iovec iov[2] = { { type, sizeof(*type) }, { buf, cap } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;

	do {
		int rc = wait_readable(fd, deadline_ns);

		if (rc)
			return rc;
		n = recvmsg(fd, &mh, MSG_DONTWAIT);
	} while (n < 0 && (errno == EINTR || errno == EAGAIN));
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	if ((size_t)n < sizeof(*type) || (mh.msg_flags & MSG_TRUNC))
		return -EPROTO;
	*len = (size_t)n - sizeof(*type);
	return 0;
}
