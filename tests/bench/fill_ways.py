#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Launch from the plain folder against a mount whose page cache was filled in different
ways: does the way the pages got there change the launch? (root only)

Columns, interleaved in every round (the order rotates from round to round, with a plain
launch between every two others):
  plain        the tree as it is cached now
  LABEL        --copy LABEL=DIR: another copy of the tree, say one recached with
               `folio_sizes.py --recache large` and one with `--recache small`: the same
               files, only their page-cache folios and frames changed
  warmed       a fresh mount, warming done (stipple status --wait): pages pushed by
               notify_store; "warmed 2nd" is a second launch on it
  read         a fresh mount with warm_workers=0, every hot file read whole (1 MiB
               reads): pages filled by the kernel's own FUSE reads
  populate     same, by mmap and MADV_POPULATE_READ of every hot file (page faults and
               the kernel's readahead, waited for)
Each launch runs under chrt -f 10; its wall time, CPU time (user + system, from wait4)
and page faults are taken, and the table gives medians with the ratio of medians to
plain. folio_sizes.py tells the folio sizes of each way.

usage: fill_ways.py --image IMG --tree DIR --mnt DIR [--copy LABEL=DIR]... [--rounds N]
                    [--stipple PATH] -- COMMAND... ({} in COMMAND is the launch folder)
"""
import argparse
import mmap
import os
import statistics
import subprocess
import sys
import time

from benchlib import into_page_cache, unmount


def hot_files(hot_list):
    names = []
    with open(hot_list) as f:
        for line in f:
            name, _, ranges = line.rstrip("\n").partition("\t")
            if ranges != "lookup" and name not in names:
                names.append(name)
    return names


def launch(cmd, folder):
    argv = ["chrt", "-f", "10"] + [a.replace("{}", folder) for a in cmd]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"fill_ways: the launch from {folder} failed")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_minflt + ru.ru_majflt


MADV_POPULATE_READ = 22  # Linux 5.14: fault every page in, waiting for the reads


def fill_populate(mnt, names):
    for n in names:
        with open(os.path.join(mnt, n), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size:
                m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
                m.madvise(MADV_POPULATE_READ)
                m.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True)
    ap.add_argument("--hot-list", help="the recorded list (default: hot.txt beside IMAGE)")
    ap.add_argument("--tree", required=True)
    ap.add_argument("--copy", action="append", default=[])
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--stipple", default="stipple")
    ap.add_argument("--ways", default="plain warmed read populate")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    names = hot_files(a.hot_list or os.path.join(os.path.dirname(a.image), "hot.txt"))
    copies = dict(c.split("=", 1) for c in a.copy)
    ways = a.ways.split() + list(copies)

    def mount(*opts):
        subprocess.run([a.stipple, "mount", a.image, a.mnt, *opts], check=True,
                       stderr=subprocess.DEVNULL)

    def run(way):
        if way == "plain":
            return {"plain": launch(a.cmd, a.tree)}
        if way in copies:
            return {way: launch(a.cmd, copies[way])}
        if way == "warmed":
            mount()
            subprocess.run([a.stipple, "status", "--wait", a.mnt], check=True,
                           stdout=subprocess.DEVNULL)
            r = {"warmed": launch(a.cmd, a.mnt), "warmed 2nd": launch(a.cmd, a.mnt)}
        else:
            mount("-o", "warm_workers=0")
            if way == "read":
                into_page_cache(*(os.path.join(a.mnt, n) for n in names))
            else:
                fill_populate(a.mnt, names)
            r = {way: launch(a.cmd, a.mnt)}
        unmount(a.mnt)
        return r

    got = {}
    for i in range(a.rounds):
        order = ways[i % len(ways):] + ways[:i % len(ways)]
        if "plain" in order:  # plain between every two others
            order = [w for w in order if w != "plain"]
            order = [x for w in order for x in ("plain", w)] + ["plain"]
        for w in order:
            for k, v in run(w).items():
                got.setdefault(k, []).append(v)
        print(f"fill_ways: round {i + 1} of {a.rounds}", file=sys.stderr)
    base = [statistics.median(c) for c in zip(*got["plain"])]
    print(f"{a.rounds} rounds, medians; load average {open('/proc/loadavg').read()[:14]}")
    print(f"{'way':<12} {'wall ms':>8} {'x plain':>8} {'quartiles':>13} {'cpu ms':>8} "
          f"{'x plain':>8} {'faults':>7}")
    for k, v in got.items():
        w, c, f = (statistics.median(x) for x in zip(*v))
        q = statistics.quantiles([x[0] / base[0] for x in v], n=4) if len(v) > 1 else [0] * 3
        print(f"{k:<12} {w * 1e3:8.1f} {w / base[0]:8.3f} {q[0]:6.3f}-{q[2]:6.3f} "
              f"{c * 1e3:8.1f} {c / base[1]:8.3f} {f:7.0f}")


if __name__ == "__main__":
    main()
