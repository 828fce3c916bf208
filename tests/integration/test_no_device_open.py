# SPDX-License-Identifier: MIT
"""A path root reads that another user can swap for a link to a device or a FIFO is
looked at without opening it (review 8 #5): the list files of mkstipple, the image of
the readers and of mount.stipple. Opening a device runs its driver (a watchdog's open
arms it and a close without its magic word reboots the host; a tape's close rewinds
it; a tty's raises its lines), and reading a tty, a pty or a FIFO waits for good.

Whether a node was opened is seen from outside, with no tracing: a writer blocked in
open(FIFO, O_WRONLY) returns as soon as anyone opens the FIFO for reading, even with
O_NONBLOCK, and stays blocked while it is only looked at (O_PATH, stat). A link to
/dev/ptmx, whose reads wait for good, must be refused at once."""

import os
import threading

import pytest

from conftest import MKSTIPPLE, MOUNT_STIPPLE, STIPPLE, run, unmount


class BlockedWriter:
    """A thread in open(PATH, O_WRONLY), which returns once a reader opens PATH."""

    def __init__(self, path):
        self.path = path
        self.opened = threading.Event()
        self.fd = None
        self.thread = threading.Thread(target=self._open, daemon=True)
        self.thread.start()

    def _open(self):
        self.fd = os.open(self.path, os.O_WRONLY)
        self.opened.set()

    def release(self):
        """Ends the thread (its open returns once we open for reading) and closes both."""
        rfd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.thread.join(10)
        os.close(rfd)
        if self.fd is not None:
            os.close(self.fd)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "planted"
    os.mkfifo(path)
    w = BlockedWriter(path)
    try:
        yield path, w
    finally:
        w.release()


@pytest.fixture
def ptmx_link(tmp_path):
    link = tmp_path / "link-to-ptmx"
    os.symlink("/dev/ptmx", link)
    return link


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (d / "a").write_text("a\n")
    return d


LIST_OPTIONS = ["--exclude-from", "--pseudo-file", "--files-from", "--hot-list"]


@pytest.mark.parametrize("option", LIST_OPTIONS)
def test_list_file_that_is_a_fifo_is_not_opened(src, tmp_path, fifo, option):
    path, writer = fifo
    r = run([MKSTIPPLE, "--quiet", option, path, src, tmp_path / "o.stp"], timeout=30)
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    assert not writer.opened.wait(0.5), "mkstipple opened the FIFO"
    assert not (tmp_path / "o.stp").exists()


@pytest.mark.parametrize("option", LIST_OPTIONS)
def test_list_file_linked_to_a_device_is_refused_at_once(src, tmp_path, ptmx_link, option):
    r = run([MKSTIPPLE, "--quiet", option, ptmx_link, src, tmp_path / "o.stp"], timeout=30)
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr


@pytest.mark.parametrize("before, after", [(["ls"], []), (["info"], []), (["check"], []),
                                           (["cat"], ["/a"])])
def test_reader_image_that_is_a_fifo_is_not_opened(fifo, before, after):
    path, writer = fifo
    r = run([STIPPLE, *before, path, *after], timeout=30)
    assert r.returncode != 0, r.stderr
    assert not writer.opened.wait(0.5), "stipple %s opened the FIFO" % before[0]


@pytest.mark.parametrize("command", ["ls", "info"])
def test_reader_image_linked_to_a_device_is_refused(ptmx_link, command):
    r = run([STIPPLE, command, ptmx_link], timeout=30)
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr


@pytest.mark.needs_root
def test_mount_image_that_is_a_fifo_is_not_opened(fifo, tmp_path):
    path, writer = fifo
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        r = run([MOUNT_STIPPLE, path, mnt], timeout=30)
    finally:
        unmount(str(mnt))
    assert r.returncode == 32 and "not a regular file" in r.stderr, r.stderr
    assert not writer.opened.wait(0.5), "mount.stipple opened the FIFO"
