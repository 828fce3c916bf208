/* SPDX-License-Identifier: MIT */
/* What the monitor prints of the daemon's messages before the mount is live
 * (mounthelper/mount/montalk.c, monlog.c): the daemon's chatter is bounded, each line
 * cut to what is left, and its reason for failing is printed whatever came before. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monproto.h"
#include "montalk.h"
#include "mountopts.h"
#include "util.h"

#include "check.h"

#define REASON "stipple-mountd: the reason the mount failed"

static char out[256 << 10];
static size_t out_len;

/* Sends the daemon's side: COUNT LOG lines of LEN bytes, then FAILED with REASON; then
 * runs the monitor's side with stderr captured in OUT. Returns what wait_live did. */
static int converse(unsigned count, size_t len)
{
	static uint8_t buf[STP_MSG_MAX];
	struct stp_mount_opts o = { .image = "img" };
	char *line = malloc(len);
	int sv[2], saved = dup(2), rc;
	FILE *f = tmpfile();

	CHECK(line && f && saved >= 0);
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	memset(line, 'x', len);
	for (unsigned i = 0; i < count; i++)
		CHECK(!stp_msg_send(sv[1], STP_MSG_LOG, line, len));
	CHECK(!stp_msg_send_failed(sv[1], -EPERM, REASON));
	fflush(stderr);
	dup2(fileno(f), 2);
	rc = stp_montalk_wait_live(sv[0], (int64_t)stp_now_ns() + 5000000000ll, "prog", &o, buf);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	out_len = fread(out, 1, sizeof(out) - 1, f);
	out[out_len] = '\0';
	fclose(f);
	close(sv[0]);
	close(sv[1]);
	free(line);
	return rc;
}

/* Each case runs in a child: the budgets are the process's, spent once. */
static void in_child(void (*fn)(void))
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		fn();
		_exit(failures ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void chatter_then_failure(void)
{
	int rc = converse(40, 1000); /* 40 KB of chatter, past the 16 KiB budget */

	CHECK(rc == -EPERM, "%d", rc);
	CHECK(strstr(out, REASON "\n") != NULL, "the reason is lost: %zu bytes said", out_len);
	CHECK(out_len <= (16u << 10) + 100 + sizeof(REASON), "%zu", out_len);
}

static void one_huge_line_is_cut(void)
{
	int rc = converse(1, STP_MSG_MAX - 64);

	CHECK(rc == -EPERM, "%d", rc);
	CHECK(strstr(out, "x...\n") != NULL);
	CHECK(strstr(out, REASON "\n") != NULL);
	CHECK(out_len <= (16u << 10) + 100 + sizeof(REASON), "%zu bytes said", out_len);
}

static void test_chatter_then_failure(void) { in_child(chatter_then_failure); }
static void test_one_huge_line_is_cut(void) { in_child(one_huge_line_is_cut); }

int main(void)
{
	RUN(test_chatter_then_failure);
	RUN(test_one_huge_line_is_cut);
	return tap_done();
}
