# SPDX-License-Identifier: MIT
"""The confined daemon and fetcher bound their address space (RLIMIT_AS), not only their
data (RLIMIT_DATA, which counts private writable mappings only; the filter refuses the
others only where it can see mmap's arguments). The bound is RLIMIT_DATA's hard limit and 4 GiB for the program, its
libraries and reservations that hold no memory (sandbox.h). A mount still reads its whole
tree under it.

They bound the tasks of the uid they run as too (RLIMIT_NPROC at most TASKS_MAX,
sandbox.h): a thread made by a raw clone with a stack of its own costs no memory either
limit counts, and without the bound a daemon an image took over could make threads until
the host's pid_max, and then nothing on the host could fork (review 10 #2)."""

import os

import pytest

import treeutil
from conftest import STIPPLE, build_image, mount_image, run
from test_http_closing import kill_leftovers, processes_of
from test_lingering import named, published  # noqa: F401 (fixture)
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)

pytestmark = pytest.mark.needs_root

RESERVE = 4 << 30
TASKS_MAX = 8192


def limits(pid):
    """{name: (soft, hard)} of /proc/PID/limits, in bytes (None: unlimited)."""
    out = {}
    with open("/proc/%d/limits" % pid) as f:
        for line in f.read().splitlines()[1:]:
            name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
            out[name] = tuple(None if v == "unlimited" else int(v) for v in (soft, hard))
    return out


def check_bounded(pid):
    """PID's RLIMIT_AS is its RLIMIT_DATA's hard limit and RESERVE; its RLIMIT_NPROC is at
    most TASKS_MAX."""
    lim = limits(pid)
    data, space = lim["Max data size"], lim["Max address space"]
    assert data[1] is not None, "no RLIMIT_DATA on %d" % pid
    assert space[0] is not None and space[0] == space[1], "no RLIMIT_AS on %d: %s" % (pid, space)
    assert space[1] == data[1] + RESERVE, (data, space)
    soft, hard = lim["Max processes"]
    assert hard is not None and hard <= TASKS_MAX, "RLIMIT_NPROC of %d: %s" % (pid, (soft, hard))
    assert soft is not None and soft <= hard, (soft, hard)


def test_the_daemon_bounds_its_address_space(gen_image, gen_tree):
    image = os.fspath(gen_image)
    before = set(processes_of(image))
    with mount_image(image, None, "--no-prime") as mnt:
        (daemon,) = [p for p in named(processes_of(image), "stipple-mountd") if p not in before]
        check_bounded(daemon)
        assert not treeutil.compare_trees(gen_tree, mnt)


def test_the_fetcher_bounds_its_address_space(published, gen_tree):
    url, cache = published
    try:
        with mount_image(url, None, "--no-prime", "-o", "cache_dir=%s,timeout=5" % cache) as mnt:
            (daemon,) = named(processes_of(url), "stipple-mountd")
            check_bounded(daemon)
            # the fetcher confines itself at FETCHER_DATA_MAX (fetcherd.c), then lowers
            # RLIMIT_DATA to what its index needs, and RLIMIT_AS with it
            (fetcher,) = named(processes_of(url), "stipple-fetch")
            check_bounded(fetcher)
            assert not treeutil.compare_trees(gen_tree, mnt)
    finally:
        kill_leftovers(url)
