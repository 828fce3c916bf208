/* SPDX-License-Identifier: MIT */
/* Background threads step below an inherited realtime priority (bgsched.h). */
#include <errno.h>
#include <sched.h>
#include <sys/prctl.h>

#include "bgsched.h"

int stp_bgsched_enter(const char *name)
{
	struct sched_param p;
	int policy;

	/* naming is only for /proc; a failure changes nothing the thread does */
	(void)prctl(PR_SET_NAME, name, 0, 0, 0);
	policy = sched_getscheduler(0);
	if (policy < 0 || sched_getparam(0, &p))
		return -errno;
	policy &= ~SCHED_RESET_ON_FORK;
	if (policy != SCHED_FIFO && policy != SCHED_RR)
		return 0;
	/* lowering one's own priority needs no privilege; the filter allows nothing else */
	if (p.sched_priority > 1) {
		p.sched_priority--;
		return sched_setparam(0, &p) ? -errno : 0;
	}
	p.sched_priority = 0;
	return sched_setscheduler(0, SCHED_OTHER, &p) ? -errno : 0;
}
