#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Priming waited for (the default) against -o prime_background and -o noprime: a fresh
mount of a tree's hot image, then its launch straight away and a second launch, the
three kinds interleaved round by round (each round starts one kind later). Medians of:
until mount.stipple returned, the first launch, the two added (what a user waits from
the mount command to the application's end), the second launch.

usage: prime_ab.py [--build DIR] [--rounds N] KIND[,KIND...]
KIND names a recipe of trees/ (launch_one.sh); its hot image is
/var/tmp/stipple-final-KIND/hot.stp (launch_six.sh's). Needs root.
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = {"waited": [], "background": ["-o", "prime_background"], "noprime": ["-o", "noprime"]}


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000


def one_round(helper, kind, image, mnt, r, res):
    order = list(MODES.items())
    order = order[r % len(order):] + order[:r % len(order)]
    for name, opts in order:
        ret = timed([helper, image, mnt] + opts)
        first = timed([os.path.join(HERE, "launch_one.sh"), kind, mnt])
        second = timed([os.path.join(HERE, "launch_one.sh"), kind, mnt])
        time.sleep(0.3)
        subprocess.run(["umount", mnt], check=True)
        res.setdefault(name, []).append((ret, first, ret + first, second))
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("kinds")
    a = ap.parse_args()
    helper = os.path.join(os.path.abspath(a.build), "mounthelper", "mount.stipple")
    for kind in a.kinds.split(","):
        image = "/var/tmp/stipple-final-%s/hot.stp" % kind
        with open(image, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass
        mnt = tempfile.mkdtemp(prefix="prime-ab-")
        res = {}
        try:
            for r in range(a.rounds):
                one_round(helper, kind, image, mnt, r, res)
        finally:
            subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
            os.rmdir(mnt)
        print("%s, medians of %d interleaved rounds, load %s" % (
            kind, a.rounds, " ".join(open("/proc/loadavg").read().split()[:3])))
        for name, v in res.items():
            m = [statistics.median(x[i] for x in v) for i in range(4)]
            print("  %-10s returned %7.1f ms  launch %7.1f ms  both %7.1f ms  second %7.1f ms"
                  % (name, *m))


if __name__ == "__main__":
    main()
