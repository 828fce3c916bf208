/* SPDX-License-Identifier: MIT */
/* FUSE's request loop (serveloop.h). */
#include "serveloop.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fuseapi.h"
#include "util.h"

/* The loop's own thread only starts threads. */
#define STARTER_STACK (256u << 10)
/* A wake-up that comes just before a thread enters its read is lost: as the loop ends,
 * the threads still about to read are woken again this often. */
#define WAKE_AGAIN_NS 10000000L

struct worker {
	pthread_t thread;
	bool known;     /* THREAD is set: a worker may run before its starter learns it */
	bool receiving; /* in its read, or about to be: may need waking */
};

/* No thread of the loop: stp_serveloop_stop's caller. */
#define NOT_A_WORKER (~0u)

struct stp_serveloop {
	struct fuse_session *se;
	int wake_sig;
	volatile pid_t caller; /* the thread in stp_serveloop_run, for a handler to wake */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the starter's work, a receiver's leaving as the loop ends */
	struct worker w[STP_SERVELOOP_THREADS]; /* [0]: the caller */
	unsigned nworkers; /* started or being started, the caller included */
	unsigned idle;     /* waiting for a request */
	bool wanted;       /* the starter owes a worker */
	bool inline_start; /* no starter: whoever finds every worker busy starts one */
	bool over;
	int err;
};

struct worker_arg {
	struct stp_serveloop *l;
	unsigned self;
};

static void serve(struct stp_serveloop *l, unsigned self);

/* A FORGET is answered by nobody and takes no time: a burst of them starts no thread. */
static bool is_forget(const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;

	return !(buf->flags & FUSE_BUF_IS_FD) &&
	       (in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET);
}

/* Unblocks signal SIG in the calling thread; *OLD gets the mask before, when not NULL. */
static void unblock(int sig, sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, old);
}

static void *worker_main(void *arg)
{
	struct worker_arg a = *(struct worker_arg *)arg;

	free(arg);
	unblock(a.l->wake_sig, NULL);
	serve(a.l, a.self);
	return NULL;
}

/* Starts worker SELF (its slot counted already) as *THREAD, with every signal but the
 * wake-up blocked (libfuse's block those that end a mount): a signal for the process
 * goes to the caller's thread. */
static int start_worker(struct stp_serveloop *l, unsigned self, pthread_t *thread)
{
	struct worker_arg *a = malloc(sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	*a = (struct worker_arg){ l, self };
	rc = stp_thread_create_blocked(thread, 0, worker_main, a);
	if (rc)
		free(a);
	return rc;
}

/* Under the lock: one more worker, when none is left waiting for a request. */
static void want_worker(struct stp_serveloop *l)
{
	unsigned self;

	if (l->idle || l->wanted || l->nworkers == STP_SERVELOOP_THREADS)
		return;
	if (!l->inline_start) {
		l->wanted = true;
		pthread_cond_broadcast(&l->cond);
		return;
	}
	self = l->nworkers++;
	if (start_worker(l, self, &l->w[self].thread))
		l->nworkers--;
	else
		l->w[self].known = true;
}

/* Under the lock, once the loop is over: wakes every other thread still in (or about to
 * enter) its read, until none is. A thread that is answering a request finishes it and
 * sees the end before it reads again. */
static void wake_receivers(struct stp_serveloop *l, unsigned self)
{
	for (;;) {
		struct timespec until;
		bool any = false;

		for (unsigned i = 0; i < l->nworkers; i++)
			if (i != self && l->w[i].receiving) {
				if (l->w[i].known)
					pthread_kill(l->w[i].thread, l->wake_sig);
				any = true;
			}
		if (!any)
			return;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += WAKE_AGAIN_NS;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&l->cond, &l->lock, &until);
	}
}

/* Under the lock: the loop is over for every thread (SE ended, or ERR). */
static void end_loop(struct stp_serveloop *l, unsigned self, int err)
{
	if (err && !l->err)
		l->err = err;
	if (!l->over) {
		l->over = true;
		if (err)
			fuse_session_exit(l->se);
		pthread_cond_broadcast(&l->cond);
	}
	wake_receivers(l, self);
}

/* Waits for a request (the lock held on entry and on return). Returns what
 * fuse_session_receive_buf returns, or 0 when the loop is over. */
