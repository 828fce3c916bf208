#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reads of a tree's large files from a mounted default image and a --cut-inside image of it,
interleaved (run by hand, as root).

`mkstipple --cut-inside` stores each cut of a large file as a block of its own, padded with
zeros to the block size. This compares, on fresh mounts of both images:

  random   --reads reads of 4 KiB at offsets drawn uniformly over the bytes of the files of
           --min-size and more (seeded, the same list for both), each checked against the
           source tree; a read's time counts opening its file when first met;
  whole    every such file read whole, in 1 MiB reads, checked by SHA-256 against the tree.

Kinds: def and cut, mounted by this build's stipple; with --before BUILD, also def-before and
cut-before, the same images mounted by that build's stipple (a change measured before and
after in one run). The kinds are interleaved A B C D A B C D over --rounds rounds, each on a
fresh mount; the images are read into the page cache before timing. Reported: the medians
over the rounds of each measure (wall time, and the daemon's CPU time), the median of its
ratio to def's in the same round, and the daemon's figures after the random reads (blocks
decoded, peak RSS). The machine is shared: the ratios, each taken within a round, and the
CPU times are what to compare.

    tests/bench/cut_reads.py --tree DIR [--work DIR] [--build DIR] [--before DIR]
                             [--level N] [--reads N] [--rounds R] [--min-size BYTES]
"""

import argparse
import os
import random
import sys
import tempfile
import time

from benchlib import (into_page_cache, median, mount_status, peak_rss_mib, regular_files, sh,
                      stipple_daemon_pid, unmount, wait_mounted)
from treeutil import _sha256 as sha256_file  # tests/integration, on the path through benchlib

READ = 4096


def large_files(tree, min_size):
    """[(relative path, size)] of the regular files of MIN_SIZE bytes and more, sorted."""
    return sorted((rel, os.path.getsize(p)) for rel, p in regular_files(tree)
                  if os.path.getsize(p) >= min_size)


def draw_reads(tree, files, n, seed):
    """N reads [(path, offset, expected bytes)], uniform over the bytes of FILES."""
    rnd = random.Random(seed)
    total = sum(size for _, size in files)
    reads = []
    for _ in range(n):
        byte = rnd.randrange(total)
        for path, size in files:
            if byte < size:
                break
            byte -= size
        with open(os.path.join(tree, path), "rb") as f:
            f.seek(byte)
            reads.append((path, byte, f.read(READ)))
    return reads


def random_reads(mnt, reads):
    fds = {}
    try:
        t0 = time.perf_counter()
        for path, off, want in reads:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(os.path.join(mnt, path), os.O_RDONLY)
            if os.pread(fd, READ, off) != want:
                sys.exit("cut_reads: %s: %d bytes at %d differ from the source" % (path, len(want), off))
        return time.perf_counter() - t0
    finally:
        for fd in fds.values():
            os.close(fd)


def whole_reads(mnt, files, digests):
    t0 = time.perf_counter()
    for path, _ in files:
        if sha256_file(os.path.join(mnt, path)) != digests[path]:
            sys.exit("cut_reads: %s differs from the source" % path)
    return time.perf_counter() - t0


def cpu_seconds(pid):
    """User and system CPU time of PID so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mounted(stipple, image, work, fn):
    """Mounts IMAGE fresh, runs FN(mount), returns ((its result, the daemon's CPU seconds),
    status keys, peak RSS MiB)."""
    mnt = tempfile.mkdtemp(dir=work, prefix="mnt-")
    try:
        sh([stipple, "mount", image, mnt])
        wait_mounted(mnt)
        pid = stipple_daemon_pid(stipple, mnt)
        cpu = cpu_seconds(pid)
        out = fn(mnt)
        return (out, cpu_seconds(pid) - cpu), mount_status(mnt), peak_rss_mib(pid)
    finally:
        unmount(mnt)
        os.rmdir(mnt)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", required=True)
    p.add_argument("--work")
    p.add_argument("--build", default=os.environ.get("STIPPLE_BUILD", "build"))
    p.add_argument("--before", help="another build directory: its stipple mounts *-before")
    p.add_argument("--level", type=int, default=19, help="zstd level of both images")
    p.add_argument("--reads", type=int, default=300)
    p.add_argument("--seed", type=int, default=31)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-size", type=int, default=4 << 20,
                   help="files this large and more are read (the cut threshold at 32 MiB)")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="cut-reads-", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    builds = {"": os.path.abspath(a.build)}
    if a.before:
        builds["-before"] = os.path.abspath(a.before)
    images = {}
    for kind, opts in (("def", []), ("cut", ["--cut-inside"])):
        images[kind] = os.path.join(work, kind + ".stp")
        if not os.path.exists(images[kind]):
            sh([os.path.join(builds[""], "builder", "mkstipple"), "-q", "-l", str(a.level), *opts,
                a.tree, images[kind]])
    into_page_cache(*images.values())
    files = large_files(a.tree, a.min_size)
    if not files:
        sys.exit("cut_reads: no file of %d bytes or more in %s" % (a.min_size, a.tree))
    reads = draw_reads(a.tree, files, a.reads, a.seed)
    digests = {path: sha256_file(os.path.join(a.tree, path)) for path, _ in files}
    kinds = [(img + suffix, img, build) for suffix, build in builds.items() for img in ("def", "cut")]
    res = {k: {"random": [], "whole": [], "random_cpu": [], "whole_cpu": [], "decoded": [], "rss": []}
           for k, _, _ in kinds}
    for r in range(a.rounds):
        for kind, img, build in kinds:
            stipple = os.path.join(build, "mounthelper", "stipple")
            (t, cpu), st, rss = mounted(stipple, images[img], work, lambda m: random_reads(m, reads))
            res[kind]["random"].append(t)
            res[kind]["random_cpu"].append(cpu)
            res[kind]["decoded"].append(int(st.get("blocks_decoded", 0)))
            res[kind]["rss"].append(rss or 0)
            (t, cpu), _, _ = mounted(stipple, images[img], work, lambda m: whole_reads(m, files, digests))
            res[kind]["whole"].append(t)
            res[kind]["whole_cpu"].append(cpu)
            print("round %d %-10s random %.2f s  whole %.2f s" % (r + 1, kind, res[kind]["random"][-1], t),
                  file=sys.stderr)
    print("%d files of %d bytes and more, %.1f MB; %d random reads of 4 KiB; %d rounds interleaved;"
          " machine shared (load %.1f)" % (len(files), a.min_size, sum(s for _, s in files) / 1e6,
                                            a.reads, a.rounds, os.getloadavg()[0]))
    print("medians; x def: the median over rounds of the ratio to def in the same round;"
          " cpu: the daemon's user+system seconds")
    cols = ("random", "random_cpu", "whole", "whole_cpu")
    print("%-11s" % "kind" + "".join("%11s %6s" % (c, "x def") for c in cols) + " %8s %8s"
          % ("decoded", "RSS MiB"))
    for kind, _, _ in kinds:
        base = "def" + kind[3:] if kind.startswith("cut") else kind
        line = "%-11s" % kind
        for c in cols:
            ratios = [x / y for x, y in zip(res[kind][c], res[base][c]) if y]
            line += "%11.2f %6.2f" % (median(res[kind][c]), median(ratios) or 0)
        print(line + " %8d %8.0f" % (median(res[kind]["decoded"]), median(res[kind]["rss"])))


if __name__ == "__main__":
    main()
