/* SPDX-License-Identifier: MIT */
/* The hand-over from the monitor to the programs it execs (setup.h). */
#include "setup.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "monproto.h"

enum kind { STR, U32, U64, FLAG, TAG_KEY, KEY, ROLES };

/* A field: its tag is its position in FIELDS, plus one. */
struct field {
	enum kind kind;
	const char *name; /* for messages */
	size_t off;     /* in struct stp_setup */
	uint64_t max;   /* numbers: the largest value taken (0: any) */
};

#define OPT(f) #f, offsetof(struct stp_setup, opts.f)
#define SET(f) #f, offsetof(struct stp_setup, f)

static const struct field fields[] = {
	{ STR, SET(prog), 0 },
	{ STR, OPT(image), 0 },
	{ STR, OPT(image_path), 0 },
	{ STR, OPT(mountpoint), 0 },
	{ STR, OPT(record), 0 },
	{ STR, OPT(sandbox_user), 0 },
	{ STR, OPT(verify_key), 0 },
	{ STR, OPT(fuse_opts), 0 },
	{ STR, OPT(ca_file), 0 },
	{ STR, OPT(proxy), 0 },
	{ STR, OPT(netrc_file), 0 },
	{ U32, OPT(cache_budget), STP_CACHE_BUDGET_MAX },
	{ U32, OPT(readahead), STP_READAHEAD_MAX },
	{ U32, OPT(warm_workers), STP_WARM_WORKERS_MAX },
	{ U32, OPT(timeout_s), STP_URL_TIMEOUT_MAX },
	{ U32, OPT(sandbox), STP_SANDBOX_OFF },
	{ U64, OPT(meta_cache), 0 },
	{ U64, OPT(cache_size), 0 },
	{ FLAG, OPT(no_prime), 1 },
	{ FLAG, OPT(no_fill), 1 },
	{ FLAG, OPT(no_deltas), 1 },
	{ FLAG, OPT(verify), 1 },
	{ FLAG, OPT(foreground), 1 },
	{ FLAG, OPT(allow_other), 1 },
	{ FLAG, OPT(restricted), 1 },
	{ FLAG, OPT(is_url), 1 },
	{ U64, SET(mem_limit), 0 },
	{ U64, SET(url_size), 0 },
	{ U64, SET(cache.tags_at), 0 },
	{ U64, SET(cache.slots), 0 },
	{ TAG_KEY, SET(cache.tag_key), 0 },
	{ KEY, SET(keys), 0 },
	{ ROLES, SET(roles), 0 },
	{ FLAG, SET(sandbox_ids), 1 },
	{ U32, SET(sandbox_uid), 0 },
	{ U32, SET(sandbox_gid), 0 },
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* Not stp_mountopts_init: a program that only decodes links no option parser. */
void stp_setup_init(struct stp_setup *s)
{
	memset(s, 0, sizeof(*s));
	s->cache.fd = -1;
}

void stp_setup_free(struct stp_setup *s)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (fields[i].kind == STR) {
			char **p = (char **)((char *)s + fields[i].off);

			free(*p);
			*p = NULL;
		}
	explicit_bzero(s->cache.tag_key, sizeof(s->cache.tag_key));
}

struct stp_setup *stp_setup_new(const struct stp_mount_opts *o, const char *prog)
{
	struct stp_setup *s = malloc(sizeof(*s));

	if (!s)
		return NULL;
	stp_setup_init(s);
	s->opts = *o;
	s->prog = (char *)prog;
	return s;
}

void stp_setup_discard(struct stp_setup *s)
{
	if (!s)
		return;
	explicit_bzero(s, sizeof(*s)); /* keys, the cache's secret */
	free(s);
}

/* Appends one field to the buffer at *AT, if it fits. */
static int put(uint8_t *buf, size_t cap, size_t *at, uint32_t tag, const void *p, size_t len)
{
	uint32_t head[2] = { tag, (uint32_t)len };

	if (cap - *at < sizeof(head) + len)
		return -EMSGSIZE;
	memcpy(buf + *at, head, sizeof(head));
	memcpy(buf + *at + sizeof(head), p, len);
	*at += sizeof(head) + len;
	return 0;
}

/* The bytes of field F of S at *P, *N of them (a count of keys for KEY); false when
 * the field is absent. */
static bool field_bytes(const struct stp_setup *s, const struct field *f, const void **p,
			size_t *n)
{
	const char *at = (const char *)s + f->off;

	*p = at;
	switch (f->kind) {
	case STR:
		*p = *(char *const *)at;
		*n = *p ? strlen(*p) : 0;
		return *p != NULL;
	case U32: *n = 4; return true;
	case U64: *n = 8; return true;
	case FLAG: *n = 1; return true;
	case TAG_KEY: *n = sizeof(s->cache.tag_key); return true;
	case KEY: *n = s->nkeys; return true;
	case ROLES: *n = s->nroles * sizeof(uint32_t); return s->nroles != 0;
	}
	return false;
}

