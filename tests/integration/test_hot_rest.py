# SPDX-License-Identifier: MIT
"""What the hot region leaves of its files goes first after it (issue 32, launch).

A launch strays outside its recorded ranges now and then (another thread's timing: the
JVM's libjvm.so did on one launch in two). The bytes it then reads should sit at the start
of the first cold block, where a read waits only for the decode up to them, not deep in a
block behind every other cold file. mkstipple therefore puts the rest of each partly hot
file first after the hot region, the smallest rest first, then the other files as before.

The layout is checked from the outside: the first cold block's stored frame is found by
zstd's own framing (storedblocks.py) and decoded by the zstd program, and its first bytes
are compared with the source files; a mount then reads every file back.
"""

import json
import os
import subprocess

import pytest

from conftest import STIPPLE, mount_image
import imageutil
import storedblocks
from test_warm import write_files
import treeutil


BS = 1 << 20  # 1 MiB blocks and more have no dictionary: the zstd program decodes them


def text(seed, size):
    return treeutil._data(seed, size, text=True)  # words: no zero bytes


# Path order puts a/ first and b/big before c/small; the rests' sizes say the reverse.
FILES = {"a/fill-%d" % i: text(i, 700_000) for i in range(3)}
FILES["b/big.dat"] = text(10, 1_500_000)
FILES["c/small.dat"] = text(11, 400_000)
FILES["hot/whole"] = text(12, 10_000)
HOT_LIST = ("hot/whole\n"
            "b/big.dat\t0-4096,598016-602112\n"
            "c/small.dat\t0-8192\n")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("hotrest") / "tree"
    write_files(root, FILES)
    return root


@pytest.fixture(scope="module")
def image(tree):
    hot = tree.parent / "hot.list"
    hot.write_text(HOT_LIST)
    return imageutil.build(tree, tree.parent / "rest.stp", "--level", "3", "--block-size",
                           "1M", "--hot-margin", "0", "--hot-list", hot)


