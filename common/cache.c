/* SPDX-License-Identifier: MIT */
/* The block cache: one mutex guards the slot table, the LRU list, the buffer count, the
 * decode queue, each entry's watermark and the counters; decoding happens outside it.
 * Buffers are mapped and unmapped directly,
 * never taken from malloc: a freed block goes back to the system at once, instead of
 * staying in the arena of the thread that freed it, so resident memory follows the
 * count. */
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "image.h"
#include "util.h"

enum entry_state { ENTRY_LOADING, ENTRY_READY, ENTRY_FAILED };

/* What a get leaves of a decode it starts: nothing, the rest to a decoder thread, or the
 * rest parked (stp_cache_prefix). */
enum get_mode { GET_WHOLE, GET_RANGE, GET_PREFIX };

/* Decoder threads for stp_cache_get_range, made as decodes are queued and none is idle.
 * Their stacks hold zstd's and the log's frames, little more. */
#define DECODERS_MAX 4u
#define DECODER_STACK (512u << 10)
/* Buffers are mapped whole pages at a time (4 KiB or a multiple: a bound either way). */
#define SPARE_MIN_BUDGET 16u
#define BUF_PAGE 4096u
/* How far past the bytes asked for a decode may write: one zstd block (ZSTD_BLOCKSIZE_MAX). */
#define DECODE_OVERSHOOT ((size_t)128 << 10)
/* Blocks kept at most, whatever their size: each is a mapping of its own, and the process
 * may have some 65,000. A block's pages are its charge, so the budget bounds their memory
 * and address space; this bounds their number. */
#define ENTRIES_MAX 4096u
/* Past its body a block reads as zeros (drop_stored): stp_cache_bytes points there. */
#define ZERO_RUN ((size_t)64 << 10)
static const uint8_t zero_run[ZERO_RUN];

struct entry {
	uint64_t block;
	enum entry_state state; /* protected by cache->lock */
	int error;              /* ENTRY_FAILED: why */
	uint32_t refs;          /* holders and waiters; protected by cache->lock */
	int drop;               /* free at the last release instead of caching */
	uint8_t *data;          /* one of the counted buffers (NULL until decode maps it) */
	size_t size;            /* decoded bytes */
	size_t alloc;           /* bytes mapped at data: a reused buffer may be larger */
	size_t charge;          /* bytes of the budget and the bound it counts for: a full
				 * buffer, or less for a block that ends in zeros; set while
				 * LOADING only; lock */
	size_t body;            /* bytes the decode writes (stp_image_decode_body and the
				 * unfilter's slack), once READY those the buffer holds: the rest
				 * of SIZE reads as zeros, not mapped (drop_stored); lock */
	int short_body;         /* BODY < SIZE: set once the decode began; lock */
	size_t ready;           /* LOADING: the first READY bytes are decompressed; lock */
	size_t plain;           /* the first PLAIN bytes are final in the buffer; lock */
	unsigned filter;        /* LOADING: the bytes past PLAIN are still filtered; lock */
	size_t front;           /* the unfilter in place may change bytes below it, and
				 * copies read none there (SIZE_MAX: no more copies); lock */
	struct copy *copies;    /* copies under way; lock */
	struct stp_cache *cache;
	struct stp_decode *job; /* LOADING: the decode (set before FILTER, freed at FRONT
				 * SIZE_MAX once no copy runs) */
	uint64_t t0;            /* when the decode began */
	size_t populated;       /* LOADING: the first POPULATED bytes of data are resident;
				 * only the thread running the decode touches it */
	int queued;             /* LOADING: its rest waits in the decode queue; lock */
	int parked;             /* LOADING: its decode stopped short (stp_cache_prefix) and
				 * waits for a reader to go on with it; lock */
	struct entry *prev, *next; /* LRU links, only while refs == 0 and READY; the decode
				    * queue's link (next) while queued */
};

/* A copy of a filtered block's bytes under way: it reads the buffer from LOW on. */
struct copy {
	size_t low;
	struct copy *next;
};

struct stp_cache {
	const struct stp_image *img;
	uint32_t budget;
	uint32_t max_buffers;     /* budget + extra */
	uint32_t entries_max;     /* blocks kept at most, whatever their charge */
	size_t full;              /* bytes of a full buffer */
	uint64_t budget_bytes;    /* BUDGET full buffers: the idle blocks kept */
	uint64_t max_bytes;       /* MAX_BUFFERS full buffers: the bound on CHARGED */
	pthread_mutex_t lock;
	pthread_cond_t done;      /* a decode finished or published progress */
	pthread_cond_t room;      /* a buffer was freed or a block became idle */
	pthread_cond_t work;      /* a decode was queued, or the cache is being freed */
	struct entry *queue_head, *queue_tail; /* decodes no decoder took yet; lock */
	pthread_t decoders[DECODERS_MAX];
	unsigned ndecoders, idle_decoders; /* lock */
	int stopping;             /* stp_cache_free: decoders exit once the queue is empty */
	stp_cache_observer_fn observe; /* tests: set before any get */
	void *observe_ctx;
	struct entry **slots;     /* by block number; protected by lock */
	struct entry *lru_head, *lru_tail; /* unpinned ready entries, most recent first */
	uint32_t resident;        /* ready entries, pinned or not */
	uint64_t resident_bytes;  /* their charges */
	uint32_t pinned;
	uint32_t idle;            /* entries on the LRU list */
	uint64_t idle_bytes;      /* their charges */
	uint64_t charged;         /* bytes of the buffers that exist or are promised to a
				   * decode, the spare included: never above max_bytes; lock */
	uint64_t peak_charged;
	uint8_t *spare;           /* an evicted full block's buffer, reused by the next decode
				   * (saves faulting in a fresh block); protected by lock */
	int making_spare;         /* a decoder maps the spare now: gets wait for it; lock */
	struct entry *parked;     /* the one entry whose decode is parked, or NULL; lock */
	uint32_t joining;         /* gets waiting on an entry found in the cache; lock */
	struct stp_cache_stats stats;
};

