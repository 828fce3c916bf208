# SPDX-License-Identifier: MIT
"""What mount.stipple does on its way to a live mount: on a directory that is no mount
point (statx says it is no mount's root) it reads no mount table before mount(2); on
one that is, it still reads the table and refuses, naming what is there. Its daemon
answers FUSE's INIT before it starts its threads, and serves the next requests itself
while they start. The metadata pages are asked ahead only after the open's own reads
(`stipple ls`), and by a mount only once it is live."""

import contextlib
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, unmount

pytestmark = pytest.mark.needs_root


def image(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(b"x" * 100)
    return build_image(tree, tmp_path / "app.stp", "--level", "1")


def traced(tmp_path, img, mnt):
    """mount.stipple -o noprime under strace (the helper only): its exit status and the
    calls it made up to its mount(2), in order."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    log = tmp_path / "strace.log"
    r = subprocess.run(["strace", "-o", log, "-e", "trace=openat,statx,mount",
                        MOUNT_STIPPLE, img, mnt, "-o", "noprime"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    text = log.read_text()
    end = text.find("mount(")
    return r, text[:end if end >= 0 else len(text)]


def test_no_mount_table_read_before_mounting_on_a_plain_directory(tmp_path):
    img = image(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        r, calls = traced(tmp_path, img, os.fspath(mnt))
        assert r.returncode == 0, r.stderr
        assert is_mounted(os.fspath(mnt))
        assert "mountinfo" not in calls, calls
        statx = re.findall(r"^statx\(\d+, \"\", (\S+),", calls, re.M)
        assert any("AT_EMPTY_PATH" in f and "AT_STATX_DONT_SYNC" in f for f in statx), calls
    finally:
        unmount(os.fspath(mnt))


def test_a_mount_point_is_still_read_from_the_table_and_refused(tmp_path):
    img = image(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "stipple-test-tmpfs", mnt], check=True)
    try:
        r, calls = traced(tmp_path, img, os.fspath(mnt))
        assert r.returncode == 32, r.stderr
        assert "already a mount point (stipple-test-tmpfs, type tmpfs)" in r.stderr, r.stderr
        assert "/proc/self/mountinfo" in calls, calls
    finally:
        unmount(os.fspath(mnt))


def daemon_calls(log):
    """The daemon's main thread's calls, from strace -f -y's log: the process that
    exec'd stipple-mountd."""
    lines = log.read_text().splitlines()
    pids = {l.split()[0] for l in lines if "execveat(" in l and "stipple-mountd>" in l}
    return [l.split(None, 1)[1] for l in lines if l.split()[0] in pids]


@contextlib.contextmanager
def straced_mount(img, mnt, log, calls, options="noprime"):
    """IMG mounted on MNT (made here) by mount.stipple -o OPTIONS under strace -f -y,
    tracing CALLS into LOG; unmounted on leaving, once strace, which follows the daemon
    until it exits, is done."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    mnt.mkdir()
    p = subprocess.Popen(["strace", "-f", "-y", "-o", log, "-e", "trace=" + calls,
                          MOUNT_STIPPLE, img, mnt, "-o", options],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(os.fspath(mnt)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert is_mounted(os.fspath(mnt))
        yield mnt
    finally:
        unmount(os.fspath(mnt))
        p.wait(timeout=60)


def test_daemon_answers_init_before_starting_threads(tmp_path):
    """The kernel's first request, INIT, queued by mount(2), is read and answered by the
    daemon's main thread before it starts any thread (daemon.c: answer_init): whoever
    waits on the new mount is not kept waiting for them. Then the main thread starts one
    thread, the loop's own (serveloop.h), which starts the filling and ending threads and
    the loop's workers, and itself serves the requests that follow: it reads the next one
    and answers it, with no thread start on the way. The image has no hot list, so no
    warming thread starts before."""
    log = tmp_path / "strace.log"
    with straced_mount(image(tmp_path), tmp_path / "mnt", log,
                       "execveat,read,writev,clone,clone3") as mnt:
        assert (mnt / "f").read_bytes() == b"x" * 100
    calls = daemon_calls(log)
    fuse_read = lambda c: (c.startswith("read(") and "</dev/fuse>" in c and
                           not re.search(r"= -1 E", c))
    fuse_reply = lambda c: c.startswith("writev(") and "</dev/fuse>" in c
    is_clone = lambda c: c.startswith(("clone(", "clone3(")) and "CLONE_THREAD" in c
    first = lambda pred, start=0: next((i for i in range(start, len(calls))
                                        if pred(calls[i])), None)
    init = first(fuse_read)
    assert init is not None, calls
    reply = first(fuse_reply)
    thread = first(is_clone)
    assert reply is not None and reply > init, calls
    assert thread is not None and reply < thread, calls
    # the sandbox answers clone3 ENOSYS, and the C library then calls clone
    started = lambda c: c.startswith("clone(") or (c.startswith("clone3(") and
                                                   re.search(r"= \d+$", c))
    assert sum(1 for c in calls if started(c)) == 1, calls
    second = first(fuse_read, thread)
    assert second is not None and first(fuse_reply, second) is not None, calls


def fifty_files(tmp_path, hot=False):
    """An image of d/f0 .. d/f49, each holding its number and a newline; HOT: with a hot
    list of all of them."""
    tree = tmp_path / "tree"
    for i in range(50):
        (tree / "d").mkdir(parents=True, exist_ok=True)
        (tree / "d" / ("f%d" % i)).write_bytes(b"%d\n" % i)
    args = []
    if hot:
        (tmp_path / "hot.list").write_text("".join("d/f%d\n" % i for i in range(50)))
        args = ["--hot-list", tmp_path / "hot.list"]
    return build_image(tree, tmp_path / "paged.stp", "--level", "1", *args)


def test_metadata_readahead_follows_the_opens_reads(tmp_path):
    """The open reads the metadata header (the first stored page, where the readahead
    range starts) before it asks for the readahead: a read queued behind the readahead
    of every page waits for it (6.6 ms for a cold mount of a million files)."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    img = fifty_files(tmp_path)
    log = tmp_path / "strace.log"
    r = subprocess.run(["strace", "-o", log, "-e", "trace=pread64,fadvise64",
                        STIPPLE, "ls", img, "/"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["d"], r.stdout + r.stderr
    calls = log.read_text().splitlines()
    ahead = [i for i, c in enumerate(calls) if "POSIX_FADV_WILLNEED" in c]
    assert len(ahead) == 1, "readahead asked %d times:\n%s" % (len(ahead), "\n".join(calls))
    start = re.search(r"fadvise64\(\d+, (\d+),", calls[ahead[0]]).group(1)
    header = [i for i, c in enumerate(calls) if re.match(r"pread64\(.*, %s\) = " % start, c)]
    assert header and header[0] < ahead[0], \
        "the header page was not read before the readahead:\n%s" % "\n".join(calls)


def readahead_and_init(log):
    """From strace -f -y's LOG of a mount: where the one metadata readahead and the first
    reply to /dev/fuse (INIT's) come, and the calls as text."""
    calls = [l.split(None, 1)[1] for l in log.read_text().splitlines() if " " in l]
    text = "\n".join(calls)
    ahead = [i for i, c in enumerate(calls)
             if c.startswith("fadvise64(") and "POSIX_FADV_WILLNEED" in c and ".stp>" in c]
    assert len(ahead) == 1, "readahead asked %d times:\n%s" % (len(ahead), text)
    replies = [i for i, c in enumerate(calls) if c.startswith("writev(") and "</dev/fuse>" in c]
    assert replies, text
    return ahead[0], replies[0], text


def test_mount_asks_for_metadata_readahead_once_live(tmp_path):
    """The daemon asks the kernel to read the metadata pages ahead once, and only after
    it has answered INIT: walking the page cache for every page (0.1 ms for a million
    files, all cached) is not on the way to a live mount."""
    log = tmp_path / "strace.log"
    with straced_mount(fifty_files(tmp_path), tmp_path / "mnt", log, "writev,fadvise64") as mnt:
        assert sorted(os.listdir(mnt / "d")) == sorted("f%d" % i for i in range(50))
        assert (mnt / "d" / "f7").read_bytes() == b"7\n"
    ahead, init, calls = readahead_and_init(log)
    assert init < ahead, "readahead asked before INIT was answered:\n" + calls


def test_mount_with_walks_asks_for_metadata_readahead_before_them(tmp_path):
    """An image with a hot list is walked before the mount is live (the warming and
    priming plans): the readahead is asked once, before those walks, as a cold image
    needs, so before INIT is answered."""
    log = tmp_path / "strace.log"
    with straced_mount(fifty_files(tmp_path, hot=True), tmp_path / "mnt", log,
                       "writev,fadvise64", options="ro") as mnt:
        assert (mnt / "d" / "f3").read_bytes() == b"3\n"
    ahead, init, calls = readahead_and_init(log)
    assert ahead < init, "readahead asked after INIT was answered:\n" + calls


def test_priming_looks_up_every_hot_file_in_two_streams(tmp_path):
    """On two CPUs or more, the priming child looks the hot files up in two threads at
    once, each taking the next name not yet taken, every file once; the mount returns
    only when both are done."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: one stream")
    log = tmp_path / "strace.log"
    with straced_mount(fifty_files(tmp_path, hot=True), tmp_path / "mnt", log,
                       "openat2", options="ro") as mnt:
        assert (mnt / "d" / "f49").read_bytes() == b"49\n"
    by_thread = {}
    for line in log.read_text().splitlines():
        m = re.match(r'(\d+)\s+openat2\(\d+<[^>]*>, "(d/f\d+)", \{flags=[^}]*O_PATH', line)
        if m:
            by_thread.setdefault(m.group(1), []).append(m.group(2))
    assert len(by_thread) == 2, by_thread
    looked_up = sorted(p for paths in by_thread.values() for p in paths)
    assert looked_up == sorted("d/f%d" % i for i in range(50)), by_thread
