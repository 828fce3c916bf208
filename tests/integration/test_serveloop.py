# SPDX-License-Identifier: MIT
"""The daemon's request loop (mounthelper/mount/serveloop.h): readers in parallel each
get their own bytes while the loop adds workers, never more than its cap, and the loop
ends with every worker, whether the mount goes or a signal ends it while workers wait
for requests."""

import contextlib
import os
import resource
import signal
import subprocess
import threading
import time

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, unmount
from test_mount import daemon_pids, wait_gone
from test_sandbox import stipple_user  # noqa: F401 (a fixture)

pytestmark = pytest.mark.needs_root

THREADS_CAP = 10  # STP_SERVELOOP_THREADS
FILES = 24


@pytest.fixture(scope="module")
def tree_image(tmp_path_factory):
    """FILES files of 3 MiB each, in 1 MiB blocks: a parallel read of each decodes
    blocks of its own."""
    base = tmp_path_factory.mktemp("serveloop")
    tree = base / "tree"
    tree.mkdir()
    for i in range(FILES):
        seed = i.to_bytes(4, "little")
        chunk = b"".join(seed + n.to_bytes(4, "little") for n in range(1024))
        (tree / ("f%02d" % i)).write_bytes(chunk * (3 * 1024 * 1024 // len(chunk)))
    return tree, build_image(tree, base / "app.stp", "--block-size", "1M", "--level", "3")


def mount(image, mnt, blocked=(), options="noprime", tasks=None):
    """mount.stipple, run with BLOCKED signals held in its mask and, when TASKS is
    given, RLIMIT_NPROC at TASKS (the daemon inherits both; root's monitor ignores the
    limit, the confined daemon's user meets it)."""
    def prepare():
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        if tasks is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))

    subprocess.run([MOUNT_STIPPLE, image, mnt, "-o", options], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                   preexec_fn=prepare)
    assert is_mounted(os.fspath(mnt))
    pids = daemon_pids(mnt)
    assert len(pids) == 1, pids
    return pids[0]


def readers_of(pid):
    """The daemon's threads waiting for a request: in the kernel's read of /dev/fuse."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/wchan" % (pid, tid)) as f:
                n += f.read().strip() == "fuse_dev_do_read"
        except OSError:
            pass
    return n


def read_in_parallel(tree, mnt):
    """Every file read whole by a thread of its own, all at once; the files whose bytes
    differ from the tree's."""
    wrong = []
    go = threading.Barrier(FILES)

    def one(name):
        go.wait()
        if (mnt / name).read_bytes() != (tree / name).read_bytes():
            wrong.append(name)

    readers = [threading.Thread(target=one, args=(n,)) for n in sorted(os.listdir(tree))]
    for r in readers:
        r.start()
    for r in readers:
        r.join(timeout=120)
        assert not r.is_alive(), "a reader still waits after 120 s"
    return wrong


def read_until_readers(tree, mnt, pid, least):
    """The files read in parallel, checked; then waits for at least LEAST of the loop's
    threads to wait for requests again (its idle ones stay), and no more than its cap."""
    assert read_in_parallel(tree, mnt) == []
    deadline = time.monotonic() + 5
    while readers_of(pid) < least and time.monotonic() < deadline:
        time.sleep(0.05)
    assert least <= readers_of(pid) <= THREADS_CAP


def test_parallel_readers_and_the_workers_cap(tree_image, tmp_path):
    tree, image = tree_image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    pid = mount(image, mnt)
    try:
        read_until_readers(tree, mnt, pid, 2)  # the main thread and a worker, at least
        read_until_readers(tree, mnt, pid, 2)
    finally:
        unmount(os.fspath(mnt))
    assert wait_gone([pid]), "the daemon outlived its mount"


def read_returns(path, timeout=10):
    """Whether a read of PATH returns (its bytes or an error) within TIMEOUT seconds."""
    done = threading.Event()

    def one():
        try:
            path.read_bytes()
        except OSError:
            pass
        done.set()

    threading.Thread(target=one, daemon=True).start()
    return done.wait(timeout)


