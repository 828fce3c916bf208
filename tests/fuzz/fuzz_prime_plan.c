/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: both halves of the priming plan (mounthelper/mount/prime.c) on an image
 * opened from arbitrary bytes. The daemon's half lists the looked-up names (the lookup
 * table's) and the hot files and sends them on a
 * socket pair, as it does to the monitor; a second thread receives them as the monitor
 * does (stp_msg_recv, stp_prime_list_add), which must accept everything the daemon sends:
 * a well-formed plan of relative paths, each naming a hot regular file or a looked-up
 * name of the image.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "image.h"
#include "log.h"
#include "monproto.h"
#include "prime.h"
#include "util.h"

/* The lookups' half is not driven here: nothing may confine itself. */
int stp_sandbox_confine_lookups(enum stp_sandbox_mode mode, const struct stp_sandbox_prog *prog,
				void (*start)(void *arg), void *arg, char *err, size_t errlen)
{
	abort();
}

struct receiver {
	int fd;
	int ended;
	int err;
	struct stp_prime_list *list;
};

static void *receive(void *arg)
{
	struct receiver *r = arg;
	uint8_t *buf = malloc(STP_MSG_MAX);
	int64_t deadline = (int64_t)stp_now_ns() + 60000000000ll;

	FUZZ_ASSERT(buf);
	for (;;) {
		uint32_t type;
		size_t len;
		int rc = stp_msg_recv(r->fd, deadline, &type, buf, STP_MSG_MAX, &len);

		if (rc) {
			r->err = rc;
			break;
		}
		if (type == STP_MSG_PRIME_END) {
			r->ended = 1;
			break;
		}
		FUZZ_ASSERT(type == STP_MSG_PRIME);
		FUZZ_ASSERT(stp_prime_list_add(&r->list, buf, len) == 0);
	}
	free(buf);
	return NULL;
}

static void plan(const uint8_t *data, size_t size)
{
	struct receiver r = { 0 };
	struct stp_image *img;
	pthread_t t;
	int sv[2], rc;

	if (stp_image_open_fd(fuzz_image_fd(data, size), "fuzz", &img))
		return;
	FUZZ_ASSERT(!socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	r.fd = sv[1];
	FUZZ_ASSERT(!pthread_create(&t, NULL, receive, &r));
	rc = stp_prime_send_plan(img, sv[0]);
	FUZZ_ASSERT(rc == 0 || rc == -EUCLEAN || rc == -ENOMEM);
	close(sv[0]);
	pthread_join(t, NULL);
	FUZZ_ASSERT(r.ended && !r.err); /* PRIME_END comes even after damage */
	stp_prime_list_free(r.list);
	close(sv[1]);
	stp_image_close(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_as_given_and_resealed(data, size, plan);
	return 0;
}
