# SPDX-License-Identifier: MIT
"""The builder's memory: --memory plus a cost per entry (issue 17, item 3).

A tree of ENTRIES names (hard links to a few one-line files, so that making it is quick
and the metadata small) is built with a small --memory. The build's peak resident memory
(getrusage of the child, in a wrapper of its own so that no other child counts) must stay
within

    program + ENTRIES x PER_ENTRY + max(--memory, metadata + its zstd context)

where "program" is the peak of `mkstipple --version` through the same wrapper (which
counts the wrapper's own pages shared up to the exec, 10 MiB here) plus SLACK, the metadata is its
decoded size as `stipple info` reports it (held once while it is compressed), and the
context is what zstd itself estimates for one level-19 compression of that size (the
metadata is compressed in one piece today: when it is written otherwise, this term goes
with it). The pack's blocks are not held with the metadata, hence the max.

PER_ENTRY bounds the cost mkstipple(1) states. A name here costs its node (188 bytes and
the name, from the tree's arena), a pointer in its directory and one in each of the inode
and file arrays: about 220 bytes. Measured here: peak 61.6 MiB, 171 bytes per entry over
the terms above (which are upper bounds); before the nodes were compacted, 82.2 MiB and
388 bytes (a 344-byte node with its own malloc'd path), which fails.
"""

import ctypes
import ctypes.util
import os
import re
import sys

import pytest

from conftest import MKSTIPPLE, STIPPLE, run

ENTRIES = 100_000
TARGETS = 100                # 1,000 links each: below any file system's link limit
PER_ENTRY = 300
SLACK = 4 << 20              # the stage buffers (2 x 1 MiB), malloc's arenas, stacks
MEMORY = 8 << 20

# Runs argv[1:] and prints its exit code and peak resident memory in bytes.
PEAK = ("import resource, subprocess, sys\n"
        "rc = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL).returncode\n"
        "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n")


def peak_of(cmd):
    r = run([sys.executable, "-c", PEAK, *cmd], timeout=900, check=True)
    rc, peak = r.stdout.split()[-2:]
    return int(rc), int(peak)


class CParams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint) for n in ("windowLog", "chainLog", "hashLog", "searchLog",
                                              "minMatch", "targetLength")] + \
               [("strategy", ctypes.c_int)]


def zstd_context(level, size):
    """What libzstd estimates one compression of SIZE bytes at LEVEL needs."""
    name = ctypes.util.find_library("zstd")
    try:
        z = ctypes.CDLL(name or "libzstd.so.1")
        get, est = z.ZSTD_getCParams, z.ZSTD_estimateCCtxSize_usingCParams
    except (OSError, AttributeError):
        pytest.skip("libzstd's estimates are not reachable")
    get.restype, get.argtypes = CParams, [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_size_t]
    est.restype, est.argtypes = ctypes.c_size_t, [CParams]
    return est(get(level, size, 0))


@pytest.fixture(scope="module")
def many_names(tmp_path_factory):
    tree = tmp_path_factory.mktemp("buildmem") / "tree"
    (tree / "d").mkdir(parents=True)
    for k in range(TARGETS):
        (tree / ("t%03d" % k)).write_text("file %d\n" % k)
    for i in range(ENTRIES):
        os.link(tree / ("t%03d" % (i % TARGETS)), tree / "d" / ("l%06d" % i))
    return tree


def test_build_memory_is_the_cap_plus_a_cost_per_entry(many_names, tmp_path):
    if not os.access(MKSTIPPLE, os.X_OK) or not os.access(STIPPLE, os.X_OK):
        pytest.skip("mkstipple or stipple is not built")
    image = tmp_path / "many.stp"
    _, program = peak_of([MKSTIPPLE, "--version"])
    rc, peak = peak_of([MKSTIPPLE, "-q", "--level", "3", "--block-size", "1M",
                        "--threads", "1", "--memory", str(MEMORY), many_names, image])
    assert rc == 0

    info = run([STIPPLE, "info", image], check=True).stdout
    assert re.search(r"^hard links:\s+%d$" % ENTRIES, info, re.M), info
    assert re.search(r"^regular files:\s+%d$" % (ENTRIES + TARGETS), info, re.M), info
    cat = run([STIPPLE, "cat", image, "d/l012345"], check=True).stdout
    assert cat == "file %d\n" % (12345 % TARGETS)

    meta = int(re.search(r"^metadata:.*?(\d+) decoded", info, re.M).group(1))
    meta_phase = meta + zstd_context(19, meta)
    fixed = program + SLACK + max(MEMORY, meta_phase)
    per_entry = (peak - fixed + SLACK) / ENTRIES
    print("peak %.1f MiB, %.0f bytes per entry" % (peak / 2**20, per_entry))
    assert peak <= fixed + ENTRIES * PER_ENTRY, (
        "peak %.1f MiB: %.0f bytes per entry over the program (%.1f MiB) and the "
        "metadata phase (%.1f MiB), more than the %d stated" %
        (peak / 2**20, per_entry, program / 2**20, meta_phase / 2**20, PER_ENTRY))
