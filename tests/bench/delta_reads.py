"""Random reads from an updated release rebuilt from deltas (issue 31): 4 KiB reads at
uniform offsets over the file bytes of release 2 of a pair published with `stipple publish
--base` (PUB, V1, V2 as in delta_launch.py; the JDK 17 pair by default), on a fresh mount
each time, served three ways, interleaved over ROUNDS rounds:
(a) a fresh store: every block fetched whole and decoded;
(b) through release 1's store (a copy of a template a v1 mount filled): deltas fetched
    and applied to the bases the store holds;
(b2) a second mount on that store: the contents (b) kept.
The reads (READS of them, from SEED) are the same list for each; every read is compared
with the source tree TREE. Prints reads/s and latency percentiles per way, and a JSON of
medians. Needs root; leaves no mount or nginx. nginx on loopback (RATE as delta_launch.py).
usage: BUILD=... TREE=... [PUB=... V1=... V2=... W=... READS=... ROUNDS=... SEED=...]
       python3 delta_reads.py"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import httputil  # noqa: E402
from conftest import is_mounted, unmount  # noqa: E402

BUILD = os.environ["BUILD"]
TREE = os.environ["TREE"]
W = os.environ.get("W", "/var/tmp/delta_reads")
PUB = os.environ.get("PUB", "/var/tmp/delta/pubjdk")
V1 = os.environ.get("V1", "17.0.19-b32M.stp")
V2 = os.environ.get("V2", "17.0.21.1-b32M.stp")
READS = int(os.environ.get("READS", "2000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SEED = int(os.environ.get("SEED", "31"))


def files_of(tree):
    """(relative path, size) of every regular file, in a stable order."""
    out = []
    for d, _, names in os.walk(tree):
        for n in sorted(names):
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p):
                out.append((os.path.relpath(p, tree), os.path.getsize(p)))
    return sorted(out)


def read_list(files):
    """READS (path, offset, length, expected bytes), a byte drawn uniformly from all."""
    rng = random.Random(SEED)
    total = sum(s for _, s in files)
    starts, at = [], 0
    for _, s in files:
        starts.append(at)
        at += s
    out = []
    for _ in range(READS):
        b = rng.randrange(total)
        lo, hi = 0, len(files) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= b:
                lo = mid
            else:
                hi = mid - 1
        path, size = files[lo]
        off = b - starts[lo]
        n = min(4096, size - off)
        with open(os.path.join(TREE, path), "rb") as f:
            f.seek(off)
            out.append((path, off, n, f.read(n)))
    return out


def mount(url, cache):
    mnt = W + "/mnt"
    os.makedirs(mnt, exist_ok=True)
    r = subprocess.run([BUILD + "/mounthelper/stipple", "mount", "-o", "cache_dir=" + cache,
                        url, mnt], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    while not is_mounted(mnt):
        time.sleep(0.05)
    return mnt


def run_reads(mnt, reads):
    fds, lat = {}, []
    t0 = time.monotonic()
    try:
        for path, off, n, want in reads:
            t = time.monotonic()
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(os.path.join(mnt, path), os.O_RDONLY)
            got = os.pread(fd, n, off)
            lat.append(time.monotonic() - t)
            assert got == want, "%s at %d: wrong bytes" % (path, off)
    finally:
        for fd in fds.values():
            os.close(fd)
    wall = time.monotonic() - t0
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000  # noqa: E731
    return {"reads/s": len(reads) / wall, "p50 ms": q(0.5), "p99 ms": q(0.99),
            "p99.9 ms": q(0.999)}


def main():
    reads = read_list(files_of(TREE))
    res = {}
    os.makedirs(W + "/www", exist_ok=True)
    if not os.path.exists(W + "/www/repo"):
        os.symlink(PUB, W + "/www/repo")
    with httputil.published_origin(W + "/www", W + "/nginx", "repo",
                                   rate=os.environ.get("RATE")) as origin:
        v1, v2 = origin.url("repo/" + V1), origin.url("repo/" + V2)
        tmpl = W + "/store-v1"
        if not os.path.exists(tmpl + "/blocks"):
            m = mount(v1, tmpl)
            subprocess.run(["tar", "cf", "/dev/null", "."], cwd=m, check=True)
            unmount(m)
        try:
            for r in range(ROUNDS):
                fresh, st = W + "/store-fresh", W + "/store-b"
                shutil.rmtree(fresh, ignore_errors=True)
                shutil.rmtree(st, ignore_errors=True)
                shutil.copytree(tmpl, st, symlinks=True)
                ways = [("a", fresh), ("b", st), ("b2", st)]
                for way, cache in (ways if r % 2 == 0 else [ways[1], ways[2], ways[0]]):
                    m = mount(v2, cache)
                    got = run_reads(m, reads)
                    unmount(m)
                    print("round", r, way, " ".join("%s %.3f" % kv for kv in got.items()),
                          flush=True)
                    for k, v in got.items():
                        res.setdefault(way + " " + k, []).append(v)
        finally:
            unmount(W + "/mnt")
    print(json.dumps({k: [statistics.median(v), v] for k, v in sorted(res.items())}, indent=1))


main()
