/* SPDX-License-Identifier: MIT */
/* The hot list record= writes into, opened by the monitor (monrecord.h). */
#include "monrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monitor.h"
#include "monlog.h"
#include "monproto.h"
#include "monstate.h"
#include "mountopts.h"
#include "setup.h"
#include "util.h"

/* The hot list, opened as root (monitor.c): through no symbolic link anywhere on its
 * path (a user who owns a directory on it could point it at any file for root to
 * truncate and overwrite), a regular file (opened without waiting: a FIFO would hold the
 * mount until someone opens its other end, and then take whatever is written; a device
 * is no list), with no other hard link. An fd or a negative errno (-ELOOP, -EMLINK,
 * -EINVAL for those). */
static int open_record_file(const char *path)
{
	struct stat st;
	int fd = stp_monitor_open_record(path), err = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st))
		err = -errno;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if (st.st_nlink > 1)
		err = -EMLINK;
	if (err)
		close(fd);
	return err ? err : fd;
}

/* The standard descriptors onto /dev/null (an open that cannot wait). */
static void keep_no_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	for (int i = 0; null >= 0 && i <= 2; i++)
		dup2(null, i);
}

/* open_record_file in a child: the path walk may wait on a file system that never
 * answers (a user's FUSE mount with allow_other on a directory of the path), which no
 * flag of open(2) bounds. The descriptor comes back over a socket; past DEADLINE the
 * child is killed and left (init reaps it once its file system lets it go): -ETIMEDOUT. */
static int open_record_bounded(const char *path, int64_t deadline)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int sv[2], fd = -1, err;
	unsigned nfds = 0;
	uint32_t type;
	int32_t rc;
	size_t len;
	pid_t pid;

	if (!buf || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		free(buf);
		return -ENOMEM;
	}
	pid = fork();
	if (pid == 0) {
		keep_no_stdio(); /* a child left stuck must not hold its caller's pipes open */
		fd = open_record_file(path);
		rc = fd < 0 ? fd : 0;
		stp_msg_send_fds(sv[1], STP_MSG_RECORD, &rc, sizeof(rc), &fd, fd >= 0);
		_exit(0);
	}
	close(sv[1]);
	err = pid < 0 ? -errno : stp_msg_recv_fds(sv[0], deadline, &type, buf, STP_MSG_MAX,
						   &len, &fd, 1, &nfds);
	if (!err && (type != STP_MSG_RECORD || len != sizeof(rc)))
		err = -EPROTO;
	if (!err) {
		memcpy(&rc, buf, sizeof(rc));
		err = rc < 0 ? rc : nfds == 1 ? 0 : -EPROTO;
	}
	if (err && nfds)
		close(fd);
	close(sv[0]);
	free(buf);
	if (pid > 0 && err == -ETIMEDOUT) {
		/* not waited for: a request the file system has read ignores even SIGKILL */
		stp_monitor_signal(-1, pid, SIGKILL);
		waitpid(pid, NULL, WNOHANG);
	} else if (pid > 0) {
		waitpid(pid, NULL, 0);
	}
	return err ? err : fd;
}

/* Why the list was refused, said after PROG. */
static void say_refused(const struct stp_mon *m, int err)
{
	const char *path = m->o->record;

	if (err == -ETIMEDOUT)
		stp_monlog_say(m->prog, "record=%s: its path did not answer within %d s: refused",
			       path, STP_MOUNT_DEADLINE_MS / 1000);
	else if (err == -ELOOP)
		stp_monlog_say(m->prog, "record=%s: a symbolic link on its path: refused (name the "
			       "file by its resolved path)", path);
	else if (err == -EMLINK)
		stp_monlog_say(m->prog, "record=%s: the file has another hard link: refused", path);
	else if (err == -EINVAL)
		stp_monlog_say(m->prog, "record=%s: not a regular file: refused", path);
	else
		stp_monlog_say(m->prog, "%s: %s", path, stp_strerror(err));
}

int stp_monrecord_open(struct stp_mon *m)
{
	int fd;

	m->h.record_fd = -1;
	if (!m->o->record)
		return 0;
	fd = open_record_bounded(m->o->record, (int64_t)stp_now_ns() +
				 STP_MOUNT_DEADLINE_MS * 1000000ll);
	if (fd < 0) {
		say_refused(m, fd);
		return fd;
	}
	m->h.record_fd = fd;
	m->record_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return m->record_fd < 0 ? -errno : 0;
}

void stp_monrecord_empty(struct stp_mon *m)
{
	if (m->record_fd < 0)
		return;
	if (ftruncate(m->record_fd, 0))
		stp_monlog_say(m->prog, "warning: %s: %s", m->o->record, stp_strerror(-errno));
	close(m->record_fd);
	m->record_fd = -1;
}
