/* SPDX-License-Identifier: MIT */
/*
 * The fetcher of a URL mount: a program of its own, stipple-fetcher (fetcherd.c), which
 * the monitor execs before the daemon and hands its options and channels (setup.h),
 * that talks HTTP (http.h) and nothing else: only it links libcurl. Before it confines itself it reads
 * the CA bundle into memory (ca=, or libcurl's default file) and resolves the server's
 * and the proxy's names (handed to libcurl as CURLOPT_RESOLVE), because confined it can
 * open no file; then it enters the sandbox with the fetcher's filter (sandbox.h: sockets
 * of the Internet families, no FUSE, no file), probes the URL, tells the monitor the size
 * and validator (HELLO, monproto.h), and serves raw byte ranges on its channels until they close. It never
 * parses a byte of the image: the daemon does, confined, from what it is handed (a
 * published image's index aside, which it checks whole before serving from it:
 * published.h).
 *
 * A channel is a stream socket, one request at a time: struct stp_fetch_req, answered by
 * frames (struct stp_fetch_frame): data frames of at most STP_FETCH_PIECE bytes that add
 * up to the length asked, or, ending the answer early, one frame whose err is a negative
 * errno and whose LEN bytes say why in words (without the URL). Each frame says how many
 * HTTP requests its piece took. An empty frame (err, len and tries 0) says only that the
 * fetcher is still at it: it is sent every few seconds while a published image's block,
 * which arrives whole before a byte of it is sent, is fetched. Frames do not extend a
 * request past its deadline (remote.h), so a fetcher turned hostile cannot hold a read.
 *
 * A published image (published.h): the fetcher reads the index at the URL and serves the
 * image it stands for; HELLO's size is that image's and BLOCKS its count of store slots:
 * first the distinct bases of its deltas, in batches of their own (BASES set: the
 * monitor hands such a slot only a file that holds bytes, read-only; a base is never
 * made nor written), then its blocks, its delta files and its deltas' rebuilt contents
 * (stored as blocks are, published.h). It
 * serves its channels from then on, and offers the monitor the hashes of the first
 * STP_FETCH_STORE_MAX slots in batches (BLOCKS, struct stp_fetch_blocks) on the control
 * socket, which stays open for that. The monitor reads them only once it has checked the
 * superblock and the mount's budget, and answers each batch with the descriptors of the
 * blocks' files in the store (STORE, struct stp_fetch_store, store.h), or closes the
 * socket: no store (blocks without a file are fetched each time). The monitor says stop
 * on the batch after which it takes no more (store.h: what cache_size= holds). A fetcher
 * that offers fewer blocks shuts its end for writing once it has offered them. Last, the monitor
 * trims the store and sends ROOM (struct stp_fetch_room): the bytes of blocks the
 * fetcher may write into the store during the mount, so that cache_size= holds while
 * it runs; without it, the fetcher writes none.
 *
 * Called from the monitor's single thread; not thread-safe.
 */
#ifndef STP_FETCHER_H
#define STP_FETCHER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct stp_mount_opts;
struct stp_sandbox_prog;

#define STP_FETCH_CHANS_MAX 16u
#define STP_FETCH_PIECE (8u << 20)
#define STP_FETCH_WHY_MAX 256u

struct stp_fetch_req {
	uint64_t off, len;
};
/* Set in a request's OFF: LEN bytes of the content of block OFF & ~STP_FETCH_CONTENT
 * rebuilt from its delta (stp_published_content), answered as a read is, or by -ENOENT
 * when there is none to rebuild it from, -ENOSYS when the image has no delta at all (a
 * one-file image never has; the daemon asks no more): the daemon then reads the block's
 * stored bytes. */
#define STP_FETCH_CONTENT (1ull << 63)

struct stp_fetch_frame {
	int32_t err;
	uint32_t len;
	uint32_t tries; /* HTTP requests this piece took, retries included (for the status),
			 * with STP_FETCH_NETWORK when its bytes came over the network though
			 * it took none (the rest of a published block fetched for another frame),
			 * or STP_FETCH_STORE */
};

#define STP_FETCH_NETWORK (1u << 31)
/* ... or STP_FETCH_STORE when they came from the store (published.h): a disk cache hit. */
#define STP_FETCH_STORE (1u << 30)

/* The fetcher's HELLO, once it has probed the URL: err 0, or a negative errno and WHY. */
struct stp_fetch_hello {
	int32_t err;
	uint64_t size;
	char validator[256];
	char why[STP_FETCH_WHY_MAX];
	uint64_t blocks;  /* a published image's blocks, 0 for a one-file image */
	uint64_t index_len; /* and its index's bytes, which the fetcher holds */
};

/* A batch of block hashes and its answer: the descriptors attached to STORE are the files
 * of blocks FIRST + WHICH[k], in order. STOP: send no more batches. */
#define STP_FETCH_BATCH 32u
/* The most store files a mount may hold (each pins a descriptor, an inode and a lock):
 * 2 TiB of 32 MiB blocks, whatever count an index claims; it makes no more than
 * cache_size= holds (stp_store_writable_max). */
#define STP_FETCH_STORE_MAX 65536u
struct stp_fetch_blocks {
	uint64_t first;
	uint32_t count;   /* 1 to STP_FETCH_BATCH */
	uint32_t bases;   /* 1: the hashes are bases of deltas, whose files are only read */
	uint8_t sha[STP_FETCH_BATCH][32];
};

struct stp_fetch_store {
	uint64_t first;
	uint32_t nfds;
	uint32_t stop;
	uint32_t which[STP_FETCH_BATCH];
};

struct stp_fetch_room {
	uint64_t bytes;
};

