/* SPDX-License-Identifier: MIT */
#include "monproto.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util.h"

/* writev, not sendmsg: the confined daemon's filter allows only the former. */
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

/* MH's control data: NFDS descriptors attached, in CTL. */
union rights {
	struct cmsghdr align;
	char buf[CMSG_SPACE(STP_MSG_FDS_MAX * sizeof(int))];
};

static void attach_fds(struct msghdr *mh, union rights *ctl, const int *fds, unsigned nfds)
{
	struct cmsghdr *c;

	if (!nfds)
		return;
	memset(ctl, 0, sizeof(*ctl));
	mh->msg_control = ctl->buf;
	mh->msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
}

int stp_msg_send_fds(int fd, uint32_t type, const void *payload, size_t len, const int *fds,
		     unsigned nfds)
{
	if (!nfds)
		return stp_msg_send(fd, type, payload, len);
	return stp_msg_send_fds_by(fd, INT64_MAX, type, payload, len, fds, nfds);
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

/* Waits for EVENTS on FD until DEADLINE_NS (a deadline passed still looks once). */
static int wait_ready(int fd, short events, int64_t deadline_ns)
{
	for (;;) {
		int64_t left = deadline_ns - (int64_t)stp_now_ns();
		struct pollfd p = { .fd = fd, .events = events };
		int ms = left <= 0 ? 0 : left / 1000000 >= INT_MAX ? -1
						   : (int)((left + 999999) / 1000000);
		int n = poll(&p, 1, ms);

		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n == 0 && left <= 0)
			return -ETIMEDOUT;
	}
}

int stp_msg_send_fds_by(int fd, int64_t deadline_ns, uint32_t type, const void *payload,
			size_t len, const int *fds, unsigned nfds)
{
	struct iovec iov[2] = { { &type, sizeof(type) }, { (void *)payload, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	union rights ctl;
	ssize_t n;

	if (len > STP_MSG_MAX || nfds > STP_MSG_FDS_MAX)
		return -EMSGSIZE;
	attach_fds(&mh, &ctl, fds, nfds);
	for (;;) {
		int rc;

		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
		rc = errno == EAGAIN ? wait_ready(fd, POLLOUT, deadline_ns) : 0;
		if (rc)
			return rc;
	}
	if (n < 0)
		return -errno;
	return n == (ssize_t)(sizeof(type) + len) ? 0 : -EIO;
}

int stp_msg_peek_type(int fd, int64_t deadline_ns, uint32_t *type)
{
	ssize_t n;

	do {
		int rc = wait_ready(fd, POLLIN, deadline_ns);

		if (rc)
			return rc;
		/* no control buffer: descriptors attached stay with the message */
		n = recv(fd, type, sizeof(*type), MSG_PEEK | MSG_DONTWAIT);
	} while (n < 0 && (errno == EINTR || errno == EAGAIN));
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	return n < (ssize_t)sizeof(*type) ? -EPROTO : 0;
}

int stp_msg_recv(int fd, int64_t deadline_ns, uint32_t *type, void *buf, size_t cap,
		 size_t *len)
{
	unsigned nfds;

	return stp_msg_recv_fds(fd, deadline_ns, type, buf, cap, len, NULL, 0, &nfds);
}

/* The descriptors of MH's control data into FDS: -EPROTO (all closed) when there are
 * more than MAXFDS, or the kernel dropped some. */
static int take_fds(struct msghdr *mh, int *fds, unsigned maxfds, unsigned *nfds)
{
	int err = mh->msg_flags & MSG_CTRUNC ? -EPROTO : 0;

	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		unsigned n = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[STP_MSG_FDS_MAX];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = n > STP_MSG_FDS_MAX ? STP_MSG_FDS_MAX : n;
		memcpy(got, CMSG_DATA(c), n * sizeof(int));
		for (unsigned i = 0; i < n; i++) {
			if (*nfds < maxfds && !err) {
				fds[(*nfds)++] = got[i];
			} else {
				close(got[i]);
				err = -EPROTO;
			}
		}
	}
	for (unsigned i = 0; err && i < *nfds; i++)
		close(fds[i]);
	if (err)
		*nfds = 0;
	return err;
}

int stp_msg_recv_fds(int fd, int64_t deadline_ns, uint32_t *type, void *buf, size_t cap,
		     size_t *len, int *fds, unsigned maxfds, unsigned *nfds)
{
	struct iovec iov[2] = { { type, sizeof(*type) }, { buf, cap } };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(STP_MSG_FDS_MAX * sizeof(int))];
	} ctl;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;
	int err;

	*nfds = 0;
	do {
		int rc = wait_ready(fd, POLLIN, deadline_ns);

		if (rc)
			return rc;
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	} while (n < 0 && (errno == EINTR || errno == EAGAIN));
	if (n < 0)
		return -errno;
	err = take_fds(&mh, fds, maxfds, nfds);
	if (err)
		return err;
	if (n == 0)
		return -EPIPE;
	if ((size_t)n < sizeof(*type) || (mh.msg_flags & MSG_TRUNC))
		return -EPROTO;
	*len = (size_t)n - sizeof(*type);
	return 0;
}