int stp_setup_encode(const struct stp_setup *s, uint8_t *buf, size_t cap, size_t *len)
{
	size_t at = 0;
	int err = 0;

	for (uint32_t i = 0; !err && i < NFIELDS; i++) {
		const void *p;
		size_t n;

		if (!field_bytes(s, &fields[i], &p, &n))
			continue;
		if (fields[i].kind == STR && n > STP_SETUP_STR_MAX)
			err = -ENAMETOOLONG;
		else if (fields[i].kind != KEY)
			err = put(buf, cap, &at, i + 1, p, n);
		for (uint32_t k = 0; fields[i].kind == KEY && !err && k < n; k++)
			err = put(buf, cap, &at, i + 1, &s->keys[k], sizeof(s->keys[k]));
	}
	*len = at;
	return err;
}

static int decode_str(char **out, const uint8_t *p, uint32_t len)
{
	if (len > STP_SETUP_STR_MAX || memchr(p, '\0', len))
		return -EPROTO;
	free(*out);
	*out = strndup((const char *)p, len);
	return *out ? 0 : -ENOMEM;
}

static int decode_number(void *at, const struct field *f, const uint8_t *p, uint32_t len)
{
	uint32_t v32;
	uint64_t v;

	if (len != (f->kind == U64 ? 8u : f->kind == U32 ? 4u : 1u))
		return -EPROTO;
	if (f->kind == U64) {
		memcpy(&v, p, 8);
	} else if (f->kind == U32) {
		memcpy(&v32, p, 4);
		v = v32;
	} else {
		v = p[0];
	}
	if (f->max && v > f->max)
		return -EPROTO;
	if (f->kind == U64)
		memcpy(at, &v, 8);
	else if (f->kind == U32)
		memcpy(at, &v32, 4);
	else
		*(bool *)at = v != 0;
	return 0;
}

static int decode_roles(struct stp_setup *s, const uint8_t *p, uint32_t len)
{
	if (len % sizeof(uint32_t) || len / sizeof(uint32_t) > STP_SETUP_FDS_MAX)
		return -EPROTO;
	s->nroles = len / sizeof(uint32_t);
	memcpy(s->roles, p, len);
	for (uint32_t i = 0; i < s->nroles; i++)
		if (s->roles[i] < STP_FD_FUSE || s->roles[i] > STP_FD_RECORD_DONE)
			return -EPROTO;
	return 0;
}

static int decode_field(struct stp_setup *s, const struct field *f, const uint8_t *p,
			uint32_t len)
{
	void *at = (char *)s + f->off;

	switch (f->kind) {
	case STR:
		return decode_str(at, p, len);
	case TAG_KEY:
		if (len != sizeof(s->cache.tag_key))
			return -EPROTO;
		memcpy(at, p, len);
		return 0;
	case KEY:
		if (len != sizeof(s->keys[0]) || s->nkeys == STP_SETUP_KEYS_MAX)
			return -EPROTO;
		memcpy(&s->keys[s->nkeys++], p, len);
		return 0;
	case ROLES:
		return decode_roles(s, p, len);
	default:
		return decode_number(at, f, p, len);
	}
}

int stp_setup_check_opts(const struct stp_mount_opts *o, char *err, size_t cap)
{
	struct stp_setup s = { .opts = *o };

	for (size_t i = 0; i < NFIELDS; i++) {
		const void *p;
		size_t n;

		if (fields[i].kind == STR && field_bytes(&s, &fields[i], &p, &n) &&
		    n > STP_SETUP_STR_MAX) {
			snprintf(err, cap, "%s: %zu bytes, more than the %u the mount can hand "
				 "over (a shorter path?)", fields[i].name, n, STP_SETUP_STR_MAX);
			return -ENAMETOOLONG;
		}
	}
	return 0;
}

int stp_setup_decode(const uint8_t *buf, size_t len, struct stp_setup *s)
{
	bool seen[NFIELDS] = { false };
	size_t at = 0;

	while (at < len) {
		uint32_t head[2];
		int err;

		if (len - at < sizeof(head))
			return -EPROTO;
		memcpy(head, buf + at, sizeof(head));
		at += sizeof(head);
		if (!head[0] || head[0] > NFIELDS || head[1] > len - at)
			return -EPROTO;
		if (seen[head[0] - 1] && fields[head[0] - 1].kind != KEY)
			return -EPROTO;
		seen[head[0] - 1] = true;
		err = decode_field(s, &fields[head[0] - 1], buf + at, head[1]);
		if (err)
			return err;
		at += head[1];
	}
	return 0;
}