def first_cold_block(image):
    """The decoded bytes of the first block after the hot region, by the zstd program."""
    info = json.loads(subprocess.run([STIPPLE, "info", "--json", image], check=True,
                                     capture_output=True, text=True).stdout)
    # hot blocks of the block size mean none: the hot region then fills whole blocks
    nhot = info["hot_blocks"] or -(-info["hot_size"] // info["block_size"])
    assert info["hot_size"] > 0 and nhot >= 1 and info["dictionary"]["size"] == 0
    _, frame = storedblocks.stored_blocks(STIPPLE, image)[nhot]
    assert frame[:4] == storedblocks.ZSTD_MAGIC, "the first cold block is not a zstd frame"
    return subprocess.run(["zstd", "-d", "-c", "-q"], input=frame, check=True,
                          capture_output=True).stdout


def test_rests_of_hot_files_open_the_cold_region(image):
    got = first_cold_block(image)
    small, big = FILES["c/small.dat"], FILES["b/big.dat"]
    # c/small.dat's rest (392 KiB) before b/big.dat's two pieces (1.4 MiB), then a/
    want = small[8192:] + big[4096:598016] + big[602112:]
    assert got[:len(small) - 8192] == small[8192:], "the smallest rest does not come first"
    # a stable-block cut may end the block early, zero-padded (the files hold no zeros)
    got = got.rstrip(b"\0")
    assert len(got) > len(small), "the block holds little past the first rest"
    assert got == want[:len(got)]


@pytest.mark.needs_root
def test_every_file_reads_back_through_a_mount(image):
    with mount_image(image) as mnt:
        for rel, content in sorted(FILES.items()):
            with open(os.path.join(mnt, rel), "rb") as f:
                assert f.read() == content, rel
        # a read in the middle of a rest, as a straying launch makes it
        with open(os.path.join(mnt, "b/big.dat"), "rb") as f:
            f.seek(900_000)
            assert f.read(4096) == FILES["b/big.dat"][900_000:904_096]


@pytest.mark.needs_root
def test_warming_decodes_the_block_after_the_hot_region(image):
    """Warming goes on, last, into the first cold block when a hot file's rest lies there:
    a launch that strays past its recorded ranges then finds that block decoded. A read
    further on, in a block of files no hot list names, still decodes its own."""
    from test_warm import raw_status, status
    with mount_image(image) as mnt:
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        before = raw_status(mnt)["cache_misses"]
        # c/small.dat's rest (392 KiB) opens that block: decoded by warming, which stops
        # there, since b/big.dat's rest, next, runs on into the block after (1.4 MiB)
        with open(os.path.join(mnt, "c/small.dat"), "rb") as f:
            f.seek(200_000)
            assert f.read(4096) == FILES["c/small.dat"][200_000:204_096]
        st = raw_status(mnt)
        assert st["cache_misses"] == before and st["cache_parked"] == 1, st
        # b/big.dat's rest up to 584 KB follows c/small.dat's in the first block after the
        # hot region: the read goes on with the parked decode
        with open(os.path.join(mnt, "b/big.dat"), "rb") as f:
            f.seek(100_000)
            assert f.read(4096) == FILES["b/big.dat"][100_000:104_096]
        st = raw_status(mnt)
        assert st["cache_misses"] == before, "the straying read decoded its block afresh"
        assert st["cache_parked"] == 0, "warming decoded a rest that runs on past its block"
        # a/fill-2 comes last in the stream, blocks further on: warming left them
        with open(os.path.join(mnt, "a/fill-2"), "rb") as f:
            f.seek(600_000)
            assert f.read(4096) == FILES["a/fill-2"][600_000:604_096]
        assert raw_status(mnt)["cache_misses"] == before + 1


# The block after the hot region holds the hot file's rest, then a cold file smaller than
# a block (a larger one would start the next block, stipple(5)'s stable cuts): warming
# decodes it only as far as the rest reaches. LIBC's machine code makes the block a
# filtered one (its bytes then reach a read through an unfiltered copy until the block is
# whole); TEXT's words an unfiltered one.
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def partial_files(kind):
    if kind == "code":
        with open(LIBC, "rb") as f:
            code = f.read()
        hot, cold = code[:300_000], code[300_000:900_000]
    else:
        hot, cold = text(21, 300_000), text(22, 600_000)
    return {"h/rest.bin": hot, "hot/whole": text(12, 10_000), "z/cold.bin": cold}


@pytest.fixture(scope="module", params=["text", "code"])
def partial(request, tmp_path_factory):
    files = partial_files(request.param)
    root = tmp_path_factory.mktemp("partial") / "tree"
    write_files(root, files)
    hot = root.parent / "hot.list"
    hot.write_text("hot/whole\nh/rest.bin\t0-8192\n")
    image = imageutil.build(root, root.parent / "partial.stp", "--level", "3",
                            "--block-size", "1M", "--hot-margin", "0", "--hot-list", hot)
    info = json.loads(subprocess.run([STIPPLE, "info", "--json", image], check=True,
                                     capture_output=True, text=True).stdout)
    nhot = info["hot_blocks"] or -(-info["hot_size"] // info["block_size"])
    filtered = imageutil.CraftedImage(image).block_filters()[nhot] != 0
    assert filtered == (request.param == "code"), "the block after the hot region's filter"
    return image, files, nhot


@pytest.mark.needs_root
def test_warming_decodes_the_rest_of_hot_files_and_no_further(partial):
    """Warming decodes the block after the hot region as far as h/rest.bin's rest (292 KiB
    of 1 MiB) and parks the decode there: a read inside the rest is served without a
    decode, one further on (z/cold.bin, in the same block) goes on with the parked decode
    and gets the source's bytes, and the block is then decoded whole, once."""
    from test_warm import raw_status, status, wait_for
    image, files, nhot = partial
    with mount_image(image) as mnt:
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        st = raw_status(mnt)
        assert st["cache_parked"] == 1, st
        # the hot blocks decoded, the one after them not whole
        assert st["blocks_decoded"] == nhot, st
        misses = st["cache_misses"]
        with open(os.path.join(mnt, "h/rest.bin"), "rb") as f:
            f.seek(200_000)
            assert f.read(16384) == files["h/rest.bin"][200_000:216_384]
        st = raw_status(mnt)
        assert (st["cache_misses"], st["blocks_decoded"], st["cache_parked"]) == \
            (misses, nhot, 1), "a read inside the decoded rest decoded again"
        # z/cold.bin starts 292 KiB into the block: 400,000 bytes on lies past the rest
        with open(os.path.join(mnt, "z/cold.bin"), "rb") as f:
            f.seek(400_000)
            assert f.read(16384) == files["z/cold.bin"][400_000:416_384]
        st = raw_status(mnt)
        assert st["cache_misses"] == misses and st["cache_parked"] == 0, st
        wait_for(lambda: raw_status(mnt)["blocks_decoded"] == nhot + 1, 30,
                 "the parked decode did not finish the block")
        for rel, content in sorted(files.items()):
            with open(os.path.join(mnt, rel), "rb") as f:
                assert f.read() == content, rel
        assert raw_status(mnt)["cache_misses"] == misses
