/* SPDX-License-Identifier: MIT */
#include "montalk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "filters.h"
#include "monlog.h"
#include "monproto.h"
#include "prime.h"
#include "setup.h"

void stp_montalk_release(struct stp_handover *h)
{
	if (h->image_fd >= 0)
		close(h->image_fd);
	if (h->record_fd >= 0)
		close(h->record_fd);
	if (h->record_done_fd >= 0)
		close(h->record_done_fd);
	if (h->cache.fd >= 0)
		close(h->cache.fd);
	if (h->fuse_fd >= 0)
		close(h->fuse_fd);
	h->image_fd = h->record_fd = h->record_done_fd = h->cache.fd = h->fuse_fd = -1;
	explicit_bzero(h->cache.tag_key, sizeof(h->cache.tag_key));
	stp_fetcher_release(&h->fetcher);
	free(h->keys);
	h->keys = NULL;
	h->nkeys = 0;
}

int stp_montalk_send_filter(int fd, const struct stp_mount_opts *o, const char *prog,
			    pid_t pid)
{
	struct stp_sandbox_prog filter;
	char why[256];
	int err;

	if (o->sandbox == STP_SANDBOX_OFF)
		return 0;
	err = stp_filters_export(STP_FILTER_DAEMON, o->sandbox, pid, &filter, why, sizeof(why));
	if (err) {
		stp_monlog_say(prog, "sandbox: %s", why);
		return err;
	}
	err = stp_setup_send_filter(fd, &filter);
	stp_sandbox_prog_free(&filter);
	return err;
}

/* What the daemon is told of the options O: nothing it could let out. It names the image
 * as the monitor's messages do (a URL without its query, which may sign requests), and
 * has no use for proxy=, netrc= or ca= (a password, where secrets are kept): the fetcher
 * has them. Its strings stay O's. */
static void daemon_opts(struct stp_mount_opts *out, const struct stp_mount_opts *o)
{
	*out = *o;
	out->image = (char *)stp_monlog_image(o);
	out->proxy = out->netrc_file = out->ca_file = out->cache_dir = NULL;
}

int stp_montalk_send_setup(int fd, const struct stp_mount_opts *o, const char *prog,
			   const struct stp_handover *h)
{
	struct stp_setup *s = stp_setup_new(o, prog);
	int fds[STP_SETUP_FDS_MAX], err;

	if (!s)
		return -ENOMEM;
	daemon_opts(&s->opts, o);
	s->mem_limit = h->mem_limit;
	s->url_size = h->fetcher.size;
	s->cache = h->cache;
	s->nkeys = h->nkeys;
	memcpy(s->keys, h->keys, h->nkeys * sizeof(*h->keys));
	s->sandbox_ids = h->sandbox_ids;
	s->sandbox_uid = h->sandbox_uid;
	s->sandbox_gid = h->sandbox_gid;
	stp_setup_add_fd(s, fds, h->fuse_fd, STP_FD_FUSE);
	stp_setup_add_fd(s, fds, h->image_fd, STP_FD_IMAGE);
	stp_setup_add_fd(s, fds, h->record_fd, STP_FD_RECORD);
	stp_setup_add_fd(s, fds, h->record_done_fd, STP_FD_RECORD_DONE);
	stp_setup_add_fd(s, fds, h->cache.fd, STP_FD_CACHE);
	for (unsigned i = 0; i < h->fetcher.nchans; i++)
		stp_setup_add_fd(s, fds, h->fetcher.chans[i], STP_FD_CHAN);
	err = stp_setup_send(fd, s, fds);
	stp_setup_discard(s);
	return err;
}

unsigned stp_montalk_deadline_s(const struct stp_mount_opts *o)
{
	return STP_MOUNT_DEADLINE_MS / 1000 + (o->is_url ? 2 * o->timeout_s : 0);
}

void stp_montalk_say_late(const char *prog, const struct stp_mount_opts *o)
{
	stp_monlog_say(prog, "%s: the daemon did not answer within %u s", stp_monlog_image(o),
		       stp_montalk_deadline_s(o));
}

/* FAILED: the daemon's errno, then its reason. */
static int failed(const uint8_t *buf, size_t len)
{
	int32_t err;

	if (len < sizeof(err))
		return STP_MONTALK_LOST;
	memcpy(&err, buf, sizeof(err));
	stp_monlog_daemon_failed((const char *)buf + sizeof(err), len - sizeof(err));
	return err < 0 && err > -4096 ? err : -EIO;
}

int stp_montalk_wait_live(int fd, int64_t deadline_ns, const char *prog,
			  const struct stp_mount_opts *o, uint8_t *buf)
{
	for (;;) {
		uint32_t type;
		size_t len;
		int rc = stp_msg_recv(fd, deadline_ns, &type, buf, STP_MSG_MAX, &len);

		if (rc == -ETIMEDOUT)
			stp_montalk_say_late(prog, o);
		if (rc)
			return rc == -ETIMEDOUT ? rc : STP_MONTALK_LOST;
		if (type == STP_MSG_LIVE)
			return 0;
		if (type == STP_MSG_FAILED)
			return failed(buf, len);
		if (type != STP_MSG_LOG)
			return STP_MONTALK_LOST;
		stp_monlog_daemon((const char *)buf, len);
	}
}

int stp_montalk_receive_plan(int fd, int64_t deadline_ns, uint8_t *buf,
			     struct stp_prime_list **list)
{
	uint32_t type;
	size_t len;
	int err;

	while (!(err = stp_msg_recv(fd, deadline_ns, &type, buf, STP_MSG_MAX, &len))) {
		if (type == STP_MSG_LOG)
			stp_monlog_daemon((const char *)buf, len);
		else if (type == STP_MSG_PRIME)
			err = stp_prime_list_add(list, buf, len);
		else
			err = type == STP_MSG_PRIME_END ? 0 : -EPROTO;
		if (err || type == STP_MSG_PRIME_END)
			break;
	}
	return err;
}

void stp_montalk_say_lost(const char *prog, bool gone, int status)
{
	if (!gone)
		stp_monlog_say(prog, "the daemon broke off before the mount was live");
	else if (WIFSIGNALED(status))
		stp_monlog_say(prog, "the daemon died of signal %d before the mount was live",
			       WTERMSIG(status));
	else
		stp_monlog_say(prog, "the daemon exited before the mount was live");
}

int stp_montalk_sandbox_ids(struct stp_handover *h, const struct stp_mount_opts *o,
			    const char *prog)
{
	char err[256];
	int rc;

	if (geteuid() != 0 || o->sandbox == STP_SANDBOX_OFF)
		return 0;
	rc = stp_sandbox_resolve_user(o->sandbox_user, &h->sandbox_uid, &h->sandbox_gid, err,
				      sizeof(err));
	h->sandbox_ids = !rc;
	if (rc)
		stp_monlog_say(prog, "sandbox: %s", err);
	return rc;
}
