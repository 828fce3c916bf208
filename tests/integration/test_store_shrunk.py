# SPDX-License-Identifier: MIT
"""The store's files belong to its owner, who may cut one short at any time, even while
a mount's fetcher reads it: the fetcher reads a block file (it never maps it, where a
file that shrinks is a SIGBUS), so a file cut short is a block fetched again from the
server, never a dead fetcher or a wrong byte."""

import errno
import os
import threading
import time

from conftest import mount_image
from test_published import (REPO, assert_same_tree, images, origin_of,  # noqa: F401
                            publish, releases)
from test_published_readers import source_files

CUT_FOR_S = 6


def read_uncached(path):
    """PATH's bytes read through the mount, its page cache dropped first (the kernel then
    asks the daemon, which with a budget of one block asks the fetcher); None for EIO."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        out = bytearray()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(out)
            out += chunk
    except OSError as e:
        assert e.errno == errno.EIO, "%s: %s" % (path, e)
        return None
    finally:
        os.close(fd)


def cut_short(files, stop):
    """Puts every store file's block back whole, then cuts the file to half of it, again
    and again until STOP: whenever the fetcher reads a file, it may be cut under it."""
    while not stop.is_set():
        for cut in (False, True):
            for path, block in files.items():
                try:
                    with open(path, "r+b") as f:
                        if cut:
                            f.truncate(len(block) // 2)
                        else:
                            f.write(block)
                except OSError:
                    pass
            time.sleep(0.0005)


def test_store_file_cut_short_while_mounted(releases, images, tmp_path):
    www, cache = tmp_path / "www", tmp_path / "cache"
    publish(images[:1], www)
    tree = releases[0]
    rels = list(source_files(tree))
    opts = "cache_dir=%s,cache_budget=1,warm_workers=0,nofill" % cache
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        with mount_image(url, None, "-o", opts) as mnt:
            assert_same_tree(tree, mnt)  # every block in the store
        files = {os.path.join(d, n): open(os.path.join(d, n), "rb").read()
                 for d, _, names in os.walk(cache / "blocks") for n in names
                 if d != str(cache / "blocks")}  # block files, not the key or ledger
        assert files and all(files.values()), files
        with mount_image(url, None, "-o", opts) as mnt:
            stop = threading.Event()
            cutter = threading.Thread(target=cut_short, args=(files, stop))
            cutter.start()
            reads = failed = 0
            try:
                end = time.monotonic() + CUT_FOR_S
                while time.monotonic() < end:
                    for rel in rels[::3]:
                        got = read_uncached(os.path.join(mnt, rel))
                        reads += 1
                        if got is None:
                            failed += 1
                            continue
                        assert got == (tree / rel).read_bytes(), rel
            finally:
                stop.set()
                cutter.join()
            # a block file cut short was fetched again: no read failed, the fetcher lives
            assert reads and not failed, (reads, failed)
            for rel in rels:
                assert read_uncached(os.path.join(mnt, rel)) == (tree / rel).read_bytes(), rel
