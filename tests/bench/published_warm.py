#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A published release read whole from a warm store, beside the same image at a URL read
from its warm disk cache: each round mounts afresh (nginx on loopback, the README's
caching lines), reads every file and times the read. Kinds alternate (A B C A B C) for
--rounds rounds; the medians and their ratios to the one-file URL are printed.

    tests/bench/published_warm.py [--build DIR] [--fetcher NAME=PATH ...] [--rounds 7]

--fetcher runs the published kind once per stipple-fetcher given (copied over the build
tree's for its turn, then put back): a before/after of the fetcher alone. The tree is
one file of noise (--noise-mb, 30) and a small one, --block-size blocks (32M: one
block of noise, the case where the store's block costs most). Run as root (it mounts)."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import httputil  # noqa: E402
from benchlib import is_mounted, median, read_all, unmount  # noqa: E402


def read_tree(mnt):
    t0 = time.monotonic()
    read_all(mnt)
    return time.monotonic() - t0


def put(src, dst):
    """SRC over DST by a rename: a fetcher still ending keeps the file it runs."""
    shutil.copy2(src, dst + ".new")
    os.replace(dst + ".new", dst)


def one_round(stipple, url, cache, mnt):
    subprocess.run([stipple, "mount", "-o", "cache_dir=%s" % cache, url, mnt], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)
    try:
        return read_tree(mnt)
    finally:
        unmount(mnt)
        assert not is_mounted(mnt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--fetcher", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--noise-mb", type=int, default=30)
    ap.add_argument("--block-size", default="32M")
    args = ap.parse_args()
    stipple = os.path.join(args.build, "mounthelper", "stipple")
    mkstipple = os.path.join(args.build, "builder", "mkstipple")
    installed = os.path.join(args.build, "mounthelper", "stipple-fetcher")
    fetchers = [f.split("=", 1) for f in args.fetcher] or [("published", None)]
    work = tempfile.mkdtemp(prefix="stipple-pubwarm-")
    saved = os.path.join(work, "fetcher.saved")
    shutil.copy2(installed, saved)
    try:
        tree, www, mnt = (os.path.join(work, d) for d in ("tree", "www", "mnt"))
        for d in (tree, www, mnt):
            os.makedirs(d)
        with open(os.path.join(tree, "noise"), "wb") as f:
            f.write(os.urandom(args.noise_mb << 20))
        with open(os.path.join(tree, "small"), "wb") as f:
            f.write(b"small file\n" * 50000)
        img = os.path.join(www, "one.stp")
        subprocess.run([mkstipple, "-q", "--level", "3", "--block-size", args.block_size, tree,
                        img], check=True)
        subprocess.run([stipple, "publish", "-q", img, os.path.join(www, "repo")], check=True)
        with httputil.published_origin(www, os.path.join(work, "nginx"), "repo") as origin:
            kinds = [("one-file URL", origin.url("one.stp"), None)]
            kinds += [(name, origin.url("repo/one.stp"), path) for name, path in fetchers]
            times = {k[0]: [] for k in kinds}
            for name, url, path in kinds:  # warm each cache
                one_round(stipple, url, os.path.join(work, "cache"), mnt)
            for _ in range(args.rounds):
                for name, url, path in kinds:
                    put(path or saved, installed)
                    times[name].append(one_round(stipple, url, os.path.join(work, "cache"), mnt))
        load = os.getloadavg()[0]
        base = median(times["one-file URL"])
        print("machine: 2 cores shared with other sessions (load average %.1f); %d rounds, "
              "interleaved" % (load, args.rounds))
        for name, _, _ in kinds:
            m = median(times[name])
            print("%-16s median %.3f s  (%.2fx the one-file URL)" % (name, m, m / base))
    finally:
        put(saved, installed)
        if not is_mounted(os.path.join(work, "mnt")):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
