/* SPDX-License-Identifier: MIT */
/* The monitor's hand-over (mounthelper/mount/setup.c): fields as the header says, read
 * back from bytes written here by hand, and each refusal. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "monproto.h"
#include "setup.h"

#include "check.h"

/* Tags are positions in setup.c's table: the ones used here. */
enum { T_PROG = 1, T_IMAGE = 2, T_WARM = 14, T_SANDBOX = 16, T_FOREGROUND = 23,
       T_MEM = 27, T_KEY = 32, T_ROLES = 33, T_SANDBOX_IDS = 34, T_SANDBOX_UID = 35,
       T_SANDBOX_GID = 36, T_LAST = 36 };

static uint8_t buf[8192];
static size_t len;

static void field(uint32_t tag, const void *p, uint32_t n)
{
	memcpy(buf + len, &tag, 4);
	memcpy(buf + len + 4, &n, 4);
	memcpy(buf + len + 8, p, n);
	len += 8 + n;
}

static void u32(uint32_t tag, uint32_t v) { field(tag, &v, 4); }

static int decode(struct stp_setup *s)
{
	stp_setup_init(s);
	return stp_setup_decode(buf, len, s);
}

static void test_fields_read_back(void)
{
	static struct stp_setup s;
	uint8_t key[64], flag = 1;
	uint64_t mem = 3ull << 30;
	uint32_t roles[3] = { STP_FD_FUSE, STP_FD_CHAN, STP_FD_RECORD_DONE };

	len = 0;
	memset(key, 7, sizeof(key));
	field(T_PROG, "mount.stipple", 13);
	field(T_IMAGE, "", 0);
	u32(T_WARM, 3);
	field(T_FOREGROUND, &flag, 1);
	field(T_MEM, &mem, 8);
	field(T_KEY, key, 64);
	field(T_KEY, key, 64);
	field(T_ROLES, roles, sizeof(roles));
	field(T_SANDBOX_IDS, &flag, 1);
	u32(T_SANDBOX_UID, 65534);
	u32(T_SANDBOX_GID, 65533);
	CHECK(decode(&s) == 0);
	CHECK(s.prog && !strcmp(s.prog, "mount.stipple"));
	CHECK(s.opts.image && !strcmp(s.opts.image, ""), "an empty string is there");
	CHECK(!s.opts.mountpoint, "a field left out stays NULL");
	CHECK(s.opts.warm_workers == 3 && s.opts.foreground && s.mem_limit == mem);
	CHECK(s.nkeys == 2 && s.keys[1].raw[0] == 7 && s.keys[1].id[31] == 7);
	CHECK(s.nroles == 3 && s.roles[1] == STP_FD_CHAN && s.roles[2] == STP_FD_RECORD_DONE);
	CHECK(s.sandbox_ids && s.sandbox_uid == 65534 && s.sandbox_gid == 65533,
	      "the sandbox user's ids, looked up by the monitor");
	stp_setup_free(&s);
}

/* Whether the bytes written so far are refused with -EPROTO; starts over. */
static int refused(void)
{
	static struct stp_setup s;
	int rc = decode(&s);

	stp_setup_free(&s);
	len = 0;
	return rc == -EPROTO;
}

static void test_refusals(void)
{
	uint8_t two = 2, key[64] = { 0 };
	uint32_t role = STP_FD_RECORD_DONE + 1;

	len = 0;
	u32(T_WARM, 1);
	u32(T_WARM, 2);
	CHECK(refused(), "a field given twice");
	u32(T_LAST + 1, 0);
	CHECK(refused(), "an unknown tag");
	field(T_WARM, &two, 1);
	CHECK(refused(), "a number of the wrong size");
	u32(T_SANDBOX, 3);
	CHECK(refused(), "a sandbox mode past off");
	field(T_FOREGROUND, &two, 1);
	CHECK(refused(), "a flag that is neither 0 nor 1");
	field(T_PROG, "a\0b", 3);
	CHECK(refused(), "a string with a NUL");
	field(T_ROLES, &role, 4);
	CHECK(refused(), "an unknown descriptor role");
	for (unsigned i = 0; i <= STP_SETUP_KEYS_MAX; i++)
		field(T_KEY, key, 64);
	CHECK(refused(), "more keys than the bound");
	u32(T_WARM, 1);
	len -= 2;
	CHECK(refused(), "a field cut short");
}

