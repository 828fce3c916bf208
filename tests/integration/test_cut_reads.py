# SPDX-License-Identifier: MIT
"""Reads of a --cut-inside image on a real mount (issue 31): a cut is a block of its own,
padded with zeros to the block size, and the cache holds it for what it decodes to, not
for a whole block, so a small cache keeps every cut of the large files.

The tree is test_cut_inside's first release (an archive of stdlib sources and its zip),
with two more large files: a real ELF program (its cuts go through the BCJ filter) and a
file with a long run of zeros inside, whose cuts end in zstd's zero blocks while holding
file bytes. Every byte read is compared with the source tree; the decodes counted are
the daemon's (its status).
"""

import os

import pytest

from conftest import MKSTIPPLE, STIPPLE, mount_image, mount_status, run
import storedblocks
from test_cut_inside import ARGS, BIG, make_release, stdlib_sources
from test_store_shrunk import read_uncached

ZEROS = "lib/zeros"
PROGRAM = "lib/program"


@pytest.fixture(scope="module")
def cut_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("cutreads") / "tree"
    make_release(root, stdlib_sources())
    with open(root / ZEROS, "wb") as f:
        f.write(os.urandom(300 << 10) + bytes(700 << 10) + os.urandom(200 << 10))
    with open(os.path.realpath("/usr/bin/python3"), "rb") as f:
        (root / PROGRAM).write_bytes(f.read())
    return root


@pytest.fixture(scope="module")
def cut_image(cut_tree, tmp_path_factory):
    image = tmp_path_factory.mktemp("cutreads-img") / "cut.stp"
    r = run([MKSTIPPLE, "-q", *ARGS,
             "--cut-inside", str(cut_tree), str(image)])
    assert r.returncode == 0, r.stderr
    return image


@pytest.mark.needs_root
def test_a_small_cache_keeps_every_cut(cut_tree, cut_image):
    files = (*BIG, ZEROS, PROGRAM)
    held = storedblocks.file_blocks(STIPPLE, cut_image)
    cuts = {b for b, paths in held.items() if len(paths) == 1 and paths <= set(files)}
    per_file = {rel: sum(1 for b in cuts if held[b] == {rel}) for rel in files}
    assert all(n >= 4 for n in per_file.values()), per_file  # every file was cut
    # 24 blocks' buffers (about 26 MiB) hold all the cuts' bytes: they are far fewer
    assert sum(os.path.getsize(cut_tree / rel) for rel in files) < 16 << 20
    with mount_image(cut_image, None, "-o", "cache_budget=24", "--warm-workers", "0") as mnt:
        for rel in files:
            with open(os.path.join(mnt, rel), "rb") as f:
                assert f.read() == (cut_tree / rel).read_bytes(), rel
        st = mount_status(mnt)
        first = int(st["blocks_decoded"])
        assert len(cuts) <= first <= len(held), (first, len(cuts))
        # read in order, each file's next cut was decoded ahead of its reader
        assert int(st["blocks_ahead"]) >= len(files), st
        for rel in files:
            # the kernel's copy goes first: the daemon is asked again
            assert read_uncached(os.path.join(mnt, rel)) == (cut_tree / rel).read_bytes(), rel
        again = int(mount_status(mnt)["blocks_decoded"])
    # the old cache kept 24 cuts and decoded nearly every one again
    assert again == first, (first, again, len(cuts))
