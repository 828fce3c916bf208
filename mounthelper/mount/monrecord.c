/* SPDX-License-Identifier: MIT */
/* The hot list record= writes into, opened by the monitor (monrecord.h). */
#include "monrecord.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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

/* As root, the watcher renames the list as the directory's owner, without capabilities
 * (monitor.h): the owner's write and search rights are checked now, not at unmount. */
static bool owner_may_rename(const struct stat *dir)
{
	return geteuid() != 0 || (dir->st_mode & (S_IWUSR | S_IXUSR)) == (S_IWUSR | S_IXUSR);
}

/* Root's walk to the directory follows no symbolic link (monitor.c); NAME there, if it
 * exists, must be a regular file (-ELOOP for a link, -EINVAL for anything else: it would
 * be replaced by the rename); TEMP is made new. FDS: the directory and TEMP. */
static int open_record_files(const char *dir, const char *name, const char *temp, int fds[2])
{
	struct stat st;
	int err = 0;

	fds[0] = stp_monitor_open_record_dir(dir);
	if (fds[0] < 0)
		return fds[0];
	if (fstat(fds[0], &st))
		err = -errno;
	else if (!owner_may_rename(&st))
		err = -EACCES;
	else if (!fstatat(fds[0], name, &st, AT_SYMLINK_NOFOLLOW))
		err = S_ISLNK(st.st_mode) ? -ELOOP : S_ISREG(st.st_mode) ? 0 : -EINVAL;
	else if (errno != ENOENT)
		err = -errno;
	fds[1] = err ? err : stp_monitor_record_create(fds[0], temp);
	if (fds[1] >= 0)
		return 0;
	close(fds[0]);
	return fds[1];
}

/* The standard descriptors onto /dev/null (an open that cannot wait). */
static void keep_no_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	for (int i = 0; null >= 0 && i <= 2; i++)
		dup2(null, i);
}

/* What a bounded child does (FDS: what it hands back, NFDS of them on success). */
struct child_job {
	int (*run)(const struct child_job *job, int fds[2]);
	const char *dir;
	const struct stp_mon_record *r;
	unsigned nfds;
};

/* JOB in a child: a path walk, an fsync or a rename may wait on a file system that never
 * answers (a hung NFS server, a user's FUSE mount with allow_other on the path), which
 * no flag bounds. The result and any descriptors come back over a socket; past DEADLINE
 * the child is killed and left (init reaps it once its file system lets it go):
 * -ETIMEDOUT. */
static int in_bounded_child(const struct child_job *job, int64_t deadline, int fds[2])
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int sv[2], err;
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
		rc = job->run(job, fds);
		stp_msg_send_fds(sv[1], STP_MSG_RECORD, &rc, sizeof(rc), fds, rc ? 0 : job->nfds);
		_exit(0);
	}
	close(sv[1]);
	err = pid < 0 ? -errno : stp_msg_recv_fds(sv[0], deadline, &type, buf, STP_MSG_MAX,
						   &len, fds, 2, &nfds);
	if (!err && (type != STP_MSG_RECORD || len != sizeof(rc)))
		err = -EPROTO;
	if (!err) {
		memcpy(&rc, buf, sizeof(rc));
		err = rc < 0 ? rc : nfds == job->nfds ? 0 : -EPROTO;
	}
	for (unsigned i = 0; err && i < nfds; i++)
		close(fds[i]);
	close(sv[0]);
	free(buf);
	if (pid > 0 && err == -ETIMEDOUT) {
		/* not waited for: a request the file system has read ignores even SIGKILL */
		stp_monitor_signal(-1, pid, SIGKILL);
		waitpid(pid, NULL, WNOHANG);
	} else if (pid > 0) {
		waitpid(pid, NULL, 0);
	}
	return err;
}

static int open_job(const struct child_job *job, int fds[2])
{
	return open_record_files(job->dir, job->r->name, job->r->temp, fds);
}

static int place_job(const struct child_job *job, int fds[2])
{
	(void)fds;
	return stp_monitor_record_place(job->r->dir_fd, job->r->fd, job->r->temp, job->r->name);
}