int stp_cache_new(const struct stp_image *img, uint32_t budget, uint32_t extra,
		  struct stp_cache **out)
{
	struct stp_cache *c;
	uint64_t n = stp_image_sb(img)->block_count;

	if (budget < 1)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->slots = calloc(n ? n : 1, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return -ENOMEM;
	}
	c->img = img;
	c->budget = budget;
	c->max_buffers = extra > UINT32_MAX - budget ? UINT32_MAX : budget + extra;
	c->full = stp_image_block_buffer_size(img); /* every buffer: decodes are in place */
	c->budget_bytes = (uint64_t)budget * c->full;
	c->max_bytes = (uint64_t)c->max_buffers * c->full;
	c->entries_max = budget > ENTRIES_MAX ? budget : ENTRIES_MAX;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done, NULL);
	pthread_cond_init(&c->room, NULL);
	pthread_cond_init(&c->work, NULL);
	*out = c;
	return 0;
}

uint64_t stp_cache_buffer_bytes(const struct stp_superblock *sb)
{
	return (stp_image_sb_buffer_size(sb) + BUF_PAGE - 1) & ~(uint64_t)(BUF_PAGE - 1);
}

uint64_t stp_cache_default_bytes(uint64_t ram)
{
	uint64_t share = ram / STP_CACHE_DEFAULT_SHARE;

	return share > STP_CACHE_DEFAULT_BYTES ? share : STP_CACHE_DEFAULT_BYTES;
}

uint32_t stp_cache_default_budget(const struct stp_superblock *sb, uint64_t ram)
{
	uint64_t buf = stp_cache_buffer_bytes(sb);
	uint64_t fit = STP_CACHE_DEFAULT_BYTES / buf;
	uint64_t more = stp_cache_default_bytes(ram) / buf;

	if (fit <= STP_CACHE_DEFAULT_BLOCKS)
		return STP_CACHE_DEFAULT_BLOCKS; /* large blocks: the seed's eight */
	/* beyond 256 MiB, no more than the image has blocks: more would only raise the
	 * mount's memory bound */
	if (more > sb->block_count)
		more = sb->block_count;
	if (more > STP_CACHE_DEFAULT_MAX)
		more = STP_CACHE_DEFAULT_MAX;
	return (uint32_t)(more > fit ? more : fit);
}

uint64_t stp_cache_machine_memory(void)
{
	struct sysinfo si;

	return sysinfo(&si) ? 0 : (uint64_t)si.totalram * si.mem_unit;
}

static uint8_t *buf_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Makes the pages of bytes [FROM, TO) of buffer P resident and writable in one call: a
 * fault per page costs several times more, ten times in a virtual machine whose faults
 * go through its hypervisor. Only the pages a decode writes, so that resident memory is
 * what faulting would have made. Before Linux 5.14 it does nothing: pages fault in. */
static void buf_populate(uint8_t *p, size_t from, size_t to)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)(p + from) & ~(pg - 1);
	uintptr_t b = ((uintptr_t)(p + to) + pg - 1) & ~(pg - 1);

	if (p && b > a)
		madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

static void buf_unmap(uint8_t *p, size_t len)
{
	if (p)
		munmap(p, len);
}

static void entry_free(struct entry *e)
{
	buf_unmap(e->data, e->alloc);
	free(e);
}

void stp_cache_free(struct stp_cache *c)
{
	uint64_t n;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = 1;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < c->ndecoders; i++)
		pthread_join(c->decoders[i], NULL);
	n = stp_image_sb(c->img)->block_count;
	for (uint64_t i = 0; i < n; i++)
		if (c->slots[i]) {
			stp_image_decode_free(c->slots[i]->job); /* a parked decode's */
			entry_free(c->slots[i]);
		}
	free(c->slots);
	buf_unmap(c->spare, c->full);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->room);
	pthread_cond_destroy(&c->work);
	free(c);
}

static void lru_unlink(struct stp_cache *c, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->lru_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->lru_tail = e->prev;
	e->prev = e->next = NULL;
	c->idle--;
	c->idle_bytes -= e->charge;
}

static void lru_push(struct stp_cache *c, struct entry *e)
{
	e->prev = NULL;
	e->next = c->lru_head;
	if (c->lru_head)
		c->lru_head->prev = e;
	else
		c->lru_tail = e;
	c->lru_head = e;
	c->idle++;
	c->idle_bytes += e->charge;
}

/* Removes a ready, unpinned entry from the cache; its buffer is still counted. */
static void evict(struct stp_cache *c, struct entry *e)
{
	lru_unlink(c, e);
	c->slots[e->block] = NULL;
	c->resident--;
	c->resident_bytes -= e->charge;
}

/* Lock held: BYTES more are charged. */
static void charge(struct stp_cache *c, size_t bytes)
{
	c->charged += bytes;
	if (c->charged > c->peak_charged)
		c->peak_charged = c->charged;
}

/* Lock held: whether a fresh entry can have a full buffer within the bound now. */
static int can_take(const struct stp_cache *c)
{
	return c->spare || c->charged + c->full <= c->max_bytes;
}

