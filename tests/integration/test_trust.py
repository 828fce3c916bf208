# SPDX-License-Identifier: MIT
"""The trust boundary of a mount: the privileged monitor reads only the superblock, the
confined daemon reads the rest, hostile images cannot hang the mount or take the host's
memory, and whatever fails is unmounted."""

import os
import re
import shutil
import signal
import struct
import subprocess
import time

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, run, unmount
from imageutil import CraftedImage, buffer_bytes
from pagecache import pinned
import treeutil
from test_mount import daemon_pids, wait_gone

DEADLINE = 10  # seconds: a mount returns, live or refused, within this (monitor.h)


def sb_fields(image):
    """The superblock fields the memory bound is made of (stipple(5))."""
    with open(image, "rb") as f:
        sb = f.read(256)
    block_log, = struct.unpack_from("<I", sb, 40)
    stored, size = struct.unpack_from("<QQ", sb, 80)
    dict_size, = struct.unpack_from("<Q", sb, 120)
    return block_log, stored, size, dict_size


def meta_memory(image, budget=16 << 20):
    """What mount.stipple(8) counts for the metadata of IMAGE: paged, the page table, a
    pointer per page, the meta_cache= budget (4 MiB at least: the walks before LIVE) and
    64 pages being loaded at once; whole, three times the decoded metadata and the stored
    copy."""
    with open(image, "rb") as f:
        sb = f.read(256)
    stored, size = struct.unpack_from("<QQ", sb, 80)
    codec, = struct.unpack_from("<I", sb, 104)
    if codec != 2:
        return 3 * size + stored
    return stored + 8 * -(-size // (64 << 10)) + max(budget, 4 << 20) + 64 * (64 << 10)


# The bookkeeping sized by the image's counts (stp_daemon_memory: by hot block, block and
# inode), a few KiB for the small images here: the limit holds it on top of the rest.
BOOKKEEPING_MAX = 1 << 20


def assert_data_limit(mountpoint, want):
    soft, hard = daemon_data_limit(mountpoint)
    assert soft == hard and want <= soft < want + BOOKKEEPING_MAX, (soft, want)


def daemon_data_limit(mountpoint):
    """(soft, hard) RLIMIT_DATA of the one daemon serving MOUNTPOINT."""
    pids = daemon_pids(mountpoint)
    assert len(pids) == 1
    with open("/proc/%d/limits" % pids[0]) as f:
        line = next(l for l in f if l.startswith("Max data size"))
    soft, hard = line.split()[3:5]
    return int(soft), int(hard)


@pytest.fixture
def small_image(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "hello").write_bytes(b"hello, world\n" * 100)
    (src / "big").write_bytes(os.urandom(300 << 10))
    return build_image(str(src), str(tmp_path / "small.stipple"), "--level", "3",
                       "--block-size", "64K")


@pytest.fixture
def mnt(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield str(path)
    unmount(str(path))


def test_monitor_reads_only_the_superblock(small_image, mnt):
    """strace follows the mounting process alone: of the image it reads 256 bytes at 0."""
    if not shutil.which("strace"):
        pytest.skip("strace is missing")
    log = mnt + ".strace"
    r = run(["strace", "-o", log, "-e", "trace=openat,read,pread64,mmap,close",
             MOUNT_STIPPLE, small_image, mnt])
    assert r.returncode == 0, r.stderr
    assert is_mounted(mnt)
    with open(log) as f:
        trace = f.read().splitlines()
    opened = [i for i, l in enumerate(trace)
              if re.match(r'openat\(AT_FDCWD, "%s", ' % re.escape(small_image), l)]
    assert len(opened) == 1, trace
    fd = re.search(r"= (\d+)$", trace[opened[0]]).group(1)
    if "O_PATH" in trace[opened[0]]:  # looked at first, then opened through /proc
        again = [i for i, l in enumerate(trace)
                 if l.startswith('openat(AT_FDCWD, "/proc/self/fd/%s", ' % fd)]
        assert len(again) == 1, trace
        opened = again
        fd = re.search(r"= (\d+)$", trace[opened[0]]).group(1)
    reads = []
    for line in trace[opened[0] + 1:]:
        if line.startswith("close(%s)" % fd):
            break
        m = re.match(r"(pread64|read|mmap)\((.*)\) = ", line)
        if m and (m.group(2).startswith(fd + ",") or ", %s, " % fd in m.group(2)):
            reads.append(line)
    assert len(reads) == 1 and re.match(r"pread64\(%s, .*, 256, 0\) = 256" % fd, reads[0]), reads
    # and yet the daemon serves the metadata and the data
    assert os.listdir(mnt) == ["big", "d"] or sorted(os.listdir(mnt)) == ["big", "d"]
    with open(os.path.join(mnt, "d", "hello"), "rb") as f:
        assert f.read() == b"hello, world\n" * 100


@pytest.mark.parametrize("prog", ["stipple", "mount.stipple"])
def test_damaged_metadata_refused_by_the_daemon(small_image, mnt, tmp_path, prog):
    """The metadata is first parsed by the confined daemon: its message reaches the user,
    the mount it had made is undone, and no daemon is left."""
    bad = str(tmp_path / "bad.stipple")
    shutil.copy(small_image, bad)
    with open(bad, "rb") as f:
        sb = f.read(256)
    meta_off, stored = struct.unpack_from("<QQ", sb, 72)
    treeutil.flip_byte(bad, meta_off + stored // 2)
    cmd = [STIPPLE, "mount", bad, mnt] if prog == "stipple" else [MOUNT_STIPPLE, bad, mnt]
    t0 = time.monotonic()
    r = run(cmd, timeout=60)
    assert time.monotonic() - t0 < DEADLINE
    assert r.returncode == (1 if prog == "stipple" else 32), r.stderr
    assert "metadata page table checksum mismatch" in r.stderr, r.stderr
    assert "not a stipple image, or a damaged one" in r.stderr, r.stderr
    assert ".c:" not in r.stderr, r.stderr  # no source place without STIPPLE_DEBUG=1
    assert not is_mounted(mnt)
    assert not daemon_pids(mnt)


def test_fifo_as_image_does_not_hang(tmp_path, mnt):
    fifo = str(tmp_path / "image.stipple")
    os.mkfifo(fifo)
    t0 = time.monotonic()
    r = run([MOUNT_STIPPLE, fifo, mnt], timeout=30)
    assert time.monotonic() - t0 < 5
    assert r.returncode == 32
    assert "not a regular file" in r.stderr and fifo in r.stderr, r.stderr
    assert not is_mounted(mnt)


@pytest.mark.parametrize("meta_cache", [None, 1 << 20])
def test_daemon_data_limit_follows_options(small_image, mnt, meta_cache):
    """RLIMIT_DATA of the daemon: (budget + workers + 1) block buffers, the metadata (its page
    cache's budget), the dictionary, and 256 MiB for stacks, buffers and plans
    (budget.c)."""
    args = ["-o", "meta_cache=%d" % meta_cache] if meta_cache else []
    r = run([STIPPLE, "mount", "--cache-budget", "3", "--warm-workers", "2", *args,
             small_image, mnt])
    assert r.returncode == 0, r.stderr
    block_log, _, _, dict_size = sb_fields(small_image)
    meta = meta_memory(small_image, *([meta_cache] if meta_cache else []))
    want = 6 * buffer_bytes(block_log) + meta + 2 * dict_size + (256 << 20)
    assert_data_limit(mnt, want)


def test_mount_that_could_take_half_the_memory_is_refused(tmp_path, mnt):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x" * 1000)
    image = build_image(str(src), str(tmp_path / "1g.stipple"), "--level", "1",
                        "--block-size", "1G")
    r = run([STIPPLE, "mount", "--cache-budget", "64", image, mnt])
    assert r.returncode == 1
    assert "more than half of this machine's memory" in r.stderr, r.stderr
    assert "cache_budget" in r.stderr
    assert not is_mounted(mnt)
    # the same image with a small budget mounts, and serves
    r = run([STIPPLE, "mount", "--cache-budget", "1", "--warm-workers", "0", image, mnt])
    assert r.returncode == 0, r.stderr
    with open(os.path.join(mnt, "f"), "rb") as f:
        assert f.read() == b"x" * 1000


def share_extents(image, out, nextents):
    """Every regular file of IMAGE gets the same NEXTENTS extent records: a walk that
    visits each file's extents costs files x NEXTENTS."""
    c = CraftedImage(image)
    ninodes, = struct.unpack_from("<I", c.meta, 4)
    start = (len(c.meta) + 7) & ~7
    c.meta += b"\0" * (start - len(c.meta))
    c.meta += b"".join(struct.pack("<QQQ", k, 0, 1) for k in range(nextents))
    struct.pack_into("<I", c.meta, 12, nextents)
    struct.pack_into("<Q", c.meta, 48, start)
    files = 0
    for ino in range(ninodes):
        mode, _, _ = c.inode(ino)
        if mode & 0o170000 == 0o100000:
            off = c.inode_off + 64 * ino
            struct.pack_into("<Q", c.meta, off + 32, nextents)  # size covers them
            struct.pack_into("<QI", c.meta, off + 40, 0, nextents)
            files += 1
    c.write(out)
    return files


def test_shared_extents_cannot_stall_the_mount(tmp_path, mnt):
    """4,000 files sharing 500,000 extent records: 2e9 extent visits for a walk per file.
    The mount is live within the deadline, warming and priming refuse the image."""
    src = tmp_path / "src"
    src.mkdir()
    names = []
    for i in range(4000):
        name = "f%04d" % i
        (src / name).write_bytes(b"%d\n" % i * 100)
        names.append(name)
    hot = tmp_path / "hot"
    hot.write_text("".join(n + "\n" for n in names))
    image = build_image(str(src), str(tmp_path / "orig.stipple"), "--level", "1",
                        "--block-size", "64K", "--hot-list", str(hot))
    crafted = str(tmp_path / "shared.stipple")
    assert share_extents(image, crafted, 500000) == 4000
    t0 = time.monotonic()
    r = run([STIPPLE, "mount", crafted, mnt], timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    print("shared extents: the mount took %.2f s" % took)
    assert took < DEADLINE, "the mount took %.1f s" % took
    assert len(os.listdir(mnt)) == 4000
    st = run([STIPPLE, "status", mnt], check=True).stdout
    assert "warming:   off (it did not start)" in st, st
    pids = daemon_pids(mnt)
    run(["umount", mnt], check=True)
    assert wait_gone(pids)


def test_daemon_that_does_not_answer_is_killed_and_unmounted(tmp_path, mnt):
    """The inner image lies on an outer stipple mount whose daemon is stopped: the monitor
    reads the inner superblock from the page cache (pinned there: the kernel may reclaim a
    page read moments ago, pagecache.py), the inner daemon's first read past it never
    returns. The mount gives up at the deadline, undoes itself, and says why."""
    inner_src = tmp_path / "inner-src"
    inner_src.mkdir()
    (inner_src / "noise").write_bytes(os.urandom(8 << 20))
    outer_src = tmp_path / "outer-src"
    outer_src.mkdir()
    build_image(str(inner_src), str(outer_src / "inner.stipple"), "--level", "1",
                "--block-size", "1M")
    outer = build_image(str(outer_src), str(tmp_path / "outer.stipple"), "--level", "1",
                        "--block-size", "1M")
    outer_mnt = tmp_path / "outer-mnt"
    outer_mnt.mkdir()
    # allow_other: the inner daemon reads as the sandbox user, not as root
    r = run([STIPPLE, "mount", "--warm-workers", "0", "-o", "allow_other", outer, str(outer_mnt)])
    assert r.returncode == 0, r.stderr
    pids = daemon_pids(str(outer_mnt))
    try:
        inner = str(outer_mnt / "inner.stipple")
        with open(inner, "rb") as f:
            assert f.read(4096)[:8] == b"STIPPLE\0"  # now in the page cache
        with pinned(inner, 4096):
            os.kill(pids[0], signal.SIGSTOP)
            t0 = time.monotonic()
            r = run([STIPPLE, "mount", inner, mnt], timeout=60)
            took = time.monotonic() - t0
        assert r.returncode == 1, r.stderr
        assert "the daemon did not answer within 10 s" in r.stderr, r.stderr
        assert DEADLINE - 1 < took < DEADLINE + 5, took
        assert not is_mounted(mnt)
        assert not daemon_pids(mnt)
    finally:
        os.kill(pids[0], signal.SIGCONT)
        unmount(str(outer_mnt))


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM:"))


def test_decompression_bomb_stays_within_the_bound(tmp_path, mnt):
    """512 MiB that compress to a few KiB, in 256 MiB blocks, warmed and read whole: the
    mount is live at once and the daemon's peak memory stays within (cache budget +
    workers + 1) blocks plus the metadata and 40 MiB for code, stacks and buffers."""
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "bomb", "wb") as f:
        chunk = b"stipple " * (1 << 17)  # 1 MiB, not zeros: no hole
        for _ in range(512):
            f.write(chunk)
    hot = tmp_path / "hot"
    hot.write_text("bomb\n")
    image = build_image(str(src), str(tmp_path / "bomb.stipple"), "--level", "1",
                        "--block-size", "256M", "--hot-list", str(hot))
    assert os.path.getsize(image) < 1 << 20
    t0 = time.monotonic()
    r = run([STIPPLE, "mount", "--cache-budget", "1", "--warm-workers", "1", image, mnt])
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < DEADLINE
    pid = daemon_pids(mnt)[0]
    with open(os.path.join(mnt, "bomb"), "rb") as f:
        for _ in range(512):
            assert f.read(1 << 20) == chunk
    block_log, stored, size, dict_size = sb_fields(image)
    bound = (1 + 1 + 1) * (1 << block_log) + size + (40 << 20)
    print("daemon VmHWM %d MiB, bound %d MiB" % (vm_hwm(pid) >> 20, bound >> 20))
    assert vm_hwm(pid) <= bound, (vm_hwm(pid) >> 20, bound >> 20)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_signal_ends_a_warming_mount(tmp_path, mnt, sig):
    """A signal while warming pushes pages and a reader reads: the daemon stops warming
    while it still answers, then ends; the monitor's watcher then takes the dead mount
    away (it answered ENOTCONN until umount, before issue 28 item 15)."""
    src = tmp_path / "src"
    src.mkdir()
    names = []
    for i in range(48):
        (src / ("f%02d" % i)).write_bytes(os.urandom(1 << 20))
        names.append("f%02d" % i)
    hot = tmp_path / "hot"
    hot.write_text("".join(n + "\n" for n in names))
    image = build_image(str(src), str(tmp_path / "warm.stipple"), "--level", "1",
                        "--block-size", "4M", "--hot-list", str(hot))
    r = run([STIPPLE, "mount", "--cache-budget", "2", "--warm-workers", "2", image, mnt])
    assert r.returncode == 0, r.stderr
    pid = daemon_pids(mnt)[0]
    reader = subprocess.Popen(["cat"] + [os.path.join(mnt, n) for n in names],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.05)
    os.kill(pid, sig)
    assert wait_gone([pid], timeout=10), "the daemon outlived %s" % sig.name
    reader.wait(timeout=20)
    deadline = time.monotonic() + 2
    while is_mounted(mnt) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not is_mounted(mnt), "a dead mount is left after %s" % sig.name
