/* SPDX-License-Identifier: MIT */
/* Failed reads: counted, and logged to syslog with a rate limit. */
#include "readfail.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"
#include "imgsrc.h"
#include "image.h"
#include "log.h"
#include "treewalk.h"
#include "util.h"

#define LINE_MAX_BYTES 1024           /* what syslog daemons take from a datagram at least */
#define FACILITY_DAEMON (3 << 3)
#define SEVERITY_ERR 3

struct stp_readfail {
	int fd;                           /* connected to the socket, or -1 */
	pthread_mutex_t lock;
	/* protected by lock */
	uint64_t begin_ns;                /* the rate limit's interval began then */
	unsigned printed;                 /* lines let through in it */
	uint64_t missed;                  /* held back since the last line let through */
	uint32_t path_ino;                /* the last path found, for a file read again */
	char path[PATH_MAX];
	struct stp_readfail_stats st;
};

int stp_readfail_open(const char *socket_path, struct stp_readfail **out)
{
	struct stp_readfail *rf = calloc(1, sizeof(*rf));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	*out = NULL;
	if (!rf)
		return -ENOMEM;
	rf->fd = -1;
	rf->path_ino = UINT32_MAX;
	pthread_mutex_init(&rf->lock, NULL);
	tzset(); /* the time zone, read now: the sandbox has no /etc/localtime */
	if (strlen(socket_path) < sizeof(sa.sun_path)) {
		strcpy(sa.sun_path, socket_path);
		/* non-blocking: a listener that falls behind loses lines, never a read */
		rf->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (rf->fd >= 0 && connect(rf->fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(rf->fd);
			rf->fd = -1;
		}
	}
	*out = rf;
	return 0;
}

int stp_readfail_fd(const struct stp_readfail *rf)
{
	return rf ? rf->fd : -1;
}

void stp_readfail_close(struct stp_readfail *rf)
{
	if (!rf)
		return;
	if (rf->fd >= 0)
		close(rf->fd);
	pthread_mutex_destroy(&rf->lock);
	free(rf);
}

/* Lock held. As the kernel's ___ratelimit: 1 when a line may go out now. */
static int let_through(struct stp_readfail *rf)
{
	uint64_t now = stp_now_ns();

	if (!rf->begin_ns || now - rf->begin_ns >= STP_READFAIL_INTERVAL_S * 1000000000ull) {
		rf->begin_ns = now;
		rf->printed = 0;
	}
	if (rf->printed < STP_READFAIL_BURST) {
		rf->printed++;
		return 1;
	}
	rf->missed++;
	rf->st.suppressed++;
	return 0;
}

/* Lock held. Sends MSG as one RFC 3164 line (as glibc's syslog() writes to /dev/log),
 * escaped: it carries names from the image. */
static void send_line(struct stp_readfail *rf, const char *msg)
{
	char line[LINE_MAX_BYTES], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	FILE *f;
	int n;

	if (rf->fd < 0 || !localtime_r(&now, &tm) ||
	    !strftime(stamp, sizeof(stamp), "%b %e %T", &tm)) {
		rf->st.unsent++;
		return;
	}
	n = snprintf(line, sizeof(line), "<%d>%s stipple[%d]: ", FACILITY_DAEMON | SEVERITY_ERR,
		     stamp, (int)getpid());
	f = n > 0 && (size_t)n < sizeof(line) ? fmemopen(line + n, sizeof(line) - (size_t)n, "w")
					     : NULL;
	if (!f) {
		rf->st.unsent++;
		return;
	}
	setvbuf(f, NULL, _IONBF, 0);
	stp_escape_put(f, msg, strlen(msg));
	n += (int)ftell(f);
	fclose(f);
	if (write(rf->fd, line, (size_t)n) != n)
		rf->st.unsent++;
}

/* The tree entries a path search looks at before it gives up and names the inode: a
 * failing read waits for it, and the tree of a hostile image may be large. */
#define PATH_WALK_MAX 100000u

struct path_find {
	uint32_t ino;
	char *out;
	unsigned seen;
	int found;
};

static int path_found(void *ctx, const struct stp_tree_entry *e)
{
	struct path_find *pf = ctx;

	if (++pf->seen > PATH_WALK_MAX)
		return -ECANCELED; /* gives up: the inode is named instead */
	if (e->ino != pf->ino)
		return 0;
	snprintf(pf->out, PATH_MAX, "%s", e->rooted);
	pf->found = 1;
	return -ECANCELED; /* ends the walk */
}

/* No lock held: the path of image inode INO (its first name) into OUT (PATH_MAX bytes),
 * or a stand-in. The last path found is kept, for a file that fails again. */
static void path_of(struct stp_readfail *rf, const struct stp_image *img, uint32_t ino,
		    char *out)
{
	struct path_find pf = { ino, out, 0, 0 };
	int cached;

	pthread_mutex_lock(&rf->lock);
	cached = rf->path_ino == ino;
	if (cached)
		memcpy(out, rf->path, PATH_MAX);
	pthread_mutex_unlock(&rf->lock);
	if (cached)
		return;
	/* An image read over the network may need it for the walk's metadata pages: the
	 * very thing that just failed, each try up to timeout=. */
	if (!stp_imgsrc_is_url(stp_image_path(img)))
		stp_treewalk_tree(img, path_found, &pf);
	if (!pf.found) {
		snprintf(out, PATH_MAX, "inode %u", ino);
		return;
	}
	pthread_mutex_lock(&rf->lock);
	rf->path_ino = ino;
	memcpy(rf->path, out, PATH_MAX);
	pthread_mutex_unlock(&rf->lock);
}

/* Lock held: hands MSG to both outlets. */
static void emit(struct stp_readfail *rf, const char *msg)
{
	rf->st.logged++;
	send_line(rf, msg);
	stp_log(STP_LOG_ERR, "%s", msg);
}

#define CAUSE_MAX 320u

/* This thread's source failure, for its next note ("" when none). */
static __thread char cause[CAUSE_MAX];

void stp_readfail_set_cause(const char *why)
{
	snprintf(cause, sizeof(cause), "%s", why ? why : "");
}

/* The rate limit is decided before the path is looked for, and the search holds no
 * lock: a read that fails waits for its own search only, and one held back for nothing
 * but the counting. */
void stp_readfail_note(struct stp_readfail *rf, const struct stp_image *img, uint32_t ino,
		       uint64_t off, size_t len, int err, uint64_t block)
{
	char msg[PATH_MAX + 512 + CAUSE_MAX], where[48] = "", path[PATH_MAX], why[CAUSE_MAX + 4] = "";
	uint64_t missed;
	int go;

	if (cause[0])
		snprintf(why, sizeof(why), " (%s)", cause);
	cause[0] = '\0';
	if (!rf)
		return;
	pthread_mutex_lock(&rf->lock);
	rf->st.failures++;
	go = let_through(rf);
	missed = go ? rf->missed : 0;
	if (go)
		rf->missed = 0;
	pthread_mutex_unlock(&rf->lock);
	if (!go)
		return;
	path_of(rf, img, ino, path);
	if (block != UINT64_MAX)
		snprintf(where, sizeof(where), "block %llu: ", (unsigned long long)block);
	pthread_mutex_lock(&rf->lock);
	if (missed) {
		snprintf(msg, sizeof(msg), "%s: %llu messages suppressed", stp_image_path(img),
			 (unsigned long long)missed);
		emit(rf, msg);
	}
	snprintf(msg, sizeof(msg), "%s: read of %s failed (%zu bytes at offset %llu): %s%s%s",
		 stp_image_path(img), path, len, (unsigned long long)off, where,
		 stp_strerror(err), why);
	emit(rf, msg);
	pthread_mutex_unlock(&rf->lock);
}

void stp_readfail_stats(struct stp_readfail *rf, struct stp_readfail_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!rf)
		return;
	pthread_mutex_lock(&rf->lock);
	*out = rf->st;
	pthread_mutex_unlock(&rf->lock);
}
