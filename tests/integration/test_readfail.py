# SPDX-License-Identifier: MIT
"""Failed reads on a mount are made visible (issue 29): each is counted in `stipple
status`, and logged to syslog, rate-limited, naming the image, the file's path and the
cause.

The test plays syslog: it binds the datagram socket /dev/log itself (journald does not
run here; where a daemon already listens there the test is skipped, as it would read
that daemon's lines), mounts an image with one damaged block through `stipple mount`
(the daemon confined, as it always is), and reads every file. The files that fail are
found by reading (EIO), the block by where the byte was flipped (`stipple info
--blocks`); the lines received must name those files, that block, and the image.
"""
import contextlib
import errno
import os
import re
import socket
import time

import pytest

from conftest import STIPPLE, build_image, mount_image, run
from imageutil import FAST
from test_memory import raw_status
from test_mount import blocks_of, noise_tree, read_tree
import treeutil

needs_root = pytest.mark.needs_root("mounting tests need root")
SYSLOG = "/dev/log"
BURST, INTERVAL = 10, 5  # readfail.h: STP_READFAIL_BURST, STP_READFAIL_INTERVAL_S


@contextlib.contextmanager
def syslog_listener():
    if os.path.exists(SYSLOG):
        pytest.skip("%s exists: a syslog daemon listens there" % SYSLOG)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind(SYSLOG)
        s.settimeout(0.5)
        yield s
    finally:
        s.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SYSLOG)


def received(sock, image):
    """The lines sent so far that name IMAGE (other programs log there too), decoded."""
    out = []
    with contextlib.suppress(socket.timeout):
        while True:
            out.append(sock.recv(65536).decode("utf-8", "replace"))
    return [line for line in out if os.fspath(image) in line]


@pytest.fixture
def damaged(tmp_path):
    """(source tree, image with its middle block damaged, that block's number)."""
    src = noise_tree(str(tmp_path / "src"), count=12)
    image = build_image(src, tmp_path / "damaged.stipple", *FAST)
    blocks = blocks_of(image)
    bad = len(blocks) // 2
    off, stored = blocks[bad]
    treeutil.flip_byte(image, off + stored // 2, 0xFF)
    return src, image, bad


def failing_offset(path):
    """The first page of PATH whose read fails (the pages before it read, and are cached)."""
    with open(path, "rb", buffering=0) as f:
        for off in range(0, os.fstat(f.fileno()).st_size, 4096):
            try:
                os.pread(f.fileno(), 4096, off)
            except OSError as e:
                assert e.errno == errno.EIO, e
                return off
    raise AssertionError("no read of %s fails" % path)


def read_fails(path, off):
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            os.pread(fd, 4096, off)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)


@needs_root
def test_failed_read_is_logged_and_counted(damaged):
    src, image, bad = damaged
    with syslog_listener() as sock, mount_image(image) as mnt:
        failed = read_tree(src, mnt)[0]
        assert 1 <= len(failed) <= 2, failed
        lines = received(sock, image)
        status = raw_status(mnt)
        shown = run([STIPPLE, "status", mnt])
    assert lines, "nothing reached %s" % SYSLOG
    for line in lines:
        # RFC 3164, as glibc's syslog() writes: <facility daemon, severity err>
        assert re.match(r"<27>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d stipple\[\d+\]: ", line), line
        assert os.fspath(image) in line, line
        assert "block %d: " % bad in line, line
        assert "damaged" in line, line
    named = {re.search(r"read of /(\S+) failed", line).group(1) for line in lines}
    assert named == set(failed), (named, failed, lines)
    count = status["read_failures"]
    assert count >= len(failed), status
    assert status["read_failures_logged"] == len(lines), (status, lines)
    assert status["read_failures_unsent"] == 0, status
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^reads: +%d failed" % count, shown.stdout, re.M), shown.stdout


@needs_root
def test_failed_reads_are_rate_limited(damaged):
    src, image, bad = damaged
    with syslog_listener() as sock, mount_image(image) as mnt:
        failed = read_tree(src, mnt)[0]
        path = os.path.join(mnt, failed[0])
        off = failing_offset(path)
        start = time.monotonic()
        for _ in range(3 * BURST):
            read_fails(path, off)
        burst = received(sock, image)
        quick = time.monotonic() - start < INTERVAL
        time.sleep(INTERVAL + 0.5)
        read_fails(path, off)
        after = received(sock, image)
        status = raw_status(mnt)
    if not quick:
        pytest.skip("the reads took longer than the limit's interval: a loaded machine")
    assert len(burst) == BURST, burst
    assert len(after) == 2, after
    held = int(re.search(r"(\d+) messages suppressed", after[0]).group(1))
    assert held >= 2 * BURST, after
    assert held == status["read_failures"] - BURST - 1, (after, status)
    assert status["read_failures_suppressed"] == held, status
    assert "read of /%s failed" % failed[0] in after[1], after


@needs_root
def test_path_search_gives_up_on_a_wide_tree(tmp_path):
    """A failing read's path is searched for in at most 100,000 tree entries
    (readfail.c: PATH_WALK_MAX), holding no lock; past them the line names the inode."""
    src = noise_tree(str(tmp_path / "src" / "z"), count=12)
    wide = tmp_path / "src" / "a"  # walked first: its entries come before z's
    wide.mkdir()
    for i in range(100_001):
        (wide / ("%06d" % i)).touch()
    image = build_image(tmp_path / "src", tmp_path / "wide.stipple", "--level", "3",
                        "--block-size", "64K")
    blocks = blocks_of(image)
    off, stored = blocks[len(blocks) // 2]
    treeutil.flip_byte(image, off + stored // 2, 0xFF)
    with syslog_listener() as sock, mount_image(image) as mnt:
        failed = read_tree(src, os.path.join(mnt, "z"))[0]
        lines = received(sock, image)
    assert failed and lines, (failed, lines)
    for line in lines:
        assert re.search(r"read of inode \d+ failed", line), line
