/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int stp_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int stp_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end) {
		const char *u = strchr(units, toupper((unsigned char)*end));

		if (!u)
			return -EINVAL;
		shift = 10u * (unsigned)(u - units + 1);
		end++;
		if (*end && strcasecmp(end, "iB") && strcasecmp(end, "B"))
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int stp_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Writes all LEN bytes at OFF when AT_OFF, else at the file position. */
static int write_all(int fd, const char *p, size_t len, uint64_t off, int at_off)
{
	while (len) {
		ssize_t n = at_off ? pwrite(fd, p, len, (off_t)off) : write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int stp_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return write_all(fd, buf, len, off, 1);
}

int stp_write_full(int fd, const void *buf, size_t len)
{
	return write_all(fd, buf, len, 0, 0);
}

const char *stp_human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

const char *stp_strerror(int err)
{
	const char *desc;

	if (err == -EUCLEAN || err == EUCLEAN)
		return "damaged image";
	if (err == -EPROTONOSUPPORT || err == EPROTONOSUPPORT)
		return "unsupported format version or feature";
	desc = strerrordesc_np(err < 0 ? -err : err);
	return desc ? desc : "unknown error";
}

int stp_fill_stdio(void)
{
	int fd;

	do
		fd = open("/dev/null", O_RDWR | O_NOCTTY);
	while (fd >= 0 && fd <= 2);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

uint64_t stp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int stp_thread_create_blocked(pthread_t *thread, size_t stack, void *(*fn)(void *),
			      void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc = pthread_attr_init(&attr);

	if (!rc && stack)
		rc = pthread_attr_setstacksize(&attr, stack);
	if (!rc) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(thread, &attr, fn, arg);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	return -rc;
}

enum stp_path_part stp_path_next(const char **path, const char **name, size_t *len)
{
	const char *p = *path;

	for (;;) {
		const char *end;

		while (*p == '/')
			p++;
		if (!*p) {
			*path = p;
			return STP_PATH_END;
		}
		end = strchrnul(p, '/');
		*name = p;
		*len = (size_t)(end - p);
		*path = end;
		if (*len == 1 && p[0] == '.') {
			p = end;
			continue;
		}
		return *len == 2 && p[0] == '.' && p[1] == '.' ? STP_PATH_PARENT : STP_PATH_NAME;
	}
}

int stp_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int stp_sync_parent_dir(const char *path)
{
	char *dir = strdup(path), *slash;
	int fd, rc = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else
		slash[slash == dir] = '\0'; /* "/x" keeps "/" */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (fsync(fd) && errno != EINVAL && errno != EROFS))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

int stp_room_for(void *v, size_t *cap, size_t n, size_t size)
{
	size_t want = *cap ? 2 * *cap : 1024;
	void *grown;

	if (n < *cap)
		return 0;
	grown = reallocarray(*(void **)v, want, size);
	if (!grown)
		return -ENOMEM;
	*(void **)v = grown;
	*cap = want;
	return 0;
}

int stp_room_for_n(void *v, size_t *cap, size_t used, size_t more, size_t max)
{
	size_t want = *cap ? *cap : 1024;
	void *grown;

	if (more <= *cap - used)
		return 0;
	if (used > max || more > max - used)
		return -ENOMEM;
	while (want - used < more)
		want = want > max / 2 ? max : 2 * want;
	if (want > max)
		want = max; /* a first size past MAX */
	grown = realloc(*(void **)v, want);
	if (!grown)
		return -ENOMEM;
	*(void **)v = grown;
	*cap = want;
	return 0;
}

/* The architectures whose fstat call fills glibc's struct stat as it is (glibc before 2.33
 * made that call there); stp_syscalls_fstat_pathless names the same ones. */
#if defined(SYS_fstat) && ((defined(__x86_64__) && defined(__LP64__)) || defined(__aarch64__) || \
			   defined(__powerpc64__) || defined(__s390x__) ||                      \
			   (defined(__riscv) && __riscv_xlen == 64))
#define STP_PATHLESS_FSTAT 1
#endif

int stp_fd_stat(int fd, struct stat *st)
{
#ifdef STP_PATHLESS_FSTAT
	return syscall(SYS_fstat, fd, st) ? -errno : 0;
#else
	return fstat(fd, st) ? -errno : 0;
#endif
}

/* Without /proc: PATH opened by name, and kept only if it is still the node PFD holds. */
static int open_again(const char *path, int flags, int pfd)
{
	struct stat a, b;
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(pfd, &a) || fstat(fd, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int stp_reopen(int pfd, int flags)
{
	char proc[32];
	int fd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	if ((fd = open(proc, flags | O_CLOEXEC)) >= 0)
		return fd;
	return errno == ENOENT && access("/proc/self/fd", F_OK) ? -ENOSYS : -errno;
}

int stp_open_if(const char *path, int flags, int (*ok)(const char *path, const struct stat *st))
{
	struct stat st;
	int pfd = open(path, O_PATH | O_CLOEXEC), fd;

	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st))
		fd = -errno;
	else if (!ok(path, &st))
		fd = -EINVAL;
	else if ((fd = stp_reopen(pfd, flags)) == -ENOSYS)
		fd = open_again(path, flags, pfd);
	close(pfd);
	return fd;
}

int stp_node_is_image(const char *path, const struct stat *st)
{
	(void)path;
	return S_ISREG(st->st_mode) || S_ISBLK(st->st_mode);
}

int stp_node_is_regular(const char *path, const struct stat *st)
{
	(void)path;
	return S_ISREG(st->st_mode);
}
