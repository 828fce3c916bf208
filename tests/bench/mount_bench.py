#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Mount benchmark: one tree served four ways, side by side.

  plain          the folder itself (bind-mounted where a prefix is needed)
  stipple        stipple mount (this build)
  squashfuse_ll  squashfuse's low-level FUSE server, same tree, mksquashfs zstd -19 1 MiB
  squashfs       the kernel's squashfs on a loop device, the same image

Measures, as medians over --runs fresh mounts:
  tree read       `find DIR -type f -print0 | xargs -0 cat >/dev/null` on a fresh mount
  python fresh    Debian's python3.11 with PYTHONHOME on the mount, first run on a fresh mount
  python again    the same, again on the same mount (median of --repeat runs per mount)

The image files themselves stay in the page cache (they are read once before timing), so
the figures are about decoding and the filesystem, not the disk. Needs root.

usage: mount_bench.py [--tree DIR] [--build DIR] [--work DIR] [--runs N] [--repeat N]
                      [--block-size SIZE] [--level N] [--cache-budget N] [--only NAMES]
"""

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time

from benchlib import (PYTHON, PYTHON_LIB, into_page_cache, median, safe_rmtree, sh, unmount,
                      wait_mounted)

IMPORTS = "import json, email, sqlite3, asyncio"
KINDS = ["plain", "stipple", "squashfuse_ll", "squashfs"]


class Setup:
    def __init__(self, args):
        self.args = args
        self.work = args.work or tempfile.mkdtemp(prefix="stipple-bench-")
        os.makedirs(self.work, exist_ok=True)
        self.stipple = os.path.join(args.build, "mounthelper", "stipple")
        self.mkstipple = os.path.join(args.build, "builder", "mkstipple")
        self.image = os.path.join(self.work, "tree.stipple")
        self.squash = os.path.join(self.work, "tree.squashfs")

    def build(self):
        a = self.args
        t = time.monotonic()
        sh([self.mkstipple, "--quiet", "--level", str(a.level), "--block-size", a.block_size,
            a.tree, self.image])
        print("mkstipple: %.1f s, %.2f MB" % (time.monotonic() - t,
                                               os.path.getsize(self.image) / 1e6))
        if "squashfuse_ll" in a.only or "squashfs" in a.only:
            t = time.monotonic()
            sh(["mksquashfs", a.tree, self.squash, "-comp", "zstd", "-Xcompression-level", "19",
                "-b", "1M", "-noappend", "-quiet", "-no-progress"], stdout=subprocess.DEVNULL)
            print("mksquashfs: %.1f s, %.2f MB" % (time.monotonic() - t,
                                                    os.path.getsize(self.squash) / 1e6))
        into_page_cache(self.image, self.squash)

    @contextlib.contextmanager
    def mounted(self, kind, where):
        """Mounts the tree the KIND way on WHERE (an empty directory), fresh."""
        if kind == "plain":
            sh(["mount", "-o", "bind,ro", self.args.tree, where])  # read-only: never harm the tree
        elif kind == "stipple":
            sh([self.stipple, "mount", "--cache-budget", str(self.args.cache_budget),
                self.image, where])
        elif kind == "squashfuse_ll":
            sh(["squashfuse_ll", self.squash, where])
        elif kind == "squashfs":
            sh(["mount", "-t", "squashfs", "-o", "loop,ro", self.squash, where])
        try:
            wait_mounted(where)
            yield where
        finally:
            unmount(where)


def time_cmd(cmd, env=None, shell=False):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, shell=shell, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def tree_read(setup, kind):
    mnt = tempfile.mkdtemp(dir=setup.work, prefix="mnt-")
    try:
        with setup.mounted(kind, mnt):
            return time_cmd("find %s -type f -print0 | xargs -0 cat > /dev/null" % mnt,
                            shell=True)
    finally:
        os.rmdir(mnt)


def python_round(setup, kinds, repeat):
    """Mounts the tree every KINDS way at once, each under its own prefix; times the first
    Python start from each fresh mount, then REPEAT more starts per kind, alternating the
    kinds so that a drift in the machine's load hits them alike. Returns
    ({kind: first}, {kind: [later]})."""
    first, later = {}, {k: [] for k in kinds}
    cmd = [PYTHON, "-s", "-c", IMPORTS]
    with contextlib.ExitStack() as stack:
        envs = {}
        for k in kinds:
            prefix = tempfile.mkdtemp(dir=setup.work, prefix="prefix-")
            stack.callback(safe_rmtree, prefix)
            lib = os.path.join(prefix, "lib", os.path.basename(PYTHON_LIB))
            os.makedirs(lib)
            stack.enter_context(setup.mounted(k, lib))
            envs[k] = {"PYTHONHOME": prefix, "PATH": "/usr/bin:/bin", "LC_ALL": "C"}
        for k in kinds:
            first[k] = time_cmd(cmd, envs[k])
        for _ in range(repeat):
            for k in kinds:
                later[k].append(time_cmd(cmd, envs[k]))
    return first, later


def fmt(v, base):
    if v is None:
        return "%20s" % "-"
    return "%11.1f ms %5.2fx" % (v * 1e3, v / base) if base else "%11.1f ms      " % (v * 1e3)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", default=PYTHON_LIB)
    p.add_argument("--build", default=os.environ.get("STIPPLE_BUILD", "/work/main/build"))
    p.add_argument("--work")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--block-size", default="1M")
    p.add_argument("--level", type=int, default=19)
    p.add_argument("--cache-budget", type=int, default=8)
    p.add_argument("--only", default=",".join(KINDS))
    a = p.parse_args()
    a.only = [k for k in KINDS if k in a.only.split(",")]
    if os.geteuid() != 0:
        sys.exit("mount_bench: needs root (mount --bind, loop devices)")
    setup = Setup(a)
    setup.build()
    python_ok = os.path.basename(os.path.realpath(a.tree)) == os.path.basename(PYTHON_LIB)

    read = {k: [] for k in a.only}
    fresh = {k: [] for k in a.only}
    again = {k: [] for k in a.only}
    for run in range(a.runs):
        for k in a.only:  # interleaved, so drift hits every kind alike
            read[k].append(tree_read(setup, k))
        if python_ok:
            first, later = python_round(setup, a.only, a.repeat)
            for k in a.only:
                fresh[k].append(first[k])
                again[k] += later[k]
        print("run %d/%d done" % (run + 1, a.runs), file=sys.stderr)

    med = median
    rows = [("tree read, fresh mount", read)]
    if python_ok:
        rows += [("python start, fresh mount", fresh), ("python start, same mount", again)]
    print("\ntree %s, stipple --block-size %s --level %d, cache budget %d; medians of %d "
          "fresh mounts (%d runs each for 'same mount'); ratio to plain"
          % (a.tree, a.block_size, a.level, a.cache_budget, a.runs, a.repeat))
    print("%-28s" % "" + "".join("%20s" % k for k in a.only))
    for title, data in rows:
        base = med(data["plain"]) if "plain" in data else None
        print("%-28s" % title + "".join(fmt(med(data[k]), base) for k in a.only))
    if "stipple" in a.only and "squashfuse_ll" in a.only:
        print("\nstipple / squashfuse_ll, tree read: %.2fx"
              % (med(read["stipple"]) / med(read["squashfuse_ll"])))
    if not a.work:
        safe_rmtree(setup.work)


if __name__ == "__main__":
    main()
