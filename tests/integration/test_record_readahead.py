# SPDX-License-Identifier: MIT
"""A recording mount turns the kernel's readahead off (issue 14, item 3): the hot list it
writes holds the pages an application read or faulted in, not what readahead fetched
around them. Plain reads (no fadvise) and a page fault on a mapping, checked against the
source bytes; the mount's read_ahead_kb from sysfs, beside a mount that does not record.
"""

import mmap
import os
import random
import re
import time

import pytest

from conftest import STIPPLE, build_image, mount_image, run

PAGE = 4096
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting tests need root")


def noise(seed, size):
    return random.Random(seed).randbytes(size)


FILES = {"big.bin": noise(1, 3 << 20), "mapped.so": noise(2, 1 << 20)}
READ_AT = 1 << 20       # a 4 KiB read in big.bin, far from either end
FAULT_AT = 512 << 10    # the page of mapped.so touched through a mapping


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    d = tmp_path_factory.mktemp("rec-ra")
    tree = d / "tree"
    tree.mkdir()
    for name, body in FILES.items():
        (tree / name).write_bytes(body)
    return build_image(tree, d / "tree.stipple", "--level", "3", "--block-size", "64K")


def daemon_pid(mnt):
    r = run([STIPPLE, "status", mnt])
    assert r.returncode == 0, r.stderr
    return int(re.search(r"^daemon:\s+pid (\d+),", r.stdout, re.M).group(1))


def wait_gone(pid):
    """The daemon writes its list on the way out, a moment after umount returns."""
    deadline = time.monotonic() + 20
    while True:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        assert time.monotonic() < deadline, "daemon %d outlived the unmount" % pid
        time.sleep(0.02)


def read_ahead_kb(mnt):
    dev = os.stat(mnt).st_dev
    with open("/sys/class/bdi/%d:%d/read_ahead_kb" % (os.major(dev), os.minor(dev))) as f:
        return int(f.read())


def parse(raw):
    out = {}
    for line in raw.decode().splitlines():
        path, _, ranges = line.partition("\t")
        out[path] = [tuple(map(int, r.split("-"))) for r in ranges.split(",")] if ranges else None
    return out


@needs_root
def test_recording_mount_reads_only_the_pages_touched(image, tmp_path):
    hot = tmp_path / "hot.list"
    with mount_image(image, None, "--record", str(hot)) as mnt:
        pid = daemon_pid(mnt)
        assert read_ahead_kb(mnt) == 0
        with open(os.path.join(mnt, "big.bin"), "rb") as f:  # no fadvise: readahead as usual
            f.seek(READ_AT)
            assert f.read(PAGE) == FILES["big.bin"][READ_AT:READ_AT + PAGE]
        with open(os.path.join(mnt, "mapped.so"), "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            try:
                assert m[FAULT_AT:FAULT_AT + 16] == FILES["mapped.so"][FAULT_AT:FAULT_AT + 16]
            finally:
                m.close()
    wait_gone(pid)
    got = parse(hot.read_bytes())
    assert got == {"big.bin": [(READ_AT, READ_AT + PAGE)],
                   "mapped.so": [(FAULT_AT, FAULT_AT + PAGE)]}, got


@needs_root
def test_mount_without_recording_keeps_readahead(image):
    with mount_image(image) as mnt:
        assert read_ahead_kb(mnt) >= 128
        with open(os.path.join(mnt, "big.bin"), "rb") as f:
            assert f.read() == FILES["big.bin"]
