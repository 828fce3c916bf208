# SPDX-License-Identifier: MIT
"""Priming looks the hot files up beneath the mount point's parent pinned before the
mount, never by the path again (review 2 #8)."""

import os
import shutil
import subprocess
import time

import pytest

from conftest import STIPPLE, build_image, is_mounted, unmount


@pytest.mark.needs_root
def test_priming_follows_no_path_swapped_after_the_mount(tmp_path):
    """The monitor reopened the mount point by its path to prime: a user who owns a
    directory on that path renames it once the mount is live and leaves a link in its
    place, and root's lookups go to a directory of hers (here a plain one: priming
    fails, a warning). strace holds each open of the mount point's full path 3 s while
    the path is swapped: the lookups still reach the mount, no warning."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    tree = tmp_path / "tree"
    (tree / "hot").mkdir(parents=True)
    for i in range(4):
        (tree / "hot" / ("f%d" % i)).write_bytes(os.urandom(8192))
    hot = tmp_path / "hot.list"
    hot.write_text("".join("hot/f%d\n" % i for i in range(4)))
    image = build_image(tree, tmp_path / "app.stp", "--level", "1", "--hot-list", hot)
    apps = tmp_path / "apps"
    (apps / "mnt").mkdir(parents=True)
    decoy = tmp_path / "decoy"
    (decoy / "mnt").mkdir(parents=True)
    mnt = os.fspath(apps / "mnt")
    log = tmp_path / "stderr"
    # the monitor only (no -f): the daemon and the watcher outlive the command
    p = subprocess.Popen(["strace", "-o", "/dev/null", "-P", mnt, "-e", "trace=open,openat",
                          "-e", "inject=open,openat:delay_enter=3000000",
                          STIPPLE, "mount", "--warm-workers", "2", image, mnt],
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    moved = tmp_path / "apps-moved"
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(mnt):
            assert time.monotonic() < deadline and p.poll() is None, log.read_text()
            time.sleep(0.01)
        os.rename(apps, moved)
        os.symlink(decoy, apps)
        p.wait(timeout=60)
        err = log.read_text()
    finally:
        if moved.exists():
            unmount(moved / "mnt")
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "priming" not in err, err