static int64_t deadline_from_now(void)
{
	return (int64_t)stp_now_ns() + STP_MOUNT_DEADLINE_MS * 1000000ll;
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
	else if (err == -EINVAL)
		stp_monlog_say(m->prog, "record=%s: not a regular file: refused", path);
	else if (err == -EACCES && geteuid() == 0)
		stp_monlog_say(m->prog, "record=%s: permission denied: the list is put in place as "
			       "the owner of its directory, who needs write and search rights there",
			       path);
	else
		stp_monlog_say(m->prog, "%s: %s", path, stp_strerror(err));
}

/* R's directory (malloc'd: "." for a bare name), its name and a new temporary name. */
static int name_record(const char *path, struct stp_mon_record *r, char **dir)
{
	const char *slash = strrchr(path, '/');
	uint64_t rnd;
	int n;

	r->name = slash ? slash + 1 : path;
	*dir = slash == path ? strdup("/") : slash ? strndup(path, (size_t)(slash - path))
						    : strdup(".");
	if (!*dir)
		return -ENOMEM;
	if (!*r->name)
		return -EINVAL; /* a directory */
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	n = snprintf(r->temp, sizeof(r->temp), "%s.tmp.%016llx", r->name, (unsigned long long)rnd);
	return n < (int)sizeof(r->temp) ? 0 : -ENAMETOOLONG;
}

/* The socket the daemon says on that the list is whole, and then waits on until the
 * list is in place (this end closed): its end in m->h. */
static int open_done_socket(struct stp_mon *m)
{
	int p[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
		return -errno;
	m->rec.done_fd = p[0];
	m->h.record_done_fd = p[1];
	/* read once it polls readable, never waited on */
	return fcntl(p[0], F_SETFL, O_NONBLOCK) ? -errno : 0;
}

int stp_monrecord_open(struct stp_mon *m)
{
	struct stp_mon_record *r = &m->rec;
	int fds[2], err;
	char *dir = NULL;

	if (!m->o->record)
		return 0;
	err = name_record(m->o->record, r, &dir);
	if (!err)
		err = in_bounded_child(&(struct child_job){ open_job, dir, r, 2 },
				       deadline_from_now(), fds);
	free(dir);
	if (err) {
		say_refused(m, err);
		return err;
	}
	r->dir_fd = fds[0];
	r->fd = fds[1];
	m->h.record_fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 3);
	err = m->h.record_fd < 0 ? -errno : open_done_socket(m);
	if (err) {
		say_refused(m, err);
		stp_monrecord_drop(m);
	}
	return err;
}

void stp_monrecord_close(struct stp_mon *m)
{
	struct stp_mon_record *r = &m->rec;
	int *fds[] = { &r->dir_fd, &r->fd, &r->done_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

void stp_monrecord_drop(struct stp_mon *m)
{
	if (m->rec.dir_fd >= 0)
		stp_monitor_record_drop(m->rec.dir_fd, m->rec.temp);
	stp_monrecord_close(m);
}

void stp_monrecord_finish(struct stp_mon *m)
{
	struct stp_mon_record *r = &m->rec;
	char c;
	int err;

	if (r->dir_fd < 0)
		return;
	err = read(r->done_fd, &c, 1) == 1 ? 0 : -ENODATA;
	if (!err)
		err = in_bounded_child(&(struct child_job){ place_job, NULL, r, 0 },
				       deadline_from_now(), (int[2]){ -1, -1 });
	if (err == -ENODATA)
		stp_monlog_say(m->prog, "warning: record=%s: the daemon ended before the list was "
			       "whole: the old one is kept", m->o->record);
	else if (err == -ETIMEDOUT)
		stp_monlog_say(m->prog, "warning: record=%s: its file system did not answer "
			       "within %d s: the new list may not be in place", m->o->record,
			       STP_MOUNT_DEADLINE_MS / 1000);
	else if (err)
		stp_monlog_say(m->prog, "warning: record=%s: %s: the old one is kept",
			       m->o->record, stp_strerror(err));
	if (err && err != -ETIMEDOUT) /* an unlink would wait on the same file system */
		stp_monrecord_drop(m);
	stp_monrecord_close(m);
}

void stp_monrecord_await(struct stp_mon *m)
{
	struct pollfd p = { .fd = m->rec.done_fd, .events = POLLIN };

	while (p.fd >= 0 && poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	stp_monrecord_finish(m);
}

void stp_monrecord_fds(const struct stp_mon *m, int out[3])
{
	out[0] = m->rec.dir_fd;
	out[1] = m->rec.fd;
	out[2] = m->rec.done_fd;
}