/* Lock held, can_take(). Gives a fresh entry a full buffer: the spare, or a new one
 * (*DATA stays NULL: decode maps it). */
static void take_buffer(struct stp_cache *c, struct entry *e)
{
	e->charge = c->full;
	if (c->spare) {
		e->data = c->spare;
		e->alloc = c->full;
		c->spare = NULL;
	} else {
		charge(c, c->full);
	}
}

/* Lock held. A buffer is no longer used: it becomes the spare (a full one, when there is
 * none), or it is returned for the caller to give to buf_drop, counted until then (else
 * a buffer being unmapped and one being mapped meanwhile would both be resident). */
static uint8_t *put_buffer(struct stp_cache *c, uint8_t *data, size_t alloc, size_t bytes)
{
	if (data && !c->spare && alloc == c->full && bytes == c->full) {
		c->spare = data;
		data = NULL;
	} else if (!data) {
		c->charged -= bytes; /* counted, never mapped */
	}
	pthread_cond_broadcast(&c->room);
	return data;
}

/* Outside the lock: unmaps a buffer that put_buffer returned, then stops counting it. */
static void buf_drop(struct stp_cache *c, uint8_t *data, size_t alloc, size_t bytes)
{
	if (!data)
		return;
	buf_unmap(data, alloc);
	pthread_mutex_lock(&c->lock);
	c->charged -= bytes;
	pthread_cond_broadcast(&c->room);
	pthread_mutex_unlock(&c->lock);
}

/* Lock held. Puts E's buffer back and chains E (taken out of the cache) before CHAIN. */
static struct entry *retire(struct stp_cache *c, struct entry *e, struct entry *chain)
{
	e->data = put_buffer(c, e->data, e->alloc, e->charge);
	e->next = chain;
	return e;
}

/* Evicts least recently used entries over budget; returns them chained by ->next before
 * FREED. */
static struct entry *trim_onto(struct stp_cache *c, struct entry *freed)
{
	while ((c->resident_bytes > c->budget_bytes || c->resident > c->entries_max) && c->lru_tail) {
		struct entry *e = c->lru_tail;

		evict(c, e);
		freed = retire(c, e, freed);
	}
	return freed;
}

/* Outside the lock: frees entries taken out of the cache, dropping their buffers. */
static void free_chain(struct stp_cache *c, struct entry *e)
{
	while (e) {
		struct entry *next = e->next;

		buf_drop(c, e->data, e->alloc, e->charge);
		free(e);
		e = next;
	}
}

static void pin(struct stp_cache *c, struct entry *e)
{
	if (e->refs++ == 0 && e->state == ENTRY_READY) {
		lru_unlink(c, e);
		c->pinned++;
	}
}

/* Outside the lock: makes *DATA a buffer of at least LEN bytes (the count holds it). */
static int buf_fit(uint8_t **data, size_t *alloc, size_t len)
{
	if (*data && *alloc >= len)
		return 0;
	buf_unmap(*data, *alloc);
	*alloc = len ? len : 1;
	*data = buf_map(*alloc);
	if (!*data)
		*alloc = 0;
	return *data ? 0 : -ENOMEM;
}

/* From the decoding thread: the watermark moves, and readers waiting for it look. */
static void published(void *arg, size_t n)
{
	struct entry *e = arg;
	struct stp_cache *c = e->cache;

	if (c->observe)
		c->observe(c->observe_ctx, e->block, n);
	pthread_mutex_lock(&c->lock);
	e->ready = n;
	if (!e->filter)
		e->plain = n;
	pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->lock);
}

/* Lock held: whether a copy reads bytes of E below AT. */
static int copies_below(const struct entry *e, size_t at)
{
	for (const struct copy *k = e->copies; k; k = k->next)
		if (k->low < at)
			return 1;
	return 0;
}

/* Lock held: from now on no copy starts that reads bytes below FRONT, and when this
 * returns none runs that does (those under way end without waiting for anything). */
static void claim(struct stp_cache *c, struct entry *e, size_t front)
{
	e->front = front;
	while (copies_below(e, front))
		pthread_cond_wait(&c->done, &c->lock);
}

/* From the decoding thread: a filtered block is unfiltered in place up to N, and the
 * pass changes bytes below CLAIM next. Copies further on go on meanwhile. */
static void unfiltered(void *arg, size_t n, size_t claimed)
{
	struct entry *e = arg;
	struct stp_cache *c = e->cache;

	if (c->observe)
		c->observe(c->observe_ctx, e->block, n);
	pthread_mutex_lock(&c->lock);
	e->plain = n;
	pthread_cond_broadcast(&c->done);
	claim(c, e, claimed);
	pthread_mutex_unlock(&c->lock);
}

static const struct stp_decode_ops decode_ops = { .decoded = published,
						  .unfiltered = unfiltered, .zero_tail = true };

/* Outside the lock, by the thread running E's decode: goes on until E's first UNTIL bytes
 * are decompressed, making resident first the pages it writes on the way (a zstd block
 * may pass UNTIL by DECODE_OVERSHOOT). A read early in a large block so pays
 * for its own pages, not for the whole buffer's; the rest are made resident by whoever
 * decodes on. Returns what stp_image_decode_continue returns. */
static int decode_to(struct entry *e, size_t until)
{
	size_t to = until < e->body && e->body - until > DECODE_OVERSHOOT ?
		    until + DECODE_OVERSHOOT : e->body;

	if (to > e->populated) {
		buf_populate(e->data, e->populated, to);
		e->populated = to;
	}
	return stp_image_decode_continue(e->job, until);
}

