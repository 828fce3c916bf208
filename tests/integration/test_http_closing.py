# SPDX-License-Identifier: MIT
"""A URL mount against a server that closes its connection after each answer (HTTP/1.0,
or `Connection: close`): a whole read with dd bs=64k gives the source's bytes, and at
umount the daemon and the fetcher of that URL both end within a few seconds (review 6
#5: libcurl parked such transfers for good, the read failed after 40 s, and the fetcher,
with its store's locks, outlived the mount)."""

import os
import signal
import subprocess
import time

import pytest

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)
from conftest import STIPPLE, build_image, is_mounted, mount_image, run

pytestmark = pytest.mark.needs_root

READ_LIMIT = 60   # seconds: the whole read takes about one here, the wedge forever
END_LIMIT = 5     # seconds after umount for both processes to be gone
SIGTERM_LIMIT = 2  # seconds after SIGTERM to the daemon for both to be gone


def processes_of(url):
    """The pids of stipple-fetcher and stipple-mountd processes serving URL."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        name = os.path.basename(args[0])
        if name.startswith((b"stipple-fetcher", b"stipple-mountd")) and url.encode() in args:
            pids.append(int(pid))
    return pids


def kill_leftovers(url):
    for pid in processes_of(url):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_ended(url, since):
    """No daemon or fetcher of URL left END_LIMIT seconds after umount (at SINCE)."""
    deadline = time.monotonic() + END_LIMIT
    while processes_of(url) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_of(url), "still running %.1f s after umount: %s" % (
        time.monotonic() - since, processes_of(url))


def dd_whole(path):
    r = subprocess.run(["dd", "if=%s" % path, "bs=64k", "status=none"], capture_output=True,
                       timeout=READ_LIMIT)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def read_and_end(url, want, *mount_args):
    """Mounts URL, reads /noise whole (it must be WANT), unmounts: both processes end."""
    try:
        with mount_image(url, None, "--no-prime", *mount_args) as mnt:
            assert processes_of(url), "no daemon or fetcher found for %s" % url
            t0 = time.monotonic()
            try:
                got = dd_whole(os.path.join(mnt, "noise"))
            except subprocess.TimeoutExpired:
                pytest.fail("dd bs=64k did not end within %d s" % READ_LIMIT)
            assert got == want, "the read gave other bytes than the source's"
            print("read %d bytes in %.1f s" % (len(got), time.monotonic() - t0))
            t0 = time.monotonic()
            assert run(["umount", mnt], timeout=60).returncode == 0
        assert_ended(url, t0)
    finally:
        kill_leftovers(url)


@pytest.fixture
def noise_tree(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "noise").write_bytes(os.urandom(8 << 20))
    return tree


def test_one_file_image_through_a_closing_server(noise_tree, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    build_image(noise_tree, www / "noise.stp", "--level", "1", "--block-size", "64K")
    with httputil.closing_server(www) as base:
        read_and_end(base + "noise.stp", (noise_tree / "noise").read_bytes(),
                     "-o", "cache_size=0,timeout=5")


def test_published_image_through_a_closing_server(noise_tree, tmp_path):
    www, cache = tmp_path / "www", tmp_path / "cache"
    image = build_image(noise_tree, tmp_path / "noise.stp", "--level", "1", "--block-size", "64K")
    os.makedirs(www / "repo")
    run([STIPPLE, "publish", "-q", image, www / "repo"], check=True)
    with httputil.closing_server(www) as base:
        read_and_end(base + "repo/noise.stp", (noise_tree / "noise").read_bytes(),
                     "-o", "cache_dir=%s,timeout=5" % cache)


def test_umount_ends_a_fetch_that_waits(tmp_path, noise_tree):
    """A server that takes the connection and never answers (timeout=60: the fetcher
    waits for it): once the reader is gone, umount ends the daemon and the fetcher within
    a few seconds, whatever the transfer still waits for."""
    image = build_image(noise_tree, tmp_path / "image.stp", "--level", "1", "--block-size", "64K")
    with httputil.fault_front(image) as front:
        url = front.url()
        front.slow = 600
        try:
            with mount_image(url, None, "--no-prime", "-o", "cache_size=0,timeout=60") as mnt:
                front.mode = "slow"
                dd = subprocess.Popen(["dd", "if=%s" % os.path.join(mnt, "noise"), "bs=64k",
                                       "of=/dev/null", "status=none"])
                time.sleep(2)
                assert dd.poll() is None, "the read ended: the server answered"
                dd.kill()
                dd.wait(timeout=30)
                t0 = time.monotonic()
                assert run(["umount", mnt], timeout=60).returncode == 0
            assert_ended(url, t0)
        finally:
            kill_leftovers(url)


def mountd_of(url):
    """The pid of the stipple-mountd serving URL (one expected)."""
    pids = []
    for pid in processes_of(url):
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if os.path.basename(f.read().split(b"\0")[0]).startswith(b"stipple-mountd"):
                pids.append(pid)
    assert len(pids) == 1, "stipple-mountd of %s: %s" % (url, pids)
    return pids[0]


def test_sigterm_ends_a_fetch_that_waits(tmp_path, noise_tree):
    """As above, but the daemon is sent SIGTERM while the read waits on the silent server
    (the reader still there): the daemon and the fetcher end within SIGTERM_LIMIT seconds,
    not when the read's own time limit (timeout=60) runs out, the read fails, and the
    watcher unmounts the mount the daemon left, as for any SIGTERM'd daemon."""
    image = build_image(noise_tree, tmp_path / "image.stp", "--level", "1", "--block-size", "64K")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with httputil.fault_front(image) as front:
        url = front.url()
        front.slow = 600
        try:
            with mount_image(url, mnt, "--no-prime", "-o", "cache_size=0,timeout=60"):
                front.mode = "slow"
                dd = subprocess.Popen(["dd", "if=%s" % (mnt / "noise"), "bs=64k",
                                       "of=/dev/null", "status=none"], stderr=subprocess.PIPE)
                time.sleep(2)
                assert dd.poll() is None, "the read ended: the server answered"
                t0 = time.monotonic()
                os.kill(mountd_of(url), signal.SIGTERM)
                deadline = t0 + SIGTERM_LIMIT
                while processes_of(url) and time.monotonic() < deadline:
                    time.sleep(0.05)
                took = time.monotonic() - t0
                assert not processes_of(url), "still running %.1f s after SIGTERM: %s" % (
                    took, processes_of(url))
                print("daemon and fetcher gone %.2f s after SIGTERM" % took)
                assert dd.wait(timeout=10) != 0, "the read succeeded without a server"
                while is_mounted(mnt) and time.monotonic() < t0 + 10:
                    time.sleep(0.05)
                assert not is_mounted(mnt), "the watcher left the dead mount"
        finally:
            kill_leftovers(url)