/* The descriptors arrive with the message, in the order of their roles. */
static void test_descriptors_travel(void)
{
	static struct stp_setup s, got;
	int sv[2], fds[STP_SETUP_FDS_MAX], pipefd[2];

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(pipe(pipefd) == 0);
	stp_setup_init(&s);
	s.prog = "test";
	stp_setup_add_fd(&s, fds, pipefd[0], STP_FD_IMAGE);
	stp_setup_add_fd(&s, fds, -1, STP_FD_RECORD);
	stp_setup_add_fd(&s, fds, pipefd[1], STP_FD_CACHE);
	CHECK(s.nroles == 2, "a negative descriptor is not sent");
	CHECK(stp_setup_send(sv[0], &s, fds) == 0);
	CHECK(stp_setup_recv(sv[1], 0, &got, fds) == 0);
	CHECK(got.nroles == 2 && !strcmp(got.prog, "test"));
	CHECK(write(stp_setup_fd(&got, fds, STP_FD_CACHE), "x", 1) == 1);
	char c = 0;
	CHECK(read(stp_setup_fd(&got, fds, STP_FD_IMAGE), &c, 1) == 1 && c == 'x');
	CHECK(stp_setup_fd(&got, fds, STP_FD_FUSE) == -1);
	CHECK(stp_setup_is_socket(sv[1]) && !stp_setup_is_socket(pipefd[0]));
	stp_setup_free(&got);
	stp_msg_send(sv[0], STP_MSG_LOG, "hi", 2);
	CHECK(stp_setup_recv(sv[1], 0, &got, fds) == -EPROTO, "another message");
	/* refused after a string was decoded: recv frees it, the caller has nothing to free */
	len = 0;
	field(T_PROG, "test", 4);
	u32(T_WARM, 1);
	u32(T_WARM, 2);
	CHECK(stp_msg_send(sv[0], STP_MSG_SETUP, buf, len) == 0);
	CHECK(stp_setup_recv(sv[1], 0, &got, fds) == -EPROTO, "a field given twice");
	CHECK(got.prog == NULL, "a refused setup leaves no string behind");
	close(sv[0]);
	close(sv[1]);
}

/* SANDBOX, before the SETUP: each mode travels; a wrong length, an unknown mode, another
 * message or a descriptor attached is refused. */
static void test_sandbox_mode(void)
{
	const enum stp_sandbox_mode modes[] = { STP_SANDBOX_ON, STP_SANDBOX_LOG, STP_SANDBOX_OFF };
	enum stp_sandbox_mode got;
	uint32_t bad = STP_SANDBOX_OFF + 1;
	int sv[2], pipefd[2];

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(pipe(pipefd) == 0);
	for (unsigned i = 0; i < 3; i++) {
		CHECK(stp_setup_send_sandbox(sv[0], modes[i]) == 0);
		CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == 0 && got == modes[i]);
	}
	CHECK(stp_msg_send(sv[0], STP_MSG_SANDBOX, &bad, 4) == 0);
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -EPROTO, "an unknown mode");
	CHECK(stp_msg_send(sv[0], STP_MSG_SANDBOX, "\0\0\0\0\0", 5) == 0);
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -EPROTO, "five bytes");
	CHECK(stp_msg_send(sv[0], STP_MSG_SANDBOX, buf, 64) == 0);
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -EPROTO, "a long datagram, cut");
	CHECK(stp_msg_send(sv[0], STP_MSG_SETUP, "\0\0\0\0", 4) == 0);
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -EPROTO, "a SETUP first");
	CHECK(stp_msg_send_fds(sv[0], STP_MSG_SANDBOX, "\0\0\0\0", 4, pipefd, 1) == 0);
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -EPROTO, "a descriptor attached");
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -ETIMEDOUT, "nothing queued");
	close(sv[0]);
	CHECK(stp_setup_recv_sandbox(sv[1], 0, &got) == -EPIPE, "the monitor gone");
	close(sv[1]);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* FILTER: a program travels whole and byte for byte; no instruction, a part of one, more
 * than the kernel loads, another message or a descriptor attached is refused, and a
 * refusal leaves no program. The peek sees a FILTER and leaves it queued. */
