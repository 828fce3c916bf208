/* SPDX-License-Identifier: MIT */
/* The daemon's background threads and their scheduling (mounthelper/mount/bgsched.c): a
 * thread started under SCHED_FIFO or SCHED_RR runs one priority lower once it has
 * entered, or SCHED_OTHER from priority 1, and is named; its creator keeps its policy and
 * priority; a thread of any other policy keeps it. Read back from the kernel. Needs root
 * (or CAP_SYS_NICE) for the realtime policies: skipped without. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>

#include "bgsched.h"

#include "check.h"

struct seen {
	int rc;         /* stp_bgsched_enter's */
	int policy;     /* the thread's afterwards, SCHED_RESET_ON_FORK aside */
	int priority;   /* and its priority */
	char name[16];
};

static void *enter(void *arg)
{
	struct seen *s = arg;
	struct sched_param p = { 0 };

	s->rc = stp_bgsched_enter("stp-test");
	s->policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
	sched_getparam(0, &p);
	s->priority = p.sched_priority;
	prctl(PR_GET_NAME, s->name, 0, 0, 0);
	return NULL;
}

/* Runs enter() in a thread started while this thread has POLICY at PRIORITY, and puts
 * this thread back to SCHED_OTHER after. */
static struct seen started_under(int policy, int priority)
{
	struct sched_param p = { .sched_priority = priority }, normal = { 0 };
	struct seen s = { .rc = 1, .policy = -1 };
	pthread_t t;

	CHECK(!sched_setscheduler(0, policy, &p), "%s", strerror(errno));
	CHECK(!pthread_create(&t, NULL, enter, &s));
	pthread_join(t, NULL);
	CHECK((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == policy, "the creator's policy changed");
	CHECK(!sched_getparam(0, &p) && p.sched_priority == priority, "the creator's priority changed");
	sched_setscheduler(0, SCHED_OTHER, &normal);
	return s;
}

static void test_fifo_steps_down(void)
{
	struct seen s = started_under(SCHED_FIFO, 10);

	CHECK(s.rc == 0, "%d", s.rc);
	CHECK(s.policy == SCHED_FIFO && s.priority == 9, "policy %d, priority %d", s.policy,
	      s.priority);
	CHECK(!strcmp(s.name, "stp-test"), "named '%s'", s.name);
}

static void test_rr_steps_down(void)
{
	struct seen s = started_under(SCHED_RR, 5);

	CHECK(s.rc == 0 && s.policy == SCHED_RR && s.priority == 4, "rc %d, policy %d, priority %d",
	      s.rc, s.policy, s.priority);
}

/* priority 1 is the lowest realtime one: below it is the normal policy */
static void test_lowest_leaves_realtime(void)
{
	struct seen s = started_under(SCHED_FIFO, 1);

	CHECK(s.rc == 0 && s.policy == SCHED_OTHER, "rc %d, policy %d", s.rc, s.policy);
}

static void test_others_kept(void)
{
	static const int kept[] = { SCHED_BATCH, SCHED_IDLE, SCHED_OTHER };

	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		struct seen s = started_under(kept[i], 0);

		CHECK(s.rc == 0 && s.policy == kept[i], "policy %d became %d (rc %d)", kept[i],
		      s.policy, s.rc);
	}
}

int main(void)
{
	struct sched_param p = { .sched_priority = 1 }, normal = { 0 };

	if (sched_setscheduler(0, SCHED_FIFO, &p))
		return tap_skip_all("no realtime policy for this process (needs CAP_SYS_NICE)");
	sched_setscheduler(0, SCHED_OTHER, &normal);
	RUN(test_fifo_steps_down);
	RUN(test_rr_steps_down);
	RUN(test_lowest_leaves_realtime);
	RUN(test_others_kept);
	return tap_done();
}
