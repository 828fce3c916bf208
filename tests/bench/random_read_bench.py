#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Random-read benchmark: 4 KiB reads at uniform offsets over a tree's file bytes, each on
a fresh mount, one tree served several ways side by side.

  stipple-1M      stipple mount (this build), image with 1 MiB blocks, default cache
  before-1M       the same image mounted by another build's stipple (--before BUILD), for
                  a change measured before and after in one run
  stipple-32M     the same with 32 MiB blocks
  squashfuse_ll   squashfuse's low-level FUSE server, mksquashfs -comp zstd
                  -Xcompression-level 19 -b 1M
  squashfs        the kernel's squashfs, a loop mount of that same image
  erofs           the kernel's erofs, mkfs.erofs -zlz4hc, a loop mount
  dwarfs          DwarFS (/opt/dwarfs/bin, when there) with its default cache, mkdwarfs
                  -S 20 (1 MiB blocks; --dwarfs-args to change)

The tree: --tree DIR, else Debian's Python standard library (/usr/lib/python3.X, asked of
/usr/bin/python3: never the library of whichever python3 runs this, which may be a pyenv
build ten times larger); the output names it.

The reads: a byte is drawn uniformly from all the tree's regular-file bytes (so a file is
picked weighted by its size) and up to 4 KiB read from there; --reads of them, drawn from
--seed, the same list for every kind. Every read is compared with the bytes of the source
tree (read before timing). A read's latency counts opening its file the first time it is
met on this mount (the descriptor stays open for the round, so that no kind loses its page
cache to a close); reads/s is the number of reads over the whole loop's time.