static void test_filter(void)
{
	static struct sock_filter insns[STP_SANDBOX_PROG_MAX + 1];
	struct stp_sandbox_prog sent = { 3, insns }, got;
	int sv[2], pipefd[2];
	uint32_t type = 0;

	for (unsigned i = 0; i <= STP_SANDBOX_PROG_MAX; i++)
		insns[i] = (struct sock_filter){ (uint16_t)i, 1, 2, 0x7fff0000u + i };
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(pipe(pipefd) == 0);
	CHECK(stp_setup_send_filter(sv[0], &sent) == 0);
	CHECK(stp_msg_peek_type(sv[1], 0, &type) == 0 && type == STP_MSG_FILTER);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == 0 && got.n == 3 &&
	      !memcmp(got.insns, insns, 3 * sizeof(*insns)), "three instructions travel");
	stp_sandbox_prog_free(&got);
	CHECK(got.n == 0 && got.insns == NULL);
	sent.n = STP_SANDBOX_PROG_MAX;
	CHECK(stp_setup_send_filter(sv[0], &sent) == 0);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == 0 && got.n == STP_SANDBOX_PROG_MAX &&
	      !memcmp(got.insns, insns, sizeof(insns) - sizeof(*insns)), "the longest travels");
	stp_sandbox_prog_free(&got);
	sent.n = STP_SANDBOX_PROG_MAX + 1;
	CHECK(stp_setup_send_filter(sv[0], &sent) == 0);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -EPROTO && !got.insns, "one more");
	CHECK(stp_msg_send(sv[0], STP_MSG_FILTER, NULL, 0) == 0);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -EPROTO, "no instruction");
	CHECK(stp_msg_send(sv[0], STP_MSG_FILTER, insns, 12) == 0);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -EPROTO, "an instruction and a half");
	CHECK(stp_msg_send(sv[0], STP_MSG_SETUP, insns, 8) == 0);
	CHECK(stp_msg_peek_type(sv[1], 0, &type) == 0 && type == STP_MSG_SETUP);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -EPROTO, "a SETUP instead");
	CHECK(stp_msg_send_fds(sv[0], STP_MSG_FILTER, insns, 8, pipefd, 1) == 0);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -EPROTO, "a descriptor attached");
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -ETIMEDOUT, "nothing queued");
	CHECK(stp_msg_peek_type(sv[1], 0, &type) == -ETIMEDOUT, "nothing to peek");
	close(sv[0]);
	CHECK(stp_setup_recv_filter(sv[1], 0, &got) == -EPIPE, "the monitor gone");
	CHECK(stp_msg_peek_type(sv[1], 0, &type) == -EPIPE);
	close(sv[1]);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* The encoder takes what the decoder takes: a string of STP_SETUP_STR_MAX bytes
 * travels, one byte more is refused before anything is sent, and named beforehand. */
static void test_long_string_refused_early(void)
{
	static struct stp_setup s, got;
	static uint8_t out[3 * STP_SETUP_STR_MAX];
	static char opts[STP_SETUP_STR_MAX + 2];
	char err[256] = "";
	size_t n;

	stp_setup_init(&s);
	memset(opts, 'o', STP_SETUP_STR_MAX);
	s.opts.fuse_opts = opts;
	CHECK(stp_setup_encode(&s, out, sizeof(out), &n) == 0);
	stp_setup_init(&got);
	CHECK(stp_setup_decode(out, n, &got) == 0, "the longest string decodes");
	stp_setup_free(&got);
	CHECK(stp_setup_check_opts(&s.opts, err, sizeof(err)) == 0);
	opts[STP_SETUP_STR_MAX] = 'o';
	CHECK(stp_setup_encode(&s, out, sizeof(out), &n) == -ENAMETOOLONG,
	      "a string the decoder would refuse is not encoded");
	CHECK(stp_setup_check_opts(&s.opts, err, sizeof(err)) == -ENAMETOOLONG);
	CHECK(strstr(err, "fuse_opts") && strstr(err, "4097"), "%s", err);
}

/* A sender's setup carries the options and PROG it was made from, and no descriptor or
 * cache file of its own: the decoder sees no cache until one is attached. */
static void test_new_setup_carries_the_options(void)
{
	static struct stp_mount_opts o;
	static struct stp_setup got;
	static uint8_t out[8192];
	char image[] = "/srv/a.stp";
	struct stp_setup *s;
	size_t n;

	o.image = image;
	o.warm_workers = 5;
	s = stp_setup_new(&o, "mount.stipple");
	CHECK(s != NULL);
	CHECK(s->opts.image == image, "the strings stay the caller's");
	CHECK(s->nroles == 0 && s->nkeys == 0 && s->cache.fd == -1);
	CHECK(stp_setup_encode(s, out, sizeof(out), &n) == 0);
	stp_setup_init(&got);
	CHECK(stp_setup_decode(out, n, &got) == 0);
	CHECK(!strcmp(got.prog, "mount.stipple") && !strcmp(got.opts.image, image));
	CHECK(got.opts.warm_workers == 5 && got.nroles == 0);
	stp_setup_free(&got);
	stp_setup_discard(s);
	CHECK(!strcmp(image, "/srv/a.stp"), "discarding leaves the borrowed strings");
}

int main(void)
{
	RUN(test_fields_read_back);
	RUN(test_refusals);
	RUN(test_descriptors_travel);
	RUN(test_long_string_refused_early);
	RUN(test_new_setup_carries_the_options);
	RUN(test_sandbox_mode);
	RUN(test_filter);
	return tap_done();
}
