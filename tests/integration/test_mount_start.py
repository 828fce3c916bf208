# SPDX-License-Identifier: MIT
"""What mount.stipple does on its way to a live mount: on a directory that is no mount
point (statx says it is no mount's root) it reads no mount table before mount(2); on
one that is, it still reads the table and refuses, naming what is there."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import MOUNT_STIPPLE, build_image, is_mounted, unmount

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
