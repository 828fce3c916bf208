#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A fleet behind one Squid updating a published release (issue 31): CLIENTS mounts, each
with its own store (as separate machines), mount release 1 of this machine's Python
library published into one directory, all reading every file at once, then release 2
(a few files changed, one added). nginx is the origin, with the README's Cache-Control
lines; Squid has the README's refresh_pattern lines. From nginx's log: how many times
each block left the origin (the target: once), and the bytes it served against the
blocks' sizes; from Squid's log, what the clients asked of it.

    tests/bench/published_fleet.py [--build DIR] [--clients 8] [--block-size 1M]

Run as root (it mounts). Every content read is compared with the source tree."""

import argparse
import collections
import concurrent.futures
import hashlib
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
from benchlib import PYTHON_LIB, is_mounted, regular_files, unmount  # noqa: E402

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


def files_of(tree):
    return {rel: hashlib.sha256(open(p, "rb").read()).digest()
            for rel, p in regular_files(tree)}


def read_and_check(mnt, want):
    bad = 0
    for rel, digest in want.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            bad += hashlib.sha256(f.read()).digest() != digest
    return bad


def block_counts(origin, since):
    c = collections.Counter()
    sent = 0
    for _, status, size, uri in origin.uris()[since:]:
        m = re.match(r"/repo/blocks/../([0-9a-f]{64})$", uri)
        if m:
            c[m.group(1)] += 1
            sent += size
    return c, sent


def squid_block_requests(squid_log, since):
    with open(squid_log) as f:
        f.seek(since)
        return sum("/blocks/" in line for line in f)


def mount(stipple, url, mnt, opts):
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([stipple, "mount", "-o", opts, url, mnt], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)


def round_(args, stipple, origin, proxy, squid_log, url, want, work, tag):
    since, squid_since = len(origin.uris()), os.path.getsize(squid_log)
    mnts = [os.path.join(work, "mnt-%s-%d" % (tag, i)) for i in range(args.clients)]
    t0 = time.monotonic()
    try:
        for i, m in enumerate(mnts):
            mount(stipple, url, m, "proxy=%s,cache_dir=%s" % (proxy, os.path.join(work, "store%d" % i)))
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            bad = sum(pool.map(lambda m: read_and_check(m, want), mnts))
    finally:
        for m in mnts:
            unmount(m)
    took = time.monotonic() - t0
    assert not any(is_mounted(m) for m in mnts)
    counts, sent = block_counts(origin, since)
    return counts, sent, squid_block_requests(squid_log, squid_since), bad, took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--block-size", default="1M")
    args = ap.parse_args()
    stipple = os.path.join(args.build, "mounthelper", "stipple")
    mkstipple = os.path.join(args.build, "builder", "mkstipple")
    work = tempfile.mkdtemp(prefix="stipple-fleet-")
    try:
        v1, v2 = make_releases(work)
        www = os.path.join(work, "www")
        idx = []
        for n, tree in ((1, v1), (2, v2)):
            img = os.path.join(work, "app-%d.stp" % n)
            subprocess.run([mkstipple, "--block-size", args.block_size, tree, img], check=True,
                           capture_output=True, stdin=subprocess.DEVNULL)
            idx.append(pubindex.publish(stipple, img, os.path.join(www, "repo")))
        h = [[e[2].hex() for e in pubindex.parse(open(i, "rb").read())["entries"]] for i in idx]
        sizes = {}
        for i in idx:
            for _, stored, sha in pubindex.parse(open(i, "rb").read())["entries"]:
                sizes[sha.hex()] = stored
        _, refresh = httputil.readme_caching("repo")
        with httputil.published_origin(www, os.path.join(work, "nginx"), "repo") as origin, \
                httputil.proxy_dir() as squid_dir, \
                httputil.squid(squid_dir, refresh=refresh) as proxy:
            log = os.path.join(squid_dir, "access.log")
            print("machine: 2 cores shared with other sessions (loaded); %d clients, "
                  "%s blocks" % (args.clients, args.block_size))
            for n, want_blocks in ((1, set(h[0])), (2, set(h[1]) - set(h[0]))):
                url = origin.url("repo/app-%d.stp" % n)
                counts, sent, asked, bad, took = round_(
                    args, stipple, origin, proxy, log, url, files_of(v1 if n == 1 else v2),
                    work, "v%d" % n)
                ideal = sum(sizes[b] for b in want_blocks)
                print("release %d: %d new blocks (%d bytes); origin served %d block requests "
                      "for %d distinct blocks, most for one block %d, %d bytes (%.3f x the new "
                      "blocks); clients asked Squid for %d blocks; other blocks from origin %d; "
                      "wrong reads %d; %.1f s" % (
                          n, len(want_blocks), ideal, sum(counts.values()), len(counts),
                          max(counts.values() or [0]), sent, sent / ideal if ideal else 0,
                          asked, len(set(counts) - want_blocks), bad, took))
    finally:
        if not any(is_mounted(os.path.join(work, d)) for d in os.listdir(work)):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