int stp_setup_send(int fd, const struct stp_setup *s, const int *fds)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	size_t len;
	int err = buf ? stp_setup_encode(s, buf, STP_MSG_MAX, &len) : -ENOMEM;

	if (!err)
		err = stp_msg_send_fds(fd, STP_MSG_SETUP, buf, len, fds, s->nroles);
	free(buf);
	return err;
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int stp_setup_recv(int fd, int64_t deadline_ns, struct stp_setup *s, int *fds)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	unsigned nfds = 0;
	uint32_t type;
	size_t len;
	int err;

	stp_setup_init(s);
	if (!buf)
		return -ENOMEM;
	err = stp_msg_recv_fds(fd, deadline_ns, &type, buf, STP_MSG_MAX, &len, fds,
			       STP_SETUP_FDS_MAX, &nfds);
	if (!err && type != STP_MSG_SETUP)
		err = -EPROTO;
	if (!err)
		err = stp_setup_decode(buf, len, s);
	if (!err && nfds != s->nroles)
		err = -EPROTO;
	if (err) {
		close_fds(fds, nfds);
		stp_setup_free(s);
	}
	free(buf);
	return err;
}

int stp_setup_send_sandbox(int fd, enum stp_sandbox_mode mode)
{
	uint32_t v = (uint32_t)mode;

	return stp_msg_send(fd, STP_MSG_SANDBOX, &v, sizeof(v));
}

int stp_setup_decode_sandbox(const uint8_t *buf, size_t len, enum stp_sandbox_mode *mode)
{
	uint32_t v;

	if (len != sizeof(v))
		return -EPROTO;
	memcpy(&v, buf, sizeof(v));
	if (v != STP_SANDBOX_ON && v != STP_SANDBOX_LOG && v != STP_SANDBOX_OFF)
		return -EPROTO;
	*mode = (enum stp_sandbox_mode)v;
	return 0;
}

int stp_setup_recv_sandbox(int fd, int64_t deadline_ns, enum stp_sandbox_mode *mode)
{
	uint8_t buf[16]; /* anything longer is cut, and refused */
	uint32_t type;
	size_t len;
	int err = stp_msg_recv(fd, deadline_ns, &type, buf, sizeof(buf), &len);

	if (!err && type != STP_MSG_SANDBOX)
		err = -EPROTO;
	return err ? err : stp_setup_decode_sandbox(buf, len, mode);
}

int stp_setup_send_filter(int fd, const struct stp_sandbox_prog *prog)
{
	return stp_msg_send(fd, STP_MSG_FILTER, prog->insns, prog->n * sizeof(*prog->insns));
}

int stp_setup_decode_filter(const uint8_t *buf, size_t len, struct stp_sandbox_prog *prog)
{
	size_t n = len / sizeof(*prog->insns);

	*prog = (struct stp_sandbox_prog){ 0 };
	if (!n || n > STP_SANDBOX_PROG_MAX || len % sizeof(*prog->insns))
		return -EPROTO;
	prog->insns = malloc(len);
	if (!prog->insns)
		return -ENOMEM;
	memcpy(prog->insns, buf, len);
	prog->n = (uint32_t)n;
	return 0;
}

int stp_setup_recv_filter(int fd, int64_t deadline_ns, struct stp_sandbox_prog *prog)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	uint32_t type;
	size_t len;
	int err = buf ? stp_msg_recv(fd, deadline_ns, &type, buf, STP_MSG_MAX, &len) : -ENOMEM;

	*prog = (struct stp_sandbox_prog){ 0 };
	if (!err && type != STP_MSG_FILTER)
		err = -EPROTO;
	if (!err)
		err = stp_setup_decode_filter(buf, len, prog);
	free(buf);
	return err;
}

int stp_setup_fd(const struct stp_setup *s, const int *fds, enum stp_fd_role role)
{
	for (uint32_t i = 0; i < s->nroles; i++)
		if (s->roles[i] == (uint32_t)role)
			return fds[i];
	return -1;
}

bool stp_setup_is_socket(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return !getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) && type == SOCK_SEQPACKET;
}

void stp_setup_add_fd(struct stp_setup *s, int *fds, int fd, enum stp_fd_role role)
{
	if (fd < 0 || s->nroles == STP_SETUP_FDS_MAX)
		return;
	fds[s->nroles] = fd;
	s->roles[s->nroles++] = (uint32_t)role;
}