static size_t page_up(size_t n)
{
	return (n + BUF_PAGE - 1) & ~(size_t)(BUF_PAGE - 1);
}

/* Where the stored bytes of a compressed block lie in a buffer, rounded down to a page. */
static size_t stored_from(const struct stp_cache *c, const struct stp_blockent *be)
{
	return (c->full - be->stored_size) & ~(size_t)(BUF_PAGE - 1);
}

/* Outside the lock, before E's decode goes on: a block whose frame ends in zero blocks
 * (a cut, or a block padded at a stable boundary) is decoded up to them only. A reused
 * buffer gives back the pages between its body and its stored bytes, which then read as
 * zeros. The bytes up to the page past the body are cleared in any buffer: the unfilter
 * may read them, and a refused content (imgsrc.h) may have written them. The
 * charge stays a full buffer's while the decode runs: the whole buffer is mapped. */
static void fit_body(struct stp_cache *c, struct entry *e, size_t from, int reused)
{
	size_t body = stp_image_decode_body(e->job), end, keep;

	if (body >= e->size)
		return;
	end = body + STP_DECODE_TAIL_SLACK < e->size ? body + STP_DECODE_TAIL_SLACK : e->size;
	keep = page_up(end);
	/* FROM, where the stored bytes lie, is past KEEP: stp_image_decode_body leaves room */
	/* a fresh buffer too: a refused content (stp_imgsrc content) may have written there */
	memset(e->data + body, 0, keep - body);
	if (reused)
		madvise(e->data + keep, from - keep, MADV_DONTNEED);
	pthread_mutex_lock(&c->lock);
	e->body = end;
	e->short_body = 1;
	pthread_mutex_unlock(&c->lock);
}

/* The length of P[0, N) without its trailing zeros: whole words at a time. */
static size_t nonzero_end(const uint8_t *p, size_t n)
{
	uint64_t w;

	while (n % 8 && !p[n - 1])
		n--;
	while (n >= 8 && !(memcpy(&w, p + n - 8, 8), w))
		n -= 8;
	while (n && !p[n - 1])
		n--;
	return n;
}

/* Outside the lock, E decoded whole: a block decoded up to its zero blocks keeps the
 * pages of its body alone (one at least), and is charged for them: a cut of 256 KiB costs
 * 256 KiB of the budget, not a block. The rest of its buffer is unmapped, the stored
 * bytes with it: its readers copy zeros past the body (stp_cache_copy, stp_cache_bytes),
 * so none faults memory in there, and the block holds no address space past its charge.
 * Readers let go before the end read below the watermark, copies below READY: those
 * bytes stay. */
static void drop_stored(struct stp_cache *c, struct entry *e)
{
	size_t body, keep;

	if (e->body >= e->size)
		return;
	keep = page_up(e->body);
	/* the frame says zeros there, whatever the decode left (fit_body cleared them before) */
	memset(e->data + e->body, 0, keep - e->body);
	/* the zero blocks start on a zstd block boundary: the cut's zeros before it go too */
	body = nonzero_end(e->data, e->body);
	pthread_mutex_lock(&c->lock);
	body = body > e->plain ? body : e->plain;
	body = body > e->ready ? body : e->ready;
	e->body = body;
	pthread_mutex_unlock(&c->lock);
	keep = body ? page_up(body) : BUF_PAGE;
	if (keep >= e->alloc || munmap(e->data + keep, e->alloc - keep))
		return; /* kept whole, and charged so */
	pthread_mutex_lock(&c->lock);
	e->alloc = keep;
	c->charged -= e->charge - keep;
	e->charge = keep;
	pthread_cond_broadcast(&c->room);
	pthread_mutex_unlock(&c->lock);
}

/* Outside the lock: starts decoding E into its buffer (the stored bytes in place in it)
 * and goes on until its first UNTIL bytes are final. 1 when bytes are left, in E->job. */
static int decode_start(struct stp_cache *c, struct entry *e, size_t until)
{
	int reused = e->data != NULL;
	int rc = buf_fit(&e->data, &e->alloc, c->full);
	struct stp_blockent be;
	int in_place = 0;
	size_t from = c->full;

	/* the stored bytes are read in place at the end (a cut's in memory of their own); the
	 * decoded ones go at the start, made resident as the decode reaches them, or all at
	 * once for a block stored raw (read whole) */
	e->populated = 0;
	if (!rc && !stp_image_block(c->img, e->block, &be) && be.codec != STP_CODEC_RAW &&
	    be.stored_size <= c->full) {
		if (!stp_image_stored_apart(c->img, &be)) {
			from = stored_from(c, &be);
			buf_populate(e->data, from, c->full);
		}
		in_place = 1;
	} else {
		e->populated = e->size;
	}
	buf_populate(e->data, 0, e->populated);
	e->cache = c;
	e->t0 = stp_now_ns();
	if (!rc)
		rc = stp_image_decode_begin(c->img, e->block, e->data, &decode_ops, e, &e->job);
	if (!rc && in_place)
		fit_body(c, e, from, reused);
	if (!rc) {
		pthread_mutex_lock(&c->lock);
		e->filter = stp_image_decode_filter(e->job);
		pthread_mutex_unlock(&c->lock);
		rc = decode_to(e, until);
	}
	return rc;
}

/* Called with the lock held by the thread that decoded E. A failed entry leaves the
 * cache; its buffer goes back with the last hold on it (a reader let go early may still
 * be reading the bytes it was given). */
