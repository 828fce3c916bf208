# SPDX-License-Identifier: MIT
"""A fault-injecting front on loopback (httputil.Front) between a mount and its image: a
server that is down, slow past timeout=, resets connections, answers 200 to a range,
sends a short or a wrong body, or starts serving another image. Each must end in EIO for
the read (or a refused mount) within the deadline, never in wrong bytes (a 206 for
another range than the one asked too); umount always works, and reads succeed again once
the server is well."""

import errno
import os
import shutil
import signal
import subprocess
import time

import pytest

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)
from conftest import (MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, mount_image, read_file,
                      run, unmount)

TIMEOUT = 2           # timeout= of the mounts: seconds a read may take, retries included
DEADLINE = 20         # what a failing read may take here, on a busy machine
FAULTS = ["slow", "reset", "whole", "shifted", "short", "wrong", "other"]


@pytest.fixture
def front(tmp_path, gen_image, gen_tree):
    image = tmp_path / "image.stp"
    shutil.copy(gen_image, image)
    other = tmp_path / "other"
    other.mkdir()
    (other / "files").mkdir()
    (other / "files" / "large").write_bytes(os.urandom(3 << 20))
    replacement = build_image(other, tmp_path / "other.stp", "--level", "3")
    with httputil.fault_front(image) as f:
        f.replacement = replacement
        f.slow = TIMEOUT * 4
        yield f


def read_or_eio(path):
    """The bytes of PATH, or None when the read failed with EIO; any other error fails."""
    try:
        return read_file(path)
    except OSError as e:
        assert e.errno == errno.EIO, "read %s: %s" % (path, e)
        return None


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_during_reads(front, gen_tree, fault):
    opts = "timeout=%d,cache_size=0" % TIMEOUT
    with mount_image(front.url(), None, "--no-prime", "-o", opts) as mnt:
        assert read_file(os.path.join(mnt, "a", "b", "mid.txt")) == b"in the middle\n"
        front.mode = fault
        t0 = time.monotonic()
        got = read_or_eio(os.path.join(mnt, "files", "large"))
        spent = time.monotonic() - t0
        assert got is None, "a read through a %s server gave bytes" % fault
        assert spent < DEADLINE, "the read took %.1f s" % spent
        front.mode = "ok"
        assert read_file(os.path.join(mnt, "files", "large")) == \
            read_file(gen_tree / "files" / "large")
        t0 = time.monotonic()
        assert run(["umount", mnt], timeout=60).returncode == 0
        assert not is_mounted(mnt)
        assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("fault", ["slow", "reset", "whole", "shifted", "short", "wrong"])
def test_fault_at_mount_is_refused(front, tmp_path, fault):
    front.mode = fault
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    t0 = time.monotonic()
    r = run([MOUNT_STIPPLE, front.url(), mnt, "-o", "timeout=%d,cache_size=0" % TIMEOUT],
            timeout=120)
    assert r.returncode == 32, r.stderr
    assert front.url() in r.stderr, r.stderr
    cause = {"slow": "timed out", "reset": "reset", "whole": "answered 200",
             "shifted": "another range", "short": "remaining", "wrong": "not a stipple image"}
    assert cause[fault] in r.stderr, r.stderr
    assert time.monotonic() - t0 < DEADLINE
    assert not is_mounted(mnt)


def test_server_down_while_mounted(front):
    """The server goes away while mounted: EIO within the deadline, umount works."""
    opts = "timeout=%d,cache_size=0" % TIMEOUT
    with mount_image(front.url(), None, "--no-prime", "-o", opts) as mnt:
        front.go_down()
        t0 = time.monotonic()
        assert read_or_eio(os.path.join(mnt, "files", "large")) is None
        assert time.monotonic() - t0 < DEADLINE
        # the status tells: the read failed, after retries
        text = os.getxattr(mnt, "user.stipple.status").decode()
        st = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)
        assert int(st["net_failures"]) >= 1 and int(st["net_retries"]) >= 1, st
        assert int(st["net_requests"]) > int(st["net_retries"]), st
        human = run([STIPPLE, "status", mnt], check=True).stdout
        assert "reads failed: %s\n" % st["net_failures"] in human, human
        assert run(["umount", mnt], timeout=60).returncode == 0
        assert not is_mounted(mnt)


