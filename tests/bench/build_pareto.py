#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Build time against image size: mkstipple builds beside mksquashfs (run by hand).

    tests/bench/build_pareto.py [--rounds N] [--build NAME=BUILDDIR]... [--full] TREE...

Builds each TREE with every setting, interleaved round by round (A B C .. A B C), and
prints one row per setting: image bytes (exact, and checked to be the same every round),
median wall and CPU time (user + system of the build and its threads), and ratios to
`mksquashfs -comp zstd -Xcompression-level 19 -b 1M`, the anchor. Rows on the Pareto
front (no other row both smaller and quicker, by CPU) are marked. The load average is
printed before and after: on a shared machine wall times swing with it, CPU times less.

--build NAME=DIR (repeatable) names mkstipple builds to compare, e.g. before=../main/build
after=build (default: this tree's build as "mkstipple"). Each is run at its defaults.
--full adds, for the first build, --no-bcj, --level 15, 17, 18 and 22 and 4 MiB blocks, and
for mksquashfs levels 15 and 22 at 1 MiB and level 19 at 128 KiB. Needs squashfs-tools.
The zstd parameters behind one level, block by block, are swept by build_params.c.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ANCHOR = "mksquashfs zstd-19 -b 1M"


def mkstipple(build):
    return os.path.join(build, "builder", "mkstipple")


def settings(builds, full):
    """[(name, argv maker)] in the order each round runs them."""
    st = [(name, [mkstipple(d), "-q"]) for name, d in builds]
    sq = [(ANCHOR, ["-comp", "zstd", "-Xcompression-level", "19", "-b", "1M"])]
    if full:
        first_name, first = builds[0]
        for extra in (["--no-bcj"], ["--level", "15"], ["--level", "17"], ["--level", "18"],
                      ["--level", "22"], ["--block-size", "4M"]):
            st.append(("%s %s" % (first_name, " ".join(extra)), [mkstipple(first), "-q"] + extra))
        for level, block in (("15", "1M"), ("22", "1M"), ("19", "128K")):
            sq.append(("mksquashfs zstd-%s -b %s" % (level, block),
                       ["-comp", "zstd", "-Xcompression-level", level, "-b", block]))
    out = [(name, lambda src, img, a=argv: a + [src, img]) for name, argv in st]
    out += [(name, lambda src, img, e=extra: ["mksquashfs", src, img] + e +
             ["-noappend", "-quiet", "-no-progress"]) for name, extra in sq]
    return out


def timed(argv):
    """Runs ARGV; returns (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_tree(tree, rounds, sets, work):
    rows = {name: {"wall": [], "cpu": [], "size": None} for name, _ in sets}
    for i in range(rounds):
        for name, cmd in sets:
            img = os.path.join(work, "image")
            wall, cpu = timed(cmd(tree, img))
            size = os.path.getsize(img)
            os.unlink(img)
            r = rows[name]
            if r["size"] is not None and r["size"] != size:
                sys.exit("%s: %s made %d bytes, then %d" % (tree, name, r["size"], size))
            r["size"] = size
            r["wall"].append(wall)
            r["cpu"].append(cpu)
            print("  round %d %-32s %12d B %7.1f s wall %7.1f s CPU" % (i + 1, name, size, wall, cpu),
                  file=sys.stderr, flush=True)
    return rows


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def print_rows(tree, rows, rounds, load_before):
    med = {n: (r["size"], statistics.median(r["wall"]), statistics.median(r["cpu"]))
           for n, r in rows.items()}
    a_size, a_wall, a_cpu = med[ANCHOR]
    print("\n%s (%d bytes in files), medians of %d interleaved rounds, load average %s "
          "before, %s after, %d CPUs" % (tree, tree_bytes(tree), rounds, load_before, load(),
                                         os.cpu_count()))
    print("| setting | image bytes | x anchor | wall | x anchor | CPU | x anchor | front |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, (size, wall, cpu) in sorted(med.items(), key=lambda kv: kv[1][0]):
        front = not any(s <= size and c <= cpu and (s, c) != (size, cpu)
                        for s, _, c in med.values())
        print("| %s | %d | %.3f | %.1f s | %.2f | %.1f s | %.2f | %s |" %
              (n, size, size / a_size, wall, wall / a_wall, cpu, cpu / a_cpu,
               "*" if front else ""))
    sys.stdout.flush()


def tree_bytes(tree):
    total = 0
    for root, _, files in os.walk(tree):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("trees", nargs="+")
    args = ap.parse_args()
    builds = [tuple(b.split("=", 1)) for b in args.build] or \
        [("mkstipple", os.environ.get("STIPPLE_BUILD", os.path.join(REPO, "build")))]
    if not shutil.which("mksquashfs"):
        sys.exit("mksquashfs missing (apt-get install squashfs-tools)")
    for name, d in builds:
        if not os.access(mkstipple(d), os.X_OK):
            sys.exit("%s: %s not built" % (name, mkstipple(d)))
    sets = settings(builds, args.full)
    with tempfile.TemporaryDirectory(prefix="stipple-pareto.", dir="/var/tmp") as work:
        for tree in args.trees:
            before = load()
            print_rows(tree, bench_tree(tree, args.rounds, sets, work), args.rounds, before)


if __name__ == "__main__":
    main()
