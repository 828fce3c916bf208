# SPDX-License-Identifier: MIT
"""What a published release's server, proxy or index may not do to a mount (review 2):
hang a read without end, make the monitor fill the store with files, send the netrc
credentials to another host, take the disk past cache_size=. Real nginx on loopback, real
mounts; each test failed on the code before its fix."""

import os
import shutil
import subprocess
import time

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (fixture)
from conftest import STIPPLE, build_image, mount_image
from test_published import REPO, publish, readme_config


def small_release(tmp_path, size=48 << 10, block="64K"):
    """A tree of one incompressible file of SIZE bytes and a small one, published with
    `stipple publish` into tmp_path/www: (tree, index)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "noise").write_bytes(os.urandom(size))
    (tree / "small.txt").write_bytes(b"small\n")
    image = build_image(tree, tmp_path / "app.stp", "--level", "1", "--block-size", block)
    (idx,) = publish([image], tmp_path / "www", "stipple")
    return tree, idx


def timed_cat(path, timeout):
    """`cat PATH` in a process of its own: (exit status or None when still blocked after
    TIMEOUT seconds, stderr, seconds taken)."""
    start = time.monotonic()
    p = subprocess.Popen(["cat", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=timeout)
        return p.returncode, err.decode(), time.monotonic() - start
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, "", time.monotonic() - start


def test_trickled_block_fails_within_its_deadline(tmp_path):
    """A server sends the blocks at 16 bytes a second: above libcurl's low-speed floor of
    1 byte a second, and the fetcher's keepalive frames kept the daemon's receive timeout
    from firing, so the read hung for the hour the block takes. A whole block may take
    timeout= plus its length at 16 KiB/s (5 s here): the read fails with EIO."""
    small_release(tmp_path)
    with httputil.trickle_server(tmp_path / "www") as base:
        with mount_image(base + REPO + "/app.stp", None, "--no-prime", "--warm-workers", "0",
                         "-o", "timeout=2,cache_size=0") as mnt:
            rc, err, took = timed_cat(os.path.join(mnt, "noise"), 90)
    assert rc is not None, "the read was still blocked after %.0f s" % took
    assert rc != 0 and "Input/output error" in err, (rc, err)
    assert took < 40, "the read failed only after %.1f s" % took