static void finish_load(struct stp_cache *c, struct entry *e, int rc, uint64_t ns)
{
	c->stats.decode_ns += ns;
	if (rc) {
		e->state = ENTRY_FAILED;
		e->error = rc;
		c->slots[e->block] = NULL;
		c->stats.failures++;
	} else {
		e->state = ENTRY_READY;
		e->ready = e->plain = e->size;
		c->resident++;
		c->resident_bytes += e->charge;
		c->pinned++;
		c->stats.decoded++;
		c->stats.decoded_bytes += e->size;
	}
	pthread_cond_broadcast(&c->done);
}

/* Lock held: one hold on E ends. Returns CHAIN, with E before it when E is to be freed
 * (a failed entry, or one dropped), for free_chain outside the lock. */
static struct entry *unpin(struct stp_cache *c, struct entry *e, struct entry *chain)
{
	if (--e->refs)
		return chain;
	if (e->state == ENTRY_FAILED) /* out of the cache already: only its buffer is left */
		return retire(c, e, chain);
	c->pinned--;
	if (e->drop) {
		c->slots[e->block] = NULL;
		c->resident--;
		c->resident_bytes -= e->charge;
		return retire(c, e, chain);
	}
	lru_push(c, e);
	pthread_cond_broadcast(&c->room); /* an idle block can be evicted now */
	return trim_onto(c, chain);
}

/* Outside the lock: E's decode ended with RC (0 or an error): publishes the result and
 * lets the decode's hold go. Waits for nothing but the lock and the copies under way
 * (which wait for nothing). */
static void finish_decode(struct stp_cache *c, struct entry *e, int rc)
{
	struct entry *freed = NULL;
	struct stp_decode *job;

	if (!rc)
		drop_stored(c, e);
	pthread_mutex_lock(&c->lock);
	claim(c, e, SIZE_MAX); /* a failed decode was not unfiltered: copies may still run */
	job = e->job;
	e->job = NULL;
	finish_load(c, e, rc, stp_now_ns() - e->t0);
	if (!rc)
		freed = trim_onto(c, NULL);
	freed = unpin(c, e, freed);
	pthread_mutex_unlock(&c->lock);
	stp_image_decode_free(job);
	free_chain(c, freed);
}

/* Lock held, dropped while mapping: with no decode queued, maps the spare buffer the
 * next miss takes, its first SIZE bytes (the last block's size) populated, so that it
 * finds its pages ready instead of making them on the read's time. Only while the cache
 * holds fewer buffers than its budget (it would keep that many decoded blocks anyway),
 * and when one buffer is at most a sixteenth of the budget: an image of small blocks. */
static void make_spare(struct stp_cache *c, size_t size)
{
	uint8_t *p;

	if (c->spare || c->stopping || c->queue_head || c->charged + c->full > c->budget_bytes ||
	    c->budget < SPARE_MIN_BUDGET || !size)
		return;
	charge(c, c->full); /* promised: the bound holds meanwhile */
	c->making_spare = 1;
	pthread_mutex_unlock(&c->lock);
	p = buf_map(c->full);
	buf_populate(p, 0, size);
	pthread_mutex_lock(&c->lock);
	c->making_spare = 0;
	if (p && !c->spare) {
		c->spare = p;
	} else {
		pthread_mutex_unlock(&c->lock);
		buf_unmap(p, c->full);
		pthread_mutex_lock(&c->lock);
		c->charged -= c->full;
	}
	pthread_cond_broadcast(&c->room);
}

/* Lock held: takes queued E out of the decode queue; its decode is the taker's now. */
static void unqueue(struct stp_cache *c, struct entry *e)
{
	struct entry **at = &c->queue_head, *prev = NULL;

	while (*at != e) {
		prev = *at;
		at = &(*at)->next;
	}
	*at = e->next;
	if (c->queue_tail == e)
		c->queue_tail = prev;
	e->next = NULL;
	e->queued = 0;
}

