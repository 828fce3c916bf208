# SPDX-License-Identifier: MIT
"""Priming in the background (-o prime_background): mount.stipple returns once the mount
is live, the lookups go on in a child that holds no descriptor on the host's mount (an
umount right after the return succeeds); by default it returns only once they are done.
strace delays each lookup of the priming child (openat2) to make it slow enough to see."""

import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import MOUNT_STIPPLE, build_image, is_mounted, unmount

pytestmark = pytest.mark.needs_root

FILES = 4


def hot_image(tmp_path):
    tree = tmp_path / "tree"
    (tree / "hot").mkdir(parents=True)
    for i in range(FILES):
        (tree / "hot" / ("f%d" % i)).write_bytes(os.urandom(8192))
    hot = tmp_path / "hot.list"
    hot.write_text("".join("hot/f%d\n" % i for i in range(FILES)))
    return build_image(tree, tmp_path / "app.stp", "--level", "1", "--hot-list", hot)


def traced_mount(tmp_path, delay_s, *opts):
    """mount.stipple under strace -f, each openat2 held DELAY_S: (strace's process, its
    log, the mount point). The log's first pid is mount.stipple's."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "strace.log"
    p = subprocess.Popen(["strace", "-f", "-o", log, "-e", "trace=execve,openat2",
                          "-e", "inject=openat2:delay_enter=%d" % (delay_s * 1000000),
                          MOUNT_STIPPLE, hot_image(tmp_path), mnt, *opts],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return p, log, os.fspath(mnt)


def helper_exit(log):
    """mount.stipple's exit status once strace logged it, else None."""
    text = log.read_text() if log.exists() else ""
    first = re.match(r"(\d+) ", text)
    m = first and re.search(r"^%s \+\+\+ exited with (\d+) \+\+\+" % first.group(1), text, re.M)
    return int(m.group(1)) if m else None


def wait_helper(log, p, limit):
    """Seconds until mount.stipple exited (within LIMIT), and its status."""
    t0 = time.monotonic()
    while helper_exit(log) is None and time.monotonic() - t0 < limit and p.poll() is None:
        time.sleep(0.02)
    return time.monotonic() - t0, helper_exit(log)


def lookups_done(log):
    """The priming child's openat2 calls that found their file."""
    return len(re.findall(r"^\d+ (?:openat2\(|<\.\.\. openat2 resumed>).*\)\s+= \d+( \(DELAYED\))?$",
                          log.read_text(), re.M))


def test_mount_returns_live_while_priming_goes_on_and_unmounts_at_once(tmp_path):
    """Each of the 4 lookups held 2 s: the helper exits 0 with the mount live well before
    the 8 s they take (before, it waited for them); umount right then succeeds (the
    child looks up through its own copy of the mount); the child still looks every file
    up, and the daemon ends once it has."""
    p, log, mnt = traced_mount(tmp_path, 2, "-o", "prime_background")
    try:
        took, status = wait_helper(log, p, 30)
        assert status == 0, (took, log.read_text()[-3000:])
        assert took < 5, "mount.stipple returned after %.1f s: it waited for priming" % took
        assert is_mounted(mnt)
        assert lookups_done(log) < FILES, log.read_text()[-3000:]
        r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert not is_mounted(mnt)
        p.wait(timeout=60)  # strace ends with the daemon, the watcher and the child
        assert lookups_done(log) == FILES, log.read_text()[-3000:]
    finally:
        unmount(mnt)
        if p.poll() is None:
            p.kill()
            p.wait()


def test_by_default_the_mount_returns_once_the_lookups_are_done(tmp_path):
    """Without the option the helper exits 0 only after the 4 lookups, each held 1 s,
    have found their files."""
    p, log, mnt = traced_mount(tmp_path, 1)
    try:
        took, status = wait_helper(log, p, 30)
        assert status == 0, (took, log.read_text()[-3000:])
        assert took >= FILES * 1 - 0.5, "mount.stipple returned after %.1f s" % took
        assert lookups_done(log) == FILES, log.read_text()[-3000:]
    finally:
        unmount(mnt)
        p.wait(timeout=60)
