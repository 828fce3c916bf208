#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Stable blocks on real release pairs: image size and stored bytes shared, per layout.

For each pair of trees (v1, v2), each block size and each variant, builds both images
and reports their sizes and the stored blocks of v2 that v1 holds byte for byte (found by
walking the files, tests/integration/storedblocks.py, and checked against `stipple diff
--stat`). "update" is what a v1 holder fetches for v2: the bytes of v2's blocks v1 lacks.

  tests/bench/stable_blocks.py [--level N] [--sizes 1M,4M,32M] [--variant NAME=ARGS]...
      NAME:V1DIR:V2DIR...   (V2DIR the same as V1DIR: one tree, image sizes only)

Variants default to packed (--no-stable-blocks) and stable (the default). A variant's
ARGS are extra mkstipple arguments; ENV=VALUE words among them set the environment.
Get the Debian pairs with `apt-get download PKG=VER` and `dpkg-deb -x` (see RESULTS.md).
Builds are interleaved variant by variant on each pair, and reported with the medians of
nothing: sizes are deterministic, so one build each is enough.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import storedblocks  # noqa: E402

BUILD = os.path.abspath(os.environ.get("STIPPLE_BUILD", os.path.join(HERE, "..", "..", "build")))
MKSTIPPLE = os.path.join(BUILD, "builder", "mkstipple")
STIPPLE = os.path.join(BUILD, "mounthelper", "stipple")


def build(src, image, level, size, args):
    env = dict(os.environ)
    argv = []
    for a in args:
        if re.match(r"^[A-Z_]+=", a):
            k, v = a.split("=", 1)
            env[k] = v
        else:
            argv.append(a)
    subprocess.run(["nice", "-n", "10", MKSTIPPLE, "-q", "-l", str(level), "-b", size] + argv +
                   [src, image], check=True, env=env)
    return os.path.getsize(image)


def shared(old, new):
    """Stored bytes and blocks of NEW that OLD holds, by content."""
    have = collections.Counter(storedblocks.block_hashes(STIPPLE, old))
    nb, nbytes, total = 0, 0, 0
    for _, b in storedblocks.stored_blocks(STIPPLE, new):
        total += len(b)
        h = storedblocks.hashlib.sha256(b).hexdigest()
        if have[h]:
            have[h] -= 1
            nb += 1
            nbytes += len(b)
    stat = subprocess.run([STIPPLE, "diff", "--stat", old, new], capture_output=True,
                          text=True).stdout
    m = re.search(r"B shares (\d+) with A", stat)
    if m and int(m.group(1)) != nb:
        print("warning: diff --stat says %s shared blocks, the walk %d" % (m.group(1), nb),
              file=sys.stderr)
    return nb, nbytes, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--level", type=int, default=19)
    ap.add_argument("--sizes", default="1M,4M,32M")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variant] or [["packed", "--no-stable-blocks"],
                                                        ["stable", ""]]
    print("| pair | block | variant | v1 image | v2 image | v2 vs packed | v2 blocks shared "
          "| v2 bytes shared | update bytes |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        for pair in a.pairs:
            name, v1, v2 = pair.split(":")
            for size in a.sizes.split(","):
                base = None
                for vname, vargs in variants:
                    i1, i2 = os.path.join(tmp, "1.stp"), os.path.join(tmp, "2.stp")
                    s1 = build(v1, i1, a.level, size, vargs.split())
                    if v2 == v1:  # one tree: its size alone
                        shutil.copyfile(i1, i2)
                        s2 = s1
                    else:
                        s2 = build(v2, i2, a.level, size, vargs.split())
                    nb, nbytes, total = shared(i1, i2)
                    base = base or s2
                    print("| %s | %s | %s | %d | %d | %+.2f%% | %d of %d | %.1f%% | %d |" % (
                        name, size, vname, s1, s2, 100.0 * (s2 - base) / base, nb,
                        len(storedblocks.block_hashes(STIPPLE, i2)), 100.0 * nbytes / total,
                        s2 - nbytes), flush=True)


if __name__ == "__main__":
    main()
