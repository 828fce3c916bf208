# SPDX-License-Identifier: MIT
"""The inodes the kernel knows are one table (issue 30, item 3): warming pushes pages
only into files the kernel holds now, and stops for a file the kernel has forgotten.
Before, warming kept a table of its own that a forget never cleared, and pushed the
pages of forgotten files into a kernel that refused each push ten times over 20 ms.

The test stalls warming with a budget of two blocks, makes the kernel learn of the last
files of the hot region (stat) and forget them again (drop_caches evicts the unused
inodes, and the kernel sends FORGET: `inodes_known` in the status falls to 0), then reads
the first files, which frees the blocks warming holds so that it warms the forgotten
files' blocks. No push may be refused (warm_store_failures).
"""
import os
import time

import pytest

from conftest import build_image, mount_image
from test_memory import raw_status
from test_warm import data, wait_for, write_files

needs_root = pytest.mark.needs_root("mounting tests need root")
FILE = 128 << 10  # two 64 KiB blocks a file
COUNT = 12
LATE = 4           # the files the kernel learns of, then forgets


def drop_inodes():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


@needs_root
def test_warming_skips_files_the_kernel_forgot(tmp_path):
    names = ["f%02d" % i for i in range(COUNT)]
    tree = os.fsdecode(write_files(tmp_path / "tree", {n: data(300 + i, FILE, text=False)
                                                       for i, n in enumerate(names)}))
    hot = tmp_path / "hot.list"
    hot.write_text("".join(n + "\n" for n in names))
    image = build_image(tree, tmp_path / "forget.stipple", "--level", "3",
                        "--block-size", "64K", "--hot-list", hot)
    with mount_image(image, None, "--cache-budget", "2", "--warm-workers", "1",
                     "--no-prime", "--no-fill") as mnt:
        wait_for(lambda: raw_status(mnt)["warm_full"] == 1, 20, "warming never stalls")
        late = names[-LATE:]
        for n in late:
            os.stat(os.path.join(mnt, n))
        assert raw_status(mnt)["inodes_known"] == LATE, raw_status(mnt)
        deadline = time.monotonic() + 20
        while raw_status(mnt)["inodes_known"] and time.monotonic() < deadline:
            drop_inodes()
            time.sleep(0.2)
        assert raw_status(mnt)["inodes_known"] == 0, "the kernel kept the files"
        for n in names[:-LATE]:
            with open(os.path.join(mnt, n), "rb") as f, open(os.path.join(tree, n), "rb") as g:
                assert f.read() == g.read(), n
        early_blocks = 2 * (COUNT - LATE)
        wait_for(lambda: raw_status(mnt)["warmed"] > early_blocks and
                 (raw_status(mnt)["warm_full"] or raw_status(mnt)["warm_done"]), 20,
                 "warming did not reach the forgotten files")
        st = raw_status(mnt)
    # pushes tried again are those racing a lookup's reply (pagestore.h): not counted here
    assert st["warm_store_failures"] == 0, st
