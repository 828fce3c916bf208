/* SPDX-License-Identifier: MIT */
/*
 * What exec'ing a program costs over a bare fork: rounds of a vfork child that only
 * exits, and of one that execs PROG ARGS (stdout and stderr to /dev/null), interleaved,
 * each waited for. Prints the medians of wall time per spawn (CLOCK_MONOTONIC) and of
 * the CPU time the child used (RUSAGE_CHILDREN), and the differences: what the exec,
 * the dynamic loader, the relocations and the program's start add.
 *
 *   exec_cost [-n ROUNDS] PROG [ARG...]
 * e.g. exec_cost -n 400 build/mounthelper/stipple-mountd --version
 * Built by meson (ninja -C build tests/bench/exec_cost); tests/bench/NOTES.md has figures.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double children_cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
	       ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* One spawn: ARGV exec'd, or (NULL) a child that exits at once. Wall and CPU in us, and
 * how long the parent was suspended (vfork returns in it once the child has exec'd or
 * exited: what a spawn costs a parent that goes on working meanwhile). */
static int spawn(char **argv, double *wall, double *cpu, double *held)
{
	double cpu0 = children_cpu_us(), t0 = now_us();
	int status;
	pid_t pid = vfork();

	if (pid == 0) {
		if (argv)
			execv(argv[0], argv);
		_exit(argv ? 127 : 0);
	}
	*held = now_us() - t0;
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	*wall = now_us() - t0;
	*cpu = children_cpu_us() - cpu0;
	return WIFEXITED(status) && WEXITSTATUS(status) != 127 ? 0 : -1;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int rounds = 200, first = 1, null = open("/dev/null", O_WRONLY);
	double *w[2], *c[2], *h[2], mw[2], mc[2], mh[2];

	if (argc > 3 && !strcmp(argv[1], "-n")) {
		rounds = atoi(argv[2]);
		first = 3;
	}
	if (first >= argc || rounds < 1 || null < 0) {
		fprintf(stderr, "usage: exec_cost [-n ROUNDS] PROG [ARG...]\n");
		return 2;
	}
	dup2(null, 1);
	for (int k = 0; k < 2; k++) {
		w[k] = calloc((size_t)rounds, sizeof(double));
		c[k] = calloc((size_t)rounds, sizeof(double));
		h[k] = calloc((size_t)rounds, sizeof(double));
		if (!w[k] || !c[k] || !h[k])
			return 1;
	}
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 2; i++) {
			int k = (r + i) % 2; /* each kind goes first every other round */

			if (spawn(k ? argv + first : NULL, &w[k][r], &c[k][r], &h[k][r])) {
				fprintf(stderr, "exec_cost: %s failed\n", argv[first]);
				return 1;
			}
		}
	for (int k = 0; k < 2; k++) {
		mw[k] = median(w[k], rounds);
		mc[k] = median(c[k], rounds);
		mh[k] = median(h[k], rounds);
	}
	fprintf(stderr, "%d interleaved rounds, medians\n"
		"  vfork + _exit:  wall %7.0f us, child CPU %7.0f us, parent held %5.0f us\n"
		"  vfork + exec:   wall %7.0f us, child CPU %7.0f us, parent held %5.0f us (%s)\n"
		"  the exec adds:  wall %7.0f us, CPU %7.0f us, parent held %5.0f us\n",
		rounds, mw[0], mc[0], mh[0], mw[1], mc[1], mh[1], argv[first],
		mw[1] - mw[0], mc[1] - mc[0], mh[1] - mh[0]);
	return 0;
}