The kinds are interleaved A B C D A B C D over --rounds rounds, each on a fresh mount (the
FUSE servers start again, so their caches and the kernel's caches of their trees go); the
image files stay in the page cache, read once before timing. Reported: medians over the
rounds of reads/s, p50, p99 and p99.9 latency, the ratio of reads/s to kernel erofs (to
squashfuse_ll when erofs is left out), and the serving process's peak RSS (VmHWM of the FUSE daemon after the reads). The kernel file
system has no daemon: its memory is the page cache, which is not counted (shown as "-").

Needs root. The images are built in --work (kept when --work is given; reused when there).

usage: random_read_bench.py [--tree DIR] [--build DIR] [--before DIR] [--work DIR] [--reads N] [--seed S]
                            [--rounds R] [--only KIND,...] [--fadvise-random]
                            [--dwarfs DIR] [--dwarfs-args ARGS]
"""

import argparse
import bisect
import os
import random
import resource
import shlex
import subprocess
import sys
import tempfile
import time

from benchlib import (debian_stdlib, file_sizes, into_page_cache, median, peak_rss_mib,
                      safe_rmtree, sh, stipple_daemon_pid, unmount, wait_mounted)

READ = 4096
KINDS = ["stipple-1M", "before-1M", "stipple-32M", "squashfuse_ll", "squashfs", "erofs", "dwarfs"]


def draw_reads(tree, files, n, seed):
    """N reads [(path, offset, expected bytes)], uniform over the bytes of FILES."""
    ends, total = [], 0
    for _, size in files:
        total += size
        ends.append(total)
    rnd = random.Random(seed)
    reads = []
    for _ in range(n):
        byte = rnd.randrange(total)
        i = bisect.bisect_right(ends, byte)
        path, size = files[i]
        off = byte - (ends[i] - size)
        with open(os.path.join(tree, path), "rb") as f:
            f.seek(off)
            reads.append((path, off, f.read(READ)))
    return reads, total


class Kinds:
    def __init__(self, a):
        self.a = a
        self.work = a.work or tempfile.mkdtemp(prefix="stipple-rbench-")
        os.makedirs(self.work, exist_ok=True)
        self.stipple = os.path.join(a.build, "mounthelper", "stipple")
        self.mkstipple = os.path.join(a.build, "builder", "mkstipple")
        self.stipple_before = os.path.join(a.before or a.build, "mounthelper", "stipple")
        self.images = {"stipple-1M": os.path.join(self.work, "tree-1M.stipple"),
                       "before-1M": os.path.join(self.work, "tree-1M.stipple"),
                       "stipple-32M": os.path.join(self.work, "tree-32M.stipple"),
                       "squashfuse_ll": os.path.join(self.work, "tree.squashfs"),
                       "squashfs": os.path.join(self.work, "tree.squashfs"),
                       "erofs": os.path.join(self.work, "tree.erofs"),
                       "dwarfs": os.path.join(self.work, "tree.dwarfs")}
        self.procs = {}  # mount point: the FUSE server started in the foreground

    def build(self, kinds):
        a = self.a
        for k in kinds:
            img = self.images[k]
            if os.path.exists(img):
                continue
            t = time.monotonic()
            if k.startswith("stipple-") or k == "before-1M":
                sh([self.mkstipple, "--quiet", "--block-size", k.split("-")[1], a.tree, img])
            elif k in ("squashfuse_ll", "squashfs"):
                sh(["mksquashfs", a.tree, img, "-comp", "zstd", "-Xcompression-level", "19",
                    "-b", "1M", "-noappend", "-quiet", "-no-progress"],
                   stdout=subprocess.DEVNULL)
            elif k == "erofs":
                sh(["mkfs.erofs", "-zlz4hc", img, a.tree], stdout=subprocess.DEVNULL)
            elif k == "dwarfs":
                sh([os.path.join(a.dwarfs, "mkdwarfs"), "-i", a.tree, "-o", img,
                    "--progress=none", "--log-level=warn", *shlex.split(a.dwarfs_args)])
            print("%s: built in %.1f s, %.2f MB" % (k, time.monotonic() - t,
                                                     os.path.getsize(img) / 1e6))
        into_page_cache(*{self.images[k] for k in kinds})

    def mount(self, kind, mnt):
        """Mounts KIND on MNT; returns the serving process's pid, or None (kernel)."""
        img = self.images[kind]
        if kind.startswith("stipple-") or kind == "before-1M":
            stipple = self.stipple_before if kind == "before-1M" else self.stipple
            sh([stipple, "mount", img, mnt])
            wait_mounted(mnt)
            return stipple_daemon_pid(stipple, mnt)
        if kind in ("squashfs", "erofs"):
            sh(["mount", "-t", kind, "-o", "loop,ro", img, mnt])
            wait_mounted(mnt)
            return None
        cmd = (["squashfuse_ll", "-f", img, mnt] if kind == "squashfuse_ll" else
               [os.path.join(self.a.dwarfs, "dwarfs"), img, mnt, "-f"])
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.procs[mnt] = proc
        wait_mounted(mnt, proc)
        return proc.pid

    def unmount(self, mnt):
        unmount(mnt)
        proc = self.procs.pop(mnt, None)
        if proc is not None:
            proc.wait(timeout=30)


def one_round(kinds, kind, reads, fadvise):
    """Mounts KIND fresh, runs READS, returns (seconds, [latency], peak RSS MiB or None)."""
    mnt = tempfile.mkdtemp(dir=kinds.work, prefix="mnt-")
    fds, lat = {}, []
    try:
        pid = kinds.mount(kind, mnt)
        t0 = time.perf_counter()
        for path, off, want in reads:
            t = time.perf_counter()
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(os.path.join(mnt, path), os.O_RDONLY)
                if fadvise:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            got = os.pread(fd, READ, off)
            lat.append(time.perf_counter() - t)
            if got != want:
                sys.exit("random_read_bench: %s: %s: %d bytes at %d differ from the source"
                         % (kind, path, len(want), off))
        total = time.perf_counter() - t0
        rss = peak_rss_mib(pid) if pid else None
        return total, lat, rss
    finally:
        for fd in fds.values():
            os.close(fd)
        kinds.unmount(mnt)
        os.rmdir(mnt)


def pct(sorted_xs, q):
    return sorted_xs[min(len(sorted_xs) - 1, int(q * len(sorted_xs)))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", help="the tree read (default: Debian's Python standard "
                   "library, /usr/lib/python3.X, whichever python3 runs this)")
    p.add_argument("--build", default=os.environ.get("STIPPLE_BUILD", "build"))
    p.add_argument("--work")
    p.add_argument("--before", help="another build directory: its stipple serves before-1M")
    p.add_argument("--reads", type=int, default=10000)
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default=",".join(KINDS))
    p.add_argument("--fadvise-random", action="store_true",
                   help="POSIX_FADV_RANDOM on every file: no readahead around the reads")
    p.add_argument("--dwarfs", default="/opt/dwarfs/bin")
    p.add_argument("--dwarfs-args", default="-S 20")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.tree = os.path.realpath(a.tree or debian_stdlib())
    if os.geteuid() != 0:
        sys.exit("random_read_bench: needs root (mounts, loop devices)")
    only = [k for k in KINDS if k in a.only.split(",")]
    if "before-1M" in only and not a.before:
        sys.exit("random_read_bench: before-1M needs --before BUILD")
    if "dwarfs" in only and not all(os.access(os.path.join(a.dwarfs, x), os.X_OK)
                                    for x in ("dwarfs", "mkdwarfs")):
        print("random_read_bench: no %s/dwarfs and mkdwarfs: DwarFS left out" % a.dwarfs)
        only.remove("dwarfs")

    # the regular files with bytes, sorted: [(relative path, size)]
    files = sorted(kv for kv in file_sizes(a.tree).items() if kv[1])
    reads, total = draw_reads(a.tree, files, a.reads, a.seed)
    print("tree %s: %d files, %.1f MiB" % (a.tree, len(files), total / 2**20), flush=True)
    # a descriptor per file met in a round
    need = len({r[0] for r in reads}) + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    kinds = Kinds(a)
    kinds.build(only)

    res = {k: {"rate": [], "p50": [], "p99": [], "p999": [], "rss": []} for k in only}
    for r in range(a.rounds):
        for k in only:
            secs, lat, rss = one_round(kinds, k, reads, a.fadvise_random)
            lat.sort()
            res[k]["rate"].append(len(reads) / secs)
            for q, key in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999")):
                res[k][key].append(pct(lat, q) * 1e3)
            if rss is not None:
                res[k]["rss"].append(rss)
        print("round %d/%d done" % (r + 1, a.rounds), file=sys.stderr)

    print("\ntree %s: %d files, %.1f MiB; %d reads of 4 KiB (seed %d)%s; medians of %d "
          "rounds, each on a fresh mount" % (a.tree, len(files), total / 2**20, len(reads),
                                            a.seed, ", POSIX_FADV_RANDOM" if a.fadvise_random
                                            else "", a.rounds))
    # the ratio is to kernel erofs when it ran (issue 32's anchor), else to squashfuse_ll
    ref = "erofs" if "erofs" in res else "squashfuse_ll" if "squashfuse_ll" in res else None
    base = median(res[ref]["rate"]) if ref else None
    print("%-14s %10s %8s %9s %9s %9s %12s %10s" % ("", "reads/s", "ratio", "p50 ms",
                                                    "p99 ms", "p99.9 ms", "peak RSS MiB",
                                                    "image MB"))
    for k in only:
        d = res[k]
        rate = median(d["rate"])
        rss = "%12.1f" % max(d["rss"]) if d["rss"] else "%12s" % "-"
        print("%-14s %10.0f %8s %9.3f %9.3f %9.3f %s %10.1f" % (
            k, rate, "%.2fx" % (rate / base) if base else "-", median(d["p50"]),
            median(d["p99"]), median(d["p999"]), rss,
            os.path.getsize(kinds.images[k]) / 1e6))
    print("peak RSS: the FUSE server's VmHWM after the reads (highest over the rounds); "
          "squashfs is the kernel's: its page cache is not counted")
    if not a.work:
        safe_rmtree(kinds.work, "random_read_bench")


if __name__ == "__main__":
    main()
