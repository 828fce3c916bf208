#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Hammers the pattern in which a page-cache push (warming's or the filler's
fuse_lowlevel_notify_store) meets a read in flight: small blocks, a tiny cache budget,
warming on, many readers doing large reads (so readahead locks many pages and sends them
as background READs) over files that span blocks, each file's pages dropped again and
again so that the daemon decodes, fills and pushes while the readers wait on those pages.

A round mounts afresh (warming and priming run at every mount), reads for --seconds, and
unmounts. Every read is checked against the source. When no reader moves for --hang
seconds, the round is a hang: the kernel stacks of the daemon's threads and of the
readers are written to --out, the connection is aborted through fusectl (mounted for that
and unmounted after) and the mount is taken down. Exit status: 0 clean, 1 a hang, 2 a
wrong byte.

    push_stress.py [--build DIR] [--rounds N] [--seconds S] [--readers N] ...
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

import benchlib

KEYS = ("warm_stored_bytes", "fill_stored_bytes", "cache_waits", "blocks_decoded",
        "warm_done")
HERE = os.path.dirname(os.path.abspath(__file__))


def make_tree(root, nfiles, seed):
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(2000)]
    files = {}
    for i in range(nfiles):
        size = rng.randint(40_000, 900_000)
        out = bytearray()
        while len(out) < size:
            out += rng.choice(words) + b" "
        rel = "d%d/f%03d" % (i % 4, i)
        files[rel] = bytes(out[:size])
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(files[rel])
    return files


def hot_list(files, rng):
    """Every third file: a few ranges, so that warming pushes pages readers also want."""
    lines = []
    for rel in sorted(files)[::3]:
        size = len(files[rel])
        ranges = []
        for _ in range(3):
            a = rng.randrange(0, size, 4096)
            ranges.append("%d-%d" % (a, min(size, a + rng.choice((4096, 65536, 200_000)))))
        lines.append("%s\t%s" % (rel, ",".join(ranges)))
    return "\n".join(lines) + "\n"


class Readers:
    def __init__(self, mnt, files, n, seed):
        self.mnt, self.files, self.n = mnt, files, n
        self.names = sorted(files)
        self.moves = 0
        self.bad = []
        self.stop = False
        self.threads = [threading.Thread(target=self.run, args=(seed + i,), daemon=True)
                        for i in range(n)]

    def one(self, rng):
        rel = rng.choice(self.names)
        want = self.files[rel]
        fd = os.open(os.path.join(self.mnt, rel), os.O_RDONLY)
        try:
            if rng.random() < 0.7:  # drop its pages: the next reads go to the daemon
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            off = rng.randrange(0, len(want))
            size = rng.choice((4096, 65536, 1 << 20, 4 << 20))
            got = os.pread(fd, size, off)
        finally:
            os.close(fd)
        if got != want[off:off + size]:
            self.bad.append((rel, off, size))

    def run(self, seed):
        rng = random.Random(seed)
        while not self.stop:
            try:
                self.one(rng)
            except OSError as e:
                self.bad.append(("error", str(e)))
                return
            self.moves += 1

    def start(self):
        for t in self.threads:
            t.start()

    def alive(self):
        return [t for t in self.threads if t.is_alive()]


def stacks(pid):
    out = []
    task = "/proc/%d/task" % pid
    for tid in sorted(os.listdir(task), key=int):
        try:
            with open("%s/%s/comm" % (task, tid)) as f:
                comm = f.read().strip()
            with open("%s/%s/stack" % (task, tid)) as f:
                st = f.read()
        except OSError as e:
            comm, st = "?", str(e)
        out.append("--- %d/%s %s\n%s" % (pid, tid, comm, st))
    return "\n".join(out)


def abort_connection(mnt):
    dev = os.stat(mnt).st_dev
    conn = "/sys/fs/fuse/connections/%d" % os.minor(dev)
    mounted = False
    if not os.path.isdir(conn):
        subprocess.run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"])
        mounted = True
    try:
        with open(conn + "/abort", "w") as f:
            f.write("1")
        with open(conn + "/waiting") as f:
            waiting = f.read().strip()
    finally:
        if mounted:
            subprocess.run(["umount", "/sys/fs/fuse/connections"])
    return conn, waiting


def fuse_counters(mnt):
    conn = "/sys/fs/fuse/connections/%d" % os.minor(os.stat(mnt).st_dev)
    try:
        with open(conn + "/waiting") as f:
            return "waiting=" + f.read().strip()
    except OSError:
        return ""


def round_(a, image, files, mnt, r):
    args = [os.path.join(a.build, "mounthelper", "stipple"), "mount", "--cache-budget",
            str(a.budget), "--warm-workers", str(a.workers), "--readahead", a.readahead,
            image, mnt]
    benchlib.sh(args)
    pid = int(benchlib.mount_status(mnt)["pid"])
    rd = Readers(mnt, files, a.readers, r * 1000)
    rd.start()
    t_end = time.monotonic() + a.seconds
    last, last_t, hung = -1, time.monotonic(), False
    while time.monotonic() < t_end and not rd.bad:
        time.sleep(0.5)
        if rd.moves != last:
            last, last_t = rd.moves, time.monotonic()
        elif time.monotonic() - last_t > a.hang:
            hung = True
            break
    moves = rd.moves
    try:
        st = benchlib.mount_status(mnt) if not hung else {}
    except OSError:
        st = {}
    rd.status = " ".join("%s=%s" % (k, st[k]) for k in KEYS if k in st)
    if hung:
        with open(a.out, "a") as f:
            f.write("=== round %d: no read moved for %d s (%s)\n" % (r, a.hang, fuse_counters(mnt)))
            f.write(stacks(pid) + "\n")
            f.write(stacks(os.getpid()) + "\n")
        conn, waiting = abort_connection(mnt)
        print("round %d: HANG, stacks in %s; aborted %s (waiting %s)" % (r, a.out, conn, waiting))
    rd.stop = True
    for t in rd.threads:
        t.join(30)
    benchlib.unmount(mnt)
    return hung, moves, rd.bad, rd.status


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--readers", type=int, default=12)
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--budget", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--readahead", default="128K")
    p.add_argument("--block-size", default="64K")
    p.add_argument("--hang", type=int, default=20, help="seconds without a read: a hang")
    p.add_argument("--out", default="/var/tmp/push_stress.stacks")
    p.add_argument("--work", default=None, help="folder for the tree and image")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="push-stress-")
    rng = random.Random(7)
    files = make_tree(os.path.join(work, "tree"), a.files, 7)
    with open(os.path.join(work, "hot.list"), "w") as f:
        f.write(hot_list(files, rng))
    image = os.path.join(work, "img.stp")
    benchlib.sh([os.path.join(a.build, "builder", "mkstipple"), "-q", "--level", "1",
                 "--block-size", a.block_size, "--hot-block-size", a.block_size,
                 "--hot-list", os.path.join(work, "hot.list"), os.path.join(work, "tree"),
                 image], stdout=subprocess.DEVNULL)
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    hangs = total = 0
    try:
        for r in range(a.rounds):
            hung, moves, bad, status = round_(a, image, files, mnt, r)
            hangs += hung
            total += moves
            print("round %d: %d reads%s%s %s" % (r, moves, ", HANG" if hung else "",
                                                ", BAD %s" % bad[:3] if bad else "", status),
                  flush=True)
            if bad and not hung:
                return 2
    finally:
        benchlib.unmount(mnt)
    print("%d rounds, %d reads, %d hangs" % (a.rounds, total, hangs))
    return 1 if hangs else 0


if __name__ == "__main__":
    sys.exit(main())
