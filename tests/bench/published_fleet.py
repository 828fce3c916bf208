#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A fleet behind one Squid updating a published release (issue 31): CLIENTS mounts, each
with its own store (as separate machines), mount release 1 published into one directory,
all reading every file at once, then release 2. By default release 1 is this machine's
Python library and release 2 the same with a few files changed and one added; --trees
gives a real pair instead. Release 2 is published with `stipple publish --base` release 1
(unless --no-base), so that a store holding release 1's blocks fetches delta files for
the blocks it lacks. nginx is the origin, with the README's Cache-Control lines; Squid
has the README's refresh_pattern lines.

From nginx's log, for each release: the files the origin should send once (release 1:
its blocks; release 2: for each block release 1 lacks, its delta file, or the block when
it has none), how many times each left the origin (the target: once), any other block
file fetched (a fallback from a delta to its block), and the bytes served against the
expected files' sizes; from Squid's log, what the clients asked of it. Every mount's tree
is compared with the source, entry by entry (treeutil.compare_trees).

    tests/bench/published_fleet.py [--build DIR] [--clients 8] [--block-size 1M]
        [--trees V1 V2 [--images V1.stp V2.stp]] [--no-base]

Run as root (it mounts)."""

import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import httputil  # noqa: E402
import pubindex  # noqa: E402
import treeutil  # noqa: E402
from benchlib import PYTHON_LIB, is_mounted, unmount  # noqa: E402

SKIP = shutil.ignore_patterns("__pycache__", "test", "site-packages", "dist-packages")


def make_releases(work):
    v1, v2 = os.path.join(work, "v1"), os.path.join(work, "v2")
    shutil.copytree(PYTHON_LIB, v1, ignore=SKIP, symlinks=True)
    shutil.copytree(v1, v2, symlinks=True)
    for rel in ("json/encoder.py", "email/utils.py", "http/client.py", "xml/dom/minidom.py",
                "asyncio/tasks.py"):
        with open(os.path.join(v2, rel), "a") as f:
            f.write("\n# release 2\n")
    shutil.copy(os.path.join(PYTHON_LIB, "textwrap.py"),
                os.path.join(v2, "json", "textwrap2.py"))
    return v1, v2


def tree_differences(src, mnt):
    """How many entries of MNT differ from SRC (every file read whole); the first few
    are printed."""
    diffs = treeutil.compare_trees(src, mnt)
    for d in diffs[:5]:
        print("  %s" % d)
    return len(diffs)


def origin_counts(origin, since):
    """Since request SINCE: {file name: requests} of blocks/ files the origin sent (200),
    their bytes, and how many index requests it answered (200 or 304)."""
    c = collections.Counter()
    sent = index = 0
    for _, status, size, uri in origin.uris()[since:]:
        m = re.match(r"/repo/blocks/../([0-9a-f]{64})$", uri)
        if m and status == 200:
            c[m.group(1)] += 1
            sent += size
        index += uri.endswith(".stp")
    return c, sent, index


def squid_block_requests(squid_log, since):
    with open(squid_log) as f:
        f.seek(since)
        return sum("/blocks/" in line for line in f)


def mount(stipple, url, mnt, opts):
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([stipple, "mount", "-o", opts, url, mnt], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)


def round_(args, stipple, origin, proxy, squid_log, url, tree, work, tag):
    since, squid_since = len(origin.uris()), os.path.getsize(squid_log)
    mnts = [os.path.join(work, "mnt-%s-%d" % (tag, i)) for i in range(args.clients)]
    t0 = time.monotonic()
    try:
        for i, m in enumerate(mnts):
            mount(stipple, url, m, "proxy=%s,cache_dir=%s" % (proxy, os.path.join(work, "store%d" % i)))
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            bad = list(pool.map(lambda m: tree_differences(tree, m), mnts))
    finally:
        for m in mnts:
            unmount(m)
    took = time.monotonic() - t0
    assert not any(is_mounted(m) for m in mnts)
    counts, sent, index = origin_counts(origin, since)
    return counts, sent, index, squid_block_requests(squid_log, squid_since), bad, took


def publish(stipple, img, www, base):
    """`stipple publish [--base BASE] IMG WWW/repo`: the index's parsed contents."""
    pub = os.path.join(www, "repo")
    os.makedirs(pub, exist_ok=True)
    r = subprocess.run([stipple, "publish", "-q", *(["--base", base] if base else []), img, pub],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode:
        sys.exit("published_fleet: publish %s failed: %s" % (img, r.stderr.strip()))
    index = os.path.join(pub, os.path.basename(img))
    with open(index, "rb") as f:
        return pubindex.parse(f.read())


def expected(idx, before):
    """{file name: size} the origin should send for the release of index IDX to stores
    holding the blocks BEFORE: each block BEFORE lacks, or its delta when it has one."""
    deltas = {d["block"]: d for d in idx["deltas"]}
    want = {}
    for b, (_, stored, sha) in enumerate(idx["entries"]):
        if sha.hex() in before:
            continue
        d = deltas.get(b)
        want[d["delta"].hex() if d else sha.hex()] = d["size"] if d else stored
    return want


def report(n, want, idx, counts, sent, index, asked, bad, took):
    got = set(counts)
    print("release %d: %d blocks, %d deltas in the index; the origin should send %d files "
          "(%d bytes): it sent %d block-file requests for %d distinct files, most for one "
          "file %d, %d bytes (%.3f x the expected files), %d expected files not sent, %d "
          "other files sent; %d index requests at the origin; clients asked Squid for %d "
          "block files; tree differences per mount %s; %.1f s" % (
              n, len(idx["entries"]), len(idx["deltas"]), len(want), sum(want.values()),
              sum(counts.values()), len(got), max(counts.values() or [0]), sent,
              sent / sum(want.values()) if want else 0, len(set(want) - got),
              len(got - set(want)), index, asked, bad, took))


def make_images(args, mkstipple, stipple, trees, www):
    """The two releases' images (built here, or --images linked), published."""
    imgs, idx = [], []
    for n, tree in enumerate(trees, 1):
        img = os.path.join(os.path.dirname(www), "app-%d.stp" % n)
        bs = [] if args.block_size == "default" else ["--block-size", args.block_size]
        if args.images:
            os.symlink(os.path.realpath(args.images[n - 1]), img)
        else:
            subprocess.run([mkstipple, "-q", *bs, tree, img], check=True,
                           capture_output=True, stdin=subprocess.DEVNULL)
        idx.append(publish(stipple, img, www, imgs[0] if n == 2 and args.base else None))
        imgs.append(img)
    return idx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--block-size", default="1M", help="mkstipple's, or 'default'")
    ap.add_argument("--trees", nargs=2, metavar=("V1", "V2"), help="a real release pair")
    ap.add_argument("--images", nargs=2, metavar=("V1.stp", "V2.stp"),
                    help="--trees' images, built already")
    ap.add_argument("--no-base", dest="base", action="store_false",
                    help="publish release 2 without --base (no delta files)")
    args = ap.parse_args()
    if args.images and not args.trees:
        ap.error("--images needs --trees")
    stipple = os.path.join(args.build, "mounthelper", "stipple")
    mkstipple = os.path.join(args.build, "builder", "mkstipple")
    work = tempfile.mkdtemp(prefix="stipple-fleet-")
    try:
        trees = args.trees or make_releases(work)
        www = os.path.join(work, "www")
        idx = make_images(args, mkstipple, stipple, trees, www)
        _, refresh = httputil.readme_caching("repo")
        with httputil.published_origin(www, os.path.join(work, "nginx"), "repo") as origin, \
                httputil.proxy_dir() as squid_dir, \
                httputil.squid(squid_dir, refresh=refresh) as proxy:
            log = os.path.join(squid_dir, "access.log")
            print("%s; %d clients, %s blocks, release 2 published %s; load %s" % (
                " -> ".join(trees), args.clients, args.block_size,
                "with --base release 1" if args.base else "without --base",
                " ".join(open("/proc/loadavg").read().split()[:3])))
            have = set()
            for n in (1, 2):
                want = expected(idx[n - 1], have)
                res = round_(args, stipple, origin, proxy, log, origin.url(
                    "repo/app-%d.stp" % n), trees[n - 1], work, "v%d" % n)
                report(n, want, idx[n - 1], *res)
                have |= {sha.hex() for _, _, sha in idx[n - 1]["entries"]}
    finally:
        if not any(is_mounted(os.path.join(work, d)) for d in os.listdir(work)):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