/* Whether BUF (LEN bytes, from the fetcher) is the batch of blocks from FIRST of an
 * image of BLOCKS: 0 or -EPROTO. */
int stp_fetch_blocks_check(const void *buf, size_t len, uint64_t first, uint64_t blocks,
			   struct stp_fetch_blocks *out);
/* Whether BUF (LEN bytes, from the monitor) answers batch ASKED with NFDS descriptors:
 * 0 or -EPROTO. */
int stp_fetch_store_check(const void *buf, size_t len, const struct stp_fetch_blocks *asked,
			  unsigned nfds, struct stp_fetch_store *out);

struct stp_fetcher {
	pid_t pid;
	int pidfd;                      /* opened while it is the monitor's child: the
					 * watcher ends it with its mount (watcher.h) */
	int chans[STP_FETCH_CHANS_MAX]; /* the daemon's ends (-1: closed) */
	unsigned nchans;
	int theirs[STP_FETCH_CHANS_MAX]; /* the fetcher's ends, until stp_fetcher_greet */
	int ctl[2];                     /* its control socket: ours (kept after greet for a
					 * published image's store batches), and the end it is exec'd with */
	uint64_t size;                  /* of the file at the URL */
	char validator[256];            /* ETag or Last-Modified, "" without */
	uint64_t blocks;                /* a published image's blocks (0: a one-file image) */
	uint64_t index_len;             /* its index's bytes, held by the fetcher */
	uint64_t file_max, data_max;    /* its hard limits, once limits_read */
	bool limits_read;
	/* Set by the owner once it is spawned: /proc/PID/limits (-1: not known), and how it
	 * is killed (NULL: it is not, it ends once its channels close). The monitor's go
	 * through monitor.c; fetcher.c makes no privileged call of its own. */
	int limits_fd;
	int (*signal)(int pidfd, pid_t pid, int sig);
};

/* The channels a mount of OPTS uses: one per warming worker and a few for reads. */
unsigned stp_fetcher_channels(const struct stp_mount_opts *o);

/* The fetcher's hard limit on the size of a file it writes (RLIMIT_FSIZE, which it
 * lowers to the index's largest block and cannot raise again), as /proc tells it:
 * UINT64_MAX when unlimited or unknown. Read once it has sent HELLO, it bounds what a
 * store file may be made to hold, whatever the fetcher does next (store.h). Both
 * limits are read in one pass, on the first call of either, and kept in F (not
 * thread-safe). */
uint64_t stp_fetcher_file_max(struct stp_fetcher *f);

/* The same for its memory (RLIMIT_DATA), which it lowers before HELLO to
 * stp_fetcher_data_fixed(its channels), and for a published image its index and a
 * block buffer per channel: what the mount's budget counts (budget.h). */
uint64_t stp_fetcher_data_max(struct stp_fetcher *f);
/* The part of a fetcher's memory no image decides: a piece buffer per channel of NCHANS,
 * libcurl's and OpenSSL's state, with room to spare. */
uint64_t stp_fetcher_data_fixed(unsigned nchans);
/* The most a fetcher may hold beyond its fixed part: a published image's largest index
 * and block buffers. It starts with RLIMIT_DATA at that over the fixed part of
 * STP_FETCH_CHANS_MAX channels (fetcherd.c), which it can only lower. */
uint64_t stp_fetcher_data_variable_max(void);

/* The longest the daemon's end of a channel waits for a frame, in seconds, for
 * timeout=TIMEOUT_S: much longer than the fetcher's own stall bound (its receive timeout). */
unsigned stp_fetcher_silence_s(unsigned timeout_s);

/* No fetcher: nothing open (every descriptor -1), for the release functions below. */
void stp_fetcher_init(struct stp_fetcher *f);

/* A fetcher for o->image starts in three steps: stp_fetcher_prepare makes its channels
 * and control socket; the monitor forks and execs stipple-fetcher with f->ctl[1]
 * (monitor.c, where every privileged call is) and closes that end; stp_fetcher_greet
 * hands the fetcher its channels and waits (at most the timeout and a margin) for its
 * probe. Each returns 0, or a negative errno with the URL and the cause printed on stderr
 * after PROG; after a failure of either, nothing of F is left open and the fetcher is
 * stopped. FORK_ERR is the fork's negative errno, or 0. FILTER: the seccomp program the
 * monitor built for the fetcher (filters.h), sent before its setup; NULL (a reader:
 * `stipple` links no libseccomp) or empty, and the fetcher builds its own. */
int stp_fetcher_prepare(const struct stp_mount_opts *o, const char *prog, struct stp_fetcher *f);
int stp_fetcher_greet(const struct stp_mount_opts *o, const char *prog, struct stp_fetcher *f,
		      int fork_err, const struct stp_sandbox_prog *filter);

/* The environment stipple-fetcher is exec'd with: the entries of environ that name a
 * proxy (http_proxy, https_proxy, all_proxy, no_proxy...), which libcurl reads, and
 * nothing else of the caller's (root's, for a mount through mount(8)). ENV has
 * STP_FETCHER_ENV_MAX slots; it is NULL-terminated and points into environ. */
#define STP_FETCHER_ENV_MAX 8u
void stp_fetcher_env(char **env);

/* Closes the control socket kept for the store (the fetcher then goes on without). */
void stp_fetcher_close_ctl(struct stp_fetcher *f);

/* Closes the channels this process holds (the fetcher ends once no process holds them).
 * Its pidfd stays, for the watcher. */
void stp_fetcher_release(struct stp_fetcher *f);

/* Kills the fetcher (F->signal) and waits for it (a mount that failed), and closes its
 * pidfd and limits_fd. */
void stp_fetcher_stop(struct stp_fetcher *f);

#endif