static int receive(struct stp_serveloop *l, unsigned self, struct fuse_buf *buf)
{
	int res;

	if (l->over || fuse_session_exited(l->se))
		return 0;
	l->w[self].receiving = true;
	l->idle++;
	pthread_mutex_unlock(&l->lock);
	res = fuse_session_receive_buf(l->se, buf);
	pthread_mutex_lock(&l->lock);
	l->w[self].receiving = false;
	l->idle--;
	if (l->over)
		pthread_cond_broadcast(&l->cond); /* for wake_receivers */
	return res;
}

static void serve(struct stp_serveloop *l, unsigned self)
{
	struct fuse_buf buf = { .mem = NULL };
	int res;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		res = receive(l, self, &buf);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0)
			break;
		if (!is_forget(&buf))
			want_worker(l);
		pthread_mutex_unlock(&l->lock);
		fuse_session_process_buf(l->se, &buf);
		pthread_mutex_lock(&l->lock);
	}
	end_loop(l, self, res);
	pthread_mutex_unlock(&l->lock);
	free(buf.mem);
}

struct starter_arg {
	struct stp_serveloop *l;
	void (*start)(void *);
	void *arg;
};

/* The loop's own thread: the caller's START, then a worker each time one is wanted. */
static void *starter_main(void *arg)
{
	struct starter_arg *s = arg;
	struct stp_serveloop *l = s->l;

	if (s->start)
		s->start(s->arg);
	pthread_mutex_lock(&l->lock);
	for (;;) {
		unsigned self;
		pthread_t thread;
		int err;

		while (!l->wanted && !l->over)
			pthread_cond_wait(&l->cond, &l->lock);
		if (l->over)
			break;
		l->wanted = false;
		self = l->nworkers++;
		pthread_mutex_unlock(&l->lock);
		err = start_worker(l, self, &thread);
		pthread_mutex_lock(&l->lock);
		if (err) {
			l->nworkers--; /* only this thread adds workers: SELF was the last */
			continue;
		}
		l->w[self].thread = thread;
		l->w[self].known = true;
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int stp_serveloop_new(struct fuse_session *se, int wake_sig, struct stp_serveloop **out)
{
	struct stp_serveloop *l = calloc(1, sizeof(*l));
	pthread_condattr_t ca;

	if (!l)
		return -ENOMEM;
	l->se = se;
	l->wake_sig = wake_sig;
	l->nworkers = 1;
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	*out = l;
	return 0;
}

int stp_serveloop_run(struct stp_serveloop *l, void (*start)(void *), void *arg)
{
	struct starter_arg s = { l, start, arg };
	sigset_t old_mask;
	pthread_t starter;

	/* a daemon inherits its starter's mask, which may hold the wake-up: a thread that
	 * ends the loop would then wait for ever for this one to leave its read */
	unblock(l->wake_sig, &old_mask);
	l->caller = (pid_t)syscall(SYS_gettid);
	l->w[0].thread = pthread_self();
	l->w[0].known = true;
	/* the starter, with every signal blocked (so are the threads it starts, until they
	 * unblock the wake-up) */
	l->inline_start = stp_thread_create_blocked(&starter, STARTER_STACK, starter_main, &s) != 0;
	if (l->inline_start && start)
		start(arg);
	serve(l, 0);
	if (!l->inline_start)
		pthread_join(starter, NULL);
	/* no worker is added once the loop is over; each finishes what it answers */
	for (unsigned i = 1; i < l->nworkers; i++)
		pthread_join(l->w[i].thread, NULL);
	l->caller = 0;
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	fuse_session_reset(l->se);
	return l->err;
}

void stp_serveloop_stop(struct stp_serveloop *l)
{
	pthread_mutex_lock(&l->lock);
	if (!l->over) {
		fuse_session_exit(l->se);
		end_loop(l, NOT_A_WORKER, 0);
	}
	pthread_mutex_unlock(&l->lock);
}

void stp_serveloop_stop_async(struct stp_serveloop *l)
{
	pid_t caller = l->caller;

	fuse_session_exit(l->se); /* a flag: libfuse's own handlers call it */
	if (caller)
		syscall(SYS_tgkill, getpid(), caller, l->wake_sig);
}

void stp_serveloop_free(struct stp_serveloop *l)
{
	if (!l)
		return;
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