static void *decoder_main(void *arg)
{
	struct stp_cache *c = arg;
	size_t last = 0; /* the size of the block decoded last */

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct entry *e;

		make_spare(c, last);
		while (!c->queue_head && !c->stopping) {
			c->idle_decoders++;
			pthread_cond_wait(&c->work, &c->lock);
			c->idle_decoders--;
		}
		if (!(e = c->queue_head))
			break;
		unqueue(c, e);
		last = e->body;
		pthread_mutex_unlock(&c->lock);
		finish_decode(c, e, e->job ? decode_to(e, SIZE_MAX) : decode_start(c, e, SIZE_MAX));
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Lock held: one more decoder thread, taking no signals (the caller's handlers expect
 * them on threads they know). 0 or -1. */
static int add_decoder(struct stp_cache *c)
{
	if (c->ndecoders == DECODERS_MAX ||
	    stp_thread_create_blocked(&c->decoders[c->ndecoders], DECODER_STACK, decoder_main, c))
		return -1;
	c->ndecoders++;
	return 0;
}

/* Lock held: hands the rest of E's decode to a decoder thread. 0, or -1 when there is
 * none (the caller decodes it itself). */
static int queue_decode(struct stp_cache *c, struct entry *e)
{
	if (!c->idle_decoders && add_decoder(c) && !c->ndecoders)
		return -1;
	e->next = NULL;
	e->queued = 1;
	if (c->queue_tail)
		c->queue_tail->next = e;
	else
		c->queue_head = e;
	c->queue_tail = e;
	pthread_cond_signal(&c->work);
	return 0;
}

/* Lock held. */
static void fill_ref(struct entry *e, struct stp_block_ref *ref)
{
	ref->data = e->data;
	ref->size = e->size;
	ref->body = e->body;
	ref->direct = e->plain;
	ref->block = e->block;
	ref->fresh = 0;
	ref->entry = e;
}

/* Drops a waiter's hold on a failed entry and unlocks; the last one frees it. */
static int leave_failed(struct stp_cache *c, struct entry *e)
{
	int rc = e->error;
	struct entry *freed = unpin(c, e, NULL);

	pthread_mutex_unlock(&c->lock);
	free_chain(c, freed);
	return rc;
}

/* The bytes of E a wait for [0, END) needs: at least one, so that data is mapped. */
static size_t wanted(const struct entry *e, size_t end)
{
	return end < 1 ? 1 : end < e->size ? end : e->size;
}

/* Lock held: whether bytes [0, END) of E can be copied unfiltered, the filter's
 * look-ahead past them being decompressed, by a copy that reads from LOW on. */
static int copyable(const struct entry *e, size_t end, size_t low)
{
	size_t need = e->size - end > STP_DECODE_LOOKAHEAD ? end + STP_DECODE_LOOKAHEAD : e->size;

	return e->filter && e->ready >= need && low >= e->front && e->front != SIZE_MAX;
}

/* Outside the lock: E's decode stands at RC, what stp_image_decode_continue returned:
 * with bytes left (1), the rest goes to a decoder thread, or on here when there is none;
 * an ended decode is finished. */
static void decode_rest(struct stp_cache *c, struct entry *e, int rc)
{
	if (rc == 1) {
		pthread_mutex_lock(&c->lock);
		rc = queue_decode(c, e) ? 1 : 2;
		pthread_mutex_unlock(&c->lock);
		if (rc == 1)
			rc = decode_to(e, SIZE_MAX);
	}
	if (rc != 2)
		finish_decode(c, e, rc);
}

/* Lock held, and on return: E's rest waits in the queue behind other blocks' decodes, or
 * is parked, and a reader needs it. The reader takes it and decodes on its own thread
 * until UNTIL bytes are decoded, then queues what is left: a read waits for its own bytes
 * only. */
static void decode_here(struct stp_cache *c, struct entry *e, size_t until)
{
	if (e->queued) {
		unqueue(c, e);
	} else {
		e->parked = 0;
		c->parked = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	decode_rest(c, e, e->job ? decode_to(e, until) : decode_start(c, e, until));
	pthread_mutex_lock(&c->lock);
}

/* Lock held, E pinned: waits until E's first END bytes are final in the buffer (or, COPY,
 * at least copyable with stp_cache_read) or its decode failed short of them. 0, or the
 * decode's error. Bytes final before a failure stay good while the pin holds the buffer:
 * a reader that was let go, or only looked late, keeps them. */
static int wait_final(struct stp_cache *c, struct entry *e, size_t end, int copy)
{
	size_t want = wanted(e, end);

	/* the copy's start is not known here: stp_cache_read sorts it out */
	while (e->state == ENTRY_LOADING && e->plain < want && !(copy && copyable(e, want, want))) {
		/* a filtered block is final only once decompressed whole */
		if (e->queued || e->parked)
			decode_here(c, e, copy || !e->filter ? want + STP_DECODE_LOOKAHEAD : SIZE_MAX);
		else
			pthread_cond_wait(&c->done, &c->lock);
	}
	if (e->plain < want && !(copy && copyable(e, want, want)))
		return e->error;
	c->stats.early += e->state != ENTRY_READY;
	return 0;
}

/* Lock held, released on return: E, which is in the cache and pinned, is handed over
 * once its first END bytes are final (COPY: or copyable). */
static int join_pinned(struct stp_cache *c, struct entry *e, size_t end, int copy,
		       struct stp_block_ref *ref)
{
	int rc;

	c->joining++;
	rc = wait_final(c, e, end, copy);
	c->joining--;
	if (rc)
		return leave_failed(c, e);
	c->stats.hits++;
	e->drop = 0;
	fill_ref(e, ref);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* join_pinned, pinning E first. */
static int join(struct stp_cache *c, struct entry *e, size_t end, int copy,
		struct stp_block_ref *ref)
{
	pin(c, e);
	return join_pinned(c, e, end, copy, ref);
}

/* Outside the lock: E's decode, started by stp_cache_prefix, stands at RC: with bytes
 * left (1) it is parked for a reader to go on with, unless another entry is parked
 * already (then it goes on as a read's would); an ended decode is finished. */
static void park_rest(struct stp_cache *c, struct entry *e, int rc)
{
	if (rc == 1) {
		pthread_mutex_lock(&c->lock);
		if (!c->parked) {
			e->parked = 1;
			c->parked = e;
			rc = 2;
			pthread_cond_broadcast(&c->done); /* waiters for the whole block leave */
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (rc != 2)
		decode_rest(c, e, rc);
}

/* Lock held, dropped meanwhile: the parked decode no one waits for or holds gives its
 * buffer back (it becomes the spare), for a get that finds none. 1 when it did. */
static int unpark_idle(struct stp_cache *c)
{
	struct entry *e = c->parked, *freed;
	struct stp_decode *job;

	if (!e || e->refs != 1) /* the parked decode's own hold alone */
		return 0;
	c->parked = NULL;
	e->parked = 0;
	c->slots[e->block] = NULL;
	job = e->job;
	e->job = NULL;
	freed = retire(c, e, NULL);
	pthread_mutex_unlock(&c->lock);
	stp_image_decode_free(job);
	free_chain(c, freed);
	pthread_mutex_lock(&c->lock);
	return 1;
}

/* Lock held, released on return: decodes BLOCK into fresh entry E, which holds its
 * buffer, here until its first END bytes are final; the rest on a decoder thread for
 * GET_RANGE, parked for GET_PREFIX, else here too. */
static int load(struct stp_cache *c, struct entry *e, uint64_t block, size_t end, int mode,
		struct stp_block_ref *ref)
{
	int rc;

	e->block = block;
	e->size = e->body = stp_image_block_decoded_size(c->img, block);
	e->state = ENTRY_LOADING;
	e->refs = 2; /* the caller's and the decode's */
	c->slots[block] = e;
	c->stats.misses++;
	pthread_mutex_unlock(&c->lock);

	/* a filtered block's copies need 4 bytes past their end */
	rc = decode_start(c, e, mode != GET_WHOLE ? wanted(e, end) + STP_DECODE_LOOKAHEAD : SIZE_MAX);
	if (mode == GET_PREFIX)
		park_rest(c, e, rc);
	else
		decode_rest(c, e, rc);
	pthread_mutex_lock(&c->lock);
	if (wait_final(c, e, end, mode != GET_WHOLE))
		return leave_failed(c, e);
	fill_ref(e, ref);
	pthread_mutex_unlock(&c->lock);
	ref->fresh = 1;
	return 0;
}

/* Lock held, dropped meanwhile: the least recently used idle block goes; its buffer
 * becomes the spare, or is unmapped before a new one is (the bound holds throughout). */
static void evict_lru(struct stp_cache *c)
{
	struct entry *v = c->lru_tail;

	evict(c, v);
	v = retire(c, v, NULL);
	pthread_mutex_unlock(&c->lock);
	free_chain(c, v);
	pthread_mutex_lock(&c->lock);
}

static int get(struct stp_cache *c, uint64_t block, size_t end, int mode,
	       struct stp_block_ref *ref)
{
	struct entry *e, *fresh = NULL;
	int waited = 0, rc = 0;

	if (block >= stp_image_sb(c->img)->block_count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		e = c->slots[block];
		if (e) {
			rc = join(c, e, end, mode != GET_WHOLE, ref);
			free(fresh);
			return rc;
		}
		if (!fresh && !(fresh = calloc(1, sizeof(*fresh)))) {
			pthread_mutex_unlock(&c->lock);
			return -ENOMEM;
		}
		/* a spare being mapped is the one to take: a buffer of its own would be one too
		 * many, and cost the same */
		if (c->making_spare) {
			pthread_cond_wait(&c->room, &c->lock);
			continue;
		}
		if (can_take(c))
			break;
		if (c->lru_tail) {
			evict_lru(c);
			continue;
		}
		if (unpark_idle(c))
			continue;
		/* every buffer is pinned or loading: holders release them without waiting */
		c->stats.waits += !waited;
		waited = 1;
		pthread_cond_wait(&c->room, &c->lock);
	}
	take_buffer(c, fresh);
	return load(c, fresh, block, end, mode, ref);
}

int stp_cache_get(struct stp_cache *c, uint64_t block, struct stp_block_ref *ref)
{
	return get(c, block, SIZE_MAX, GET_WHOLE, ref);
}

int stp_cache_get_range(struct stp_cache *c, uint64_t block, size_t end,
			struct stp_block_ref *ref)
{
	return get(c, block, end, GET_RANGE, ref);
}

int stp_cache_prefix(struct stp_cache *c, uint64_t block, size_t end)
{
	struct stp_block_ref ref;
	int rc = get(c, block, end, GET_PREFIX, &ref);

	if (!rc)
		stp_cache_release(c, &ref);
	return rc;
}

/* Lock held: whether a read at the start of BLOCK - 1 should have BLOCK decoded ahead. */
static int worth_ahead(const struct stp_cache *c, uint64_t block)
{
	const struct entry *prev = c->slots[block - 1];

	return prev && prev->short_body && !c->slots[block] && !c->stopping;
}

void stp_cache_read_ahead(struct stp_cache *c, uint64_t block)
{
	struct entry *e, *undone = NULL;

	if (block == 0 || block >= stp_image_sb(c->img)->block_count)
		return;
	pthread_mutex_lock(&c->lock);
	while (worth_ahead(c, block) && !can_take(c) && c->lru_tail)
		evict_lru(c);
	if (!worth_ahead(c, block) || !can_take(c) || !(e = calloc(1, sizeof(*e)))) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	take_buffer(c, e);
	e->block = block;
	e->size = e->body = stp_image_block_decoded_size(c->img, block);
	e->state = ENTRY_LOADING;
	e->refs = 1; /* the decode's */
	c->slots[block] = e;
	if (queue_decode(c, e)) {
		c->slots[block] = NULL;
		undone = retire(c, e, NULL);
	} else {
		c->stats.ahead++;
	}
	pthread_mutex_unlock(&c->lock);
	free_chain(c, undone);
}

int stp_cache_wait(struct stp_cache *c, struct stp_block_ref *ref, size_t end)
{
	struct entry *e = ref->entry;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = wait_final(c, e, end, 1);
	ref->direct = e->plain;
	ref->body = e->body;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Copies bytes [FROM, FROM + LEN) of a block whose buffer DATA holds the first BODY. */
static void copy_held(const uint8_t *data, size_t body, size_t from, size_t len, void *dst)
{
	size_t held = from >= body ? 0 : body - from < len ? body - from : len;

	if (held)
		memcpy(dst, data + from, held);
	memset((uint8_t *)dst + held, 0, len - held);
}

void stp_cache_copy(const struct stp_block_ref *ref, size_t from, size_t len, void *dst)
{
	copy_held(ref->data, ref->body, from, len, dst);
}

const uint8_t *stp_cache_bytes(const struct stp_block_ref *ref, size_t from, size_t len,
			       size_t *n)
{
	if (from < ref->body) {
		*n = ref->body - from < len ? ref->body - from : len;
		return ref->data + from;
	}
	*n = len < ZERO_RUN ? len : ZERO_RUN;
	return zero_run;
}

int stp_cache_feed(const struct stp_block_ref *ref, size_t from, size_t len, uint64_t off,
		   stp_cache_sink_fn sink, void *ctx)
{
	int rc = 0;

	for (size_t at = 0, n; !rc && at < len; at += n) {
		const uint8_t *b = stp_cache_bytes(ref, from + at, len - at, &n);

		rc = sink(ctx, off + at, b, n);
	}
	return rc;
}

int stp_cache_read(struct stp_cache *c, const struct stp_block_ref *ref, size_t from,
		   size_t len, void *dst)
{
	struct entry *e = ref->entry;
	size_t end = from + len;
	struct copy me = { .low = from > STP_DECODE_BACK ? from - STP_DECODE_BACK : 0 };
	int rc;

	if (end <= ref->direct) {
		stp_cache_copy(ref, from, len, dst);
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	for (int copy = 1;;) {
		while (e->plain < end && !(copy && copyable(e, end, me.low)) &&
		       e->state == ENTRY_LOADING) {
			if (e->parked) /* no one else will decode it on */
				decode_here(c, e, SIZE_MAX);
			else
				pthread_cond_wait(&c->done, &c->lock); /* the unfilter passes END */
		}
		if (e->plain >= end) {
			size_t body = e->body;

			pthread_mutex_unlock(&c->lock);
			copy_held(ref->data, body, from, len, dst);
			return 0;
		}
		if (!copy || !copyable(e, end, me.low)) {
			rc = e->error ? e->error : -EIO;
			break;
		}
		me.next = e->copies;
		e->copies = &me;
		pthread_mutex_unlock(&c->lock);
		rc = stp_image_decode_copy(e->job, from, len, dst);
		pthread_mutex_lock(&c->lock);
		for (struct copy **k = &e->copies; *k; k = &(*k)->next)
			if (*k == &me) {
				*k = me.next;
				break;
			}
		pthread_cond_broadcast(&c->done); /* the unfilter in place may wait for it */
		if (rc != -EAGAIN)
			break;
		copy = 0; /* no point to start the filter from near FROM: wait for the block */
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void stp_cache_set_observer(struct stp_cache *c, stp_cache_observer_fn fn, void *ctx)
{
	c->observe = fn;
	c->observe_ctx = ctx;
}

int stp_cache_get_decoded(struct stp_cache *c, uint64_t block, struct stp_block_ref *ref)
{
	struct entry *e;

	if (block >= stp_image_sb(c->img)->block_count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	e = c->slots[block];
	if (!e || e->parked) { /* a parked decode goes on for a reader only */
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	pin(c, e);
	/* a decode parked meanwhile too (stp_cache_prefix's, then still running): joining
	 * it would decode the whole block, which the prefix left for a reader */
	c->joining++;
	while (e->state == ENTRY_LOADING && !e->parked)
		pthread_cond_wait(&c->done, &c->lock);
	c->joining--;
	if (e->parked) {
		struct entry *freed = unpin(c, e, NULL);

		pthread_mutex_unlock(&c->lock);
		free_chain(c, freed);
		return -ENOENT;
	}
	return join_pinned(c, e, SIZE_MAX, 0, ref);
}

int stp_cache_get_resident(struct stp_cache *c, uint64_t block, struct stp_block_ref *ref)
{
	struct entry *e;

	if (block >= stp_image_sb(c->img)->block_count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	e = c->slots[block];
	if (!e || e->state != ENTRY_READY) {
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	pin(c, e);
	c->stats.hits++;
	fill_ref(e, ref);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void stp_cache_release(struct stp_cache *c, struct stp_block_ref *ref)
{
	struct entry *e = ref->entry, *freed;

	if (!e)
		return;
	ref->entry = NULL;
	pthread_mutex_lock(&c->lock);
	freed = unpin(c, e, NULL);
	pthread_mutex_unlock(&c->lock);
	free_chain(c, freed);
}

void stp_cache_drop(struct stp_cache *c, uint64_t block)
{
	struct entry *e, *freed = NULL;

	if (block >= stp_image_sb(c->img)->block_count)
		return;
	pthread_mutex_lock(&c->lock);
	e = c->slots[block];
	if (e && e->state == ENTRY_READY) {
		if (e->refs == 0) {
			evict(c, e);
			freed = retire(c, e, NULL);
		} else {
			e->drop = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	free_chain(c, freed);
}

int stp_cache_contains(struct stp_cache *c, uint64_t block)
{
	int yes;

	if (block >= stp_image_sb(c->img)->block_count)
		return 0;
	pthread_mutex_lock(&c->lock);
	yes = c->slots[block] && c->slots[block]->state == ENTRY_READY;
	pthread_mutex_unlock(&c->lock);
	return yes;
}

void stp_cache_stats(struct stp_cache *c, struct stp_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->stats;
	out->resident = c->resident;
	out->pinned = c->pinned;
	out->joining = c->joining;
	out->budget = c->budget;
	out->buffers = (uint32_t)((c->charged + c->full - 1) / c->full);
	out->peak_buffers = (uint32_t)((c->peak_charged + c->full - 1) / c->full);
	out->max_buffers = c->max_buffers;
	out->parked = c->parked != NULL;
	pthread_mutex_unlock(&c->lock);
}
