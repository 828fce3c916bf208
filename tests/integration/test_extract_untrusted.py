# SPDX-License-Identifier: MIT
"""`stipple extract` of an image that is not trusted: a user's "device not created"
warning, whose name (the image's) is escaped (review 8)."""

import os
import pwd
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import STIPPLE, build_image

FAST = ("--level", "3", "--block-size", "64K")

pytestmark = pytest.mark.needs_root("runs extract as another user")


def test_users_device_warning_escapes_the_images_name(tmp_path):
    """A user cannot make devices: each is skipped with a warning naming it. The name is
    the image's, so it is escaped like every other message: no terminal control bytes
    reach stderr (7a05301 printed them raw)."""
    nobody = pwd.getpwnam("nobody")
    src = tmp_path / "src"
    src.mkdir()
    evil = "dev\x1b]2;owned\x07\x1b[31mred"
    os.mknod(src / evil, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    arena = tempfile.mkdtemp(prefix="stp-untrusted-", dir="/tmp")
    try:
        os.chmod(arena, 0o755)
        image = build_image(src, os.path.join(arena, "e.stipple"), *FAST)
        os.chmod(image, 0o644)
        dest = os.path.join(arena, "out")
        os.mkdir(dest)
        os.chown(dest, nobody.pw_uid, nobody.pw_gid)
        r = subprocess.run([STIPPLE, "extract", "-q", image, os.path.join(dest, "x")],
                           user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    finally:
        shutil.rmtree(arena, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert b"device not created" in r.stderr, r.stderr
    assert b"\x1b" not in r.stderr and b"\x07" not in r.stderr, r.stderr
