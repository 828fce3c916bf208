# SPDX-License-Identifier: MIT
"""A confined process that stays after its mount is ended (review 8 #3). The daemon and
the fetcher parse what an image, a server and a proxy send; one turned hostile could
ignore its mount's end and keep its share of cache_size= charged, its store files locked
and its memory. A stopped process plays it here: it ignores its sockets closing and its
FUSE connection ending, as such a process would. The watcher (watcher.h) must end it,
after a grace of a few seconds, once the mount has gone."""

import ctypes
import os
import signal
import time

import pytest

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)
from conftest import STIPPLE, build_image, mount_image, process_alive, read_file, run, unmount
from test_mount import foreground_mount
from test_http import as_nobody, fuse_open_to_users
from test_http_closing import kill_leftovers, processes_of

pytestmark = pytest.mark.needs_root

GONE_LIMIT = 20  # seconds after umount: the watcher's grace (5 s) for each, with room


def named(pids, name):
    out = []
    for pid in pids:
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().startswith(name):
                    out.append(pid)
        except OSError:
            pass
    return out


def stop(pids):
    assert pids, "nothing to stop"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def assert_gone(what, pids):
    """Every pid of PIDS gone (or a zombie) within GONE_LIMIT."""
    deadline = time.monotonic() + GONE_LIMIT
    left = pids
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in pids if process_alive(p)]
    assert not left, "%s still there %d s after umount: %s" % (what, GONE_LIMIT, left)


def umount2(mnt):
    """umount2(2) itself: umount(8) looks at the mount point first, which a stopped
    daemon never answers."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.umount2(os.fsencode(mnt), 0) == 0, os.strerror(ctypes.get_errno())


@pytest.fixture
def published(gen_tree, tmp_path):
    """A published image of the session tree served by a local server: its URL, and a
    cache_dir= so that the fetcher holds store files (locked) while it lives."""
    image = build_image(gen_tree, tmp_path / "gen.stp", "--level", "1", "--block-size", "64K")
    www = tmp_path / "www"
    os.makedirs(www / "repo")
    run([STIPPLE, "publish", "-q", image, www / "repo"], check=True)
    with httputil.closing_server(www) as base:
        yield base + "repo/gen.stp", tmp_path / "cache"


def test_a_fetcher_that_stays_is_ended_once_its_mount_goes(published, gen_tree):
    url, cache = published
    try:
        with mount_image(url, None, "--no-prime", "-o", "cache_dir=%s,timeout=5" % cache) as mnt:
            assert read_file(os.path.join(mnt, "a/b/mid.txt")) == b"in the middle\n"
            fetchers = named(processes_of(url), "stipple-fetch")
            stop(fetchers)
            assert run(["umount", mnt], timeout=60).returncode == 0
        assert_gone("the stopped fetcher", fetchers)
        assert not processes_of(url), "the daemon or the fetcher stayed"
    finally:
        kill_leftovers(url)


def test_a_daemon_that_stays_after_its_mount_is_ended(gen_image):
    """The daemon stopped: umount ends its connection, which it never reads; the watcher
    sees the connection end and kills it."""
    image = os.fspath(gen_image)
    before = set(named(processes_of(image), "stipple-mountd"))
    try:
        with mount_image(image, None, "--no-prime") as mnt:
            daemons = [p for p in named(processes_of(image), "stipple-mountd") if p not in before]
            stop(daemons)
            umount2(mnt)
        assert_gone("the stopped daemon", daemons)
    finally:
        for pid in daemons if "daemons" in dir() else []:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_foreground_daemon_that_stays_after_its_mount_is_ended(gen_image, tmp_path):
    """With -f the monitor itself stays, and watches as the watcher would: the daemon
    stopped, umount ends its connection; the monitor kills it after the grace, says so,
    and exits non-zero (before, it waited for the daemon for ever)."""
    image = os.fspath(gen_image)
    mnt = tmp_path / "mnt"
    os.mkdir(mnt)
    before = set(named(processes_of(image), "stipple-mountd"))
    daemons = []
    try:
        with foreground_mount(image, os.fspath(mnt), "--no-prime") as fg:
            daemons = [p for p in named(processes_of(image), "stipple-mountd")
                       if p not in before]
            stop(daemons)
            umount2(mnt)
            assert_gone("the stopped foreground daemon", daemons)
            assert fg.proc.wait(timeout=GONE_LIMIT) != 0
            assert "the daemon stayed" in fg.log(), fg.log()
    finally:
        for pid in daemons:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_users_fetcher_that_stays_is_ended(published):
    """The same for a user's `stipple mount URL`: the watcher runs as the user, who may
    signal the user's own fetcher."""
    url, _ = published
    with as_nobody() as (as_user, env, mnt, home):
        try:
            with fuse_open_to_users():
                r = run(as_user + [STIPPLE, "mount", "--no-prime", url, mnt], env=env,
                        timeout=60)
            assert r.returncode == 0, r.stderr
            fetchers = named(processes_of(url), "stipple-fetch")
            stop(fetchers)
            r = run(as_user + ["fusermount3", "-u", mnt], env=env, timeout=60)
            assert r.returncode == 0, r.stderr
            assert_gone("the user's stopped fetcher", fetchers)
        finally:
            unmount(mnt)
            kill_leftovers(url)