@pytest.mark.parametrize("sig, blocked", [
    (signal.SIGTERM, ()),
    (signal.SIGINT, ()),
    # the caller's mask held the signals the loop and the ending use: the daemon's
    # main thread, which serves, would never have been woken
    (signal.SIGTERM, (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)),
])
def test_a_signal_ends_the_loop_and_its_waiting_workers(tree_image, tmp_path, sig, blocked):
    """Workers wait in their reads of /dev/fuse when the signal comes: the loop wakes
    them, a read that comes then is answered, the daemon exits at once, and the watcher
    takes the mount it left."""
    tree, image = tree_image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    pid = mount(image, mnt, blocked)
    try:
        read_until_readers(tree, mnt, pid, 3)  # two workers to wake, besides the main
        os.kill(pid, sig)
        time.sleep(0.2)
        assert read_returns(mnt / "f00"), "a read after %s hangs" % sig.name
        assert_ends(pid, mnt, sig)
    finally:
        unmount(os.fspath(mnt))


def assert_ends(pid, mnt, sig):
    """The daemon exits within 3 s of SIG, and the watcher takes the mount it left."""
    assert wait_gone([pid], timeout=3), "the daemon still runs 3 s after %s" % sig.name
    deadline = time.monotonic() + 10
    while is_mounted(os.fspath(mnt)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_mounted(os.fspath(mnt)), "the mount outlived its daemon"


def tasks_of(uid):
    """How many of the machine's tasks run as UID (RLIMIT_NPROC counts them all)."""
    n = 0
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/status" % d) as f:
                ids = next(ln for ln in f if ln.startswith("Uid:")).split()
            if int(ids[1]) == uid:
                n += len(os.listdir("/proc/%s/task" % d))
        except (OSError, StopIteration):
            pass
    return n


def daemon_tasks(pid, want, timeout=5):
    """The daemon's task count once it is WANT (its loop's thread starts after the mount
    command returns), or what it is after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while True:
        n = len(os.listdir("/proc/%d/task" % pid))
        if n == want or time.monotonic() > deadline:
            return n
        time.sleep(0.02)


def test_a_signal_ends_the_loop_when_no_thread_can_start(tree_image, tmp_path,
                                                         stipple_user):  # noqa: F811
    """The daemon's user may start two tasks: the loop's thread starts, the ending
    thread and every worker cannot. The mount still serves from its main thread, and a
    signal ends it at once (the handler stops the loop itself)."""
    tree, image = tree_image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if tasks_of(stipple_user.pw_uid):
        pytest.skip("the user 'stipple' runs other tasks, which the limit would count")
    pid = mount(image, mnt, options="noprime,nofill,warm_workers=0,sandbox_user=stipple",
                tasks=2)
    try:
        assert (mnt / "f05").read_bytes() == (tree / "f05").read_bytes()
        assert daemon_tasks(pid, 2) == 2
        time.sleep(0.2)
        assert daemon_tasks(pid, 2) == 2, "the limit let a third task start"
        os.kill(pid, signal.SIGTERM)
        assert_ends(pid, mnt, signal.SIGTERM)
    finally:
        unmount(os.fspath(mnt))


def test_signals_as_the_loop_ends_without_its_thread(tree_image, tmp_path,
                                                    stipple_user):  # noqa: F811
    """The same daemon, under `stipple mount -f`: SIGTERM sent to the monitor again and
    again, every half millisecond, until it exits; each is passed to the daemon, also
    while the loop ends and after. The daemon exits of itself (the monitor's status 0:
    forwarded, and not killed by a signal) and the mount goes."""
    tree, image = tree_image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if tasks_of(stipple_user.pw_uid):
        pytest.skip("the user 'stipple' runs other tasks, which the limit would count")
    log = tmp_path / "stderr"
    with open(log, "wb") as err:
        fg = subprocess.Popen(
            [STIPPLE, "mount", "-f", "-o", "noprime,nofill,warm_workers=0,sandbox_user=stipple",
             image, mnt], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC, (2, 2)))
    try:
        deadline = time.monotonic() + 10
        while not is_mounted(os.fspath(mnt)):
            assert fg.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "not mounted"
            time.sleep(0.02)
        assert (mnt / "f07").read_bytes() == (tree / "f07").read_bytes()
        pid, = (p for p in daemon_pids(mnt) if p != fg.pid)
        assert daemon_tasks(pid, 2) == 2
        deadline = time.monotonic() + 5
        while fg.poll() is None and time.monotonic() < deadline:
            fg.send_signal(signal.SIGTERM)
            time.sleep(0.0005)
        assert fg.wait(timeout=5) == 0, log.read_text()
        assert wait_gone([pid], timeout=3)
        assert not is_mounted(os.fspath(mnt))
    finally:
        if fg.poll() is None:
            fg.kill()
            fg.wait()
        unmount(os.fspath(mnt))