def test_warming_keeps_several_requests_in_flight(tmp_path):
    """The hot region comes over the network with one request per warming worker in
    flight, and what warming fetched is what reads then get."""
    tree = tmp_path / "tree"
    tree.mkdir()
    blobs = {}
    for i in range(12):
        blobs["f%02d" % i] = os.urandom(200 << 10)
        (tree / ("f%02d" % i)).write_bytes(blobs["f%02d" % i])
    hot = tmp_path / "hot.list"
    hot.write_text("".join("%s\n" % n for n in sorted(blobs)))
    image = build_image(tree, tmp_path / "hot.stp", "--level", "1", "--block-size", "64K",
                        "--hot-list", hot)
    # with --warm-workers 1 the assertion below fails: one range at a time
    with httputil.fault_front(image) as front:
        front.delay = 0.02  # each answer takes a while: requests in flight together overlap
        with mount_image(front.url(), None, "--no-prime", "--warm-workers", "4", "-o",
                         "cache_size=0") as mnt:
            deadline = time.monotonic() + DEADLINE
            while front.requests < 16 and time.monotonic() < deadline:
                time.sleep(0.05)
            warming = front.most_inflight  # nothing but warming has read yet
            for name, data in blobs.items():
                assert read_file(os.path.join(mnt, name)) == data
        assert warming >= 2, "warming asked for one range at a time"


def test_redirect_to_a_name_not_resolved_before_confinement(front, tmp_path):
    """The fetcher resolves names before it confines itself; a redirect to another name
    fails to resolve, clearly, and the confined fetcher is not killed by its filter."""
    front.mode = "redirect"
    front.redirect = "http://stipple-test.invalid:%d/image.stp" % front.port
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, front.url(), mnt, "-o", "timeout=%d,cache_size=0" % TIMEOUT],
            timeout=120)
    assert r.returncode == 32, r.stderr
    assert "resolve" in r.stderr and "stipple-test.invalid" in r.stderr, r.stderr
    assert not is_mounted(mnt)


@pytest.mark.parametrize("fault", ["reset", "short"])
def test_reader_fetch_failure_names_the_cause_only(front, fault):
    """A reader whose fetch fails after the image opened says what failed (the URL and
    the network's cause) and reads it as EIO, not as a damaged image: nothing "lies past
    the end of the file"."""
    env = dict(os.environ, STIPPLE_TIMEOUT="1")
    r = run([STIPPLE, "ls", front.url(), "/"], env=env)
    assert r.returncode == 0, r.stderr
    front.healthy_first, front.requests = front.requests, 0  # what opening the image takes
    front.mode = fault
    r = run([STIPPLE, "cat", front.url(), "files/large"], env=env, timeout=120)
    assert r.returncode != 0
    cause = {"reset": "reset", "short": "remaining"}[fault]
    lines = r.stderr.splitlines()
    assert any(front.url() in ln and cause in ln for ln in lines), r.stderr
    assert "past the end" not in r.stderr and "damaged" not in r.stderr, r.stderr


def test_local_file_that_ends_early_is_damage(tmp_path):
    """The same short read from a local file (it shrank while read) is the image's
    damage, named as such."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "big").write_bytes(os.urandom(8 << 20))
    image = build_image(tree, tmp_path / "big.stp", "--level", "1", "--block-size", "64K")
    p = subprocess.Popen([STIPPLE, "cat", image, "big"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        first = p.stdout.read(1)  # cat has read its first chunk and waits on the pipe
        os.truncate(image, 4096)
        rest = p.stdout.read()
        err = p.stderr.read().decode()
    finally:
        p.kill()
        p.wait()
    assert p.returncode != 0 and len(first + rest) < 8 << 20
    assert "lies past the end of the file" in err and str(image) in err, err


def daemon_waiting(cmdline):
    """The pid of the process whose command line is CMDLINE, or 0."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read() == cmdline:
                    return int(pid)
        except OSError:
            continue
    return 0


def test_late_daemon_of_a_url_is_told_with_the_real_deadline(gen_image, tmp_path):
    """A URL mount gives its daemon the mount deadline and twice timeout= more (its
    metadata comes over the network): the message says that figure, not 10 s. The
    daemon is stopped while the monitor still reads the superblock (each answer waits)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with httputil.fault_front(gen_image) as front:
        front.delay = 2
        proc = subprocess.Popen([MOUNT_STIPPLE, front.url(), mnt, "-o",
                                 "timeout=4,cache_size=0,noprime"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            want = b"stipple-mountd\0%s\0%s\0" % (front.url().encode(),
                                                   os.fsencode(os.path.realpath(mnt)))
            while not daemon_waiting(want) and proc.poll() is None:
                time.sleep(0.02)
            os.kill(daemon_waiting(want), signal.SIGSTOP)
            front.delay = 0
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    if is_mounted(mnt):
        unmount(mnt)
    assert proc.returncode == 32, err
    assert "the daemon did not answer within 18 s" in err, err
