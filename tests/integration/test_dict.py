# SPDX-License-Identifier: MIT
"""Trained dictionaries: below 512 KiB blocks mkstipple trains one, stores it once and keeps
it only when it makes the image smaller. Images with a dictionary round-trip through
extract and a mount, `stipple info` shows it, the image does not depend on --threads or
--memory, and a damaged dictionary is reported without wrong bytes."""

import os
import random
import re
import shutil
import subprocess

import pytest

from conftest import MKSTIPPLE, PYTHON_LIB, STIPPLE, build_image, extract_image, read_file, run
from imageutil import FAST
import treeutil

# the packed layout: the stable one trains no dictionary (test_stable_blocks.py)
SMALL = (*FAST, "--no-stable-blocks")
# Parts of the standard library with their bytecode and native modules: about 10 MB.
SUBTREES = ["email", "json", "asyncio", "unittest", "xml", "http", "encodings", "lib-dynload"]


assert_same_tree = treeutil.assert_same_tree


def info(image):
    """`stipple info --blocks IMAGE`: (fields by label, [(block, codec)])."""
    r = run([STIPPLE, "info", "--blocks", image])
    assert r.returncode == 0, r.stderr
    fields, blocks = {}, []
    for line in r.stdout.splitlines():
        m = re.match(r"([a-z][a-z -]*):\s+(.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2)
        m = re.match(r"(\d+)\s+\d+\s+\d+\s+\d+\s+(\S+)\s+\S+$", line)
        if m:
            blocks.append((int(m.group(1)), m.group(2)))
    return fields, blocks


def dictionary(image):
    """(offset, size) of IMAGE's dictionary from `stipple info`; size 0 when it has none."""
    fields, _ = info(image)
    m = re.match(r"offset (\d+), (\d+) bytes", fields["dictionary"])
    assert m, "info shows no dictionary line: %r" % fields
    return int(m.group(1)), int(m.group(2))


@pytest.fixture(scope="module")
def lib_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("dict") / "lib"
    root.mkdir()
    for name in SUBTREES:
        shutil.copytree(os.path.join(PYTHON_LIB, name), root / name, symlinks=True)
    return root


@pytest.fixture(scope="module")
def dict_image(lib_tree, tmp_path_factory):
    return build_image(lib_tree, tmp_path_factory.mktemp("dict-img") / "lib.stipple", *SMALL)


def test_small_blocks_get_a_dictionary_that_info_shows(dict_image):
    fields, blocks = info(dict_image)
    offset, size = dictionary(dict_image)
    assert 1024 < size <= 112 << 10, "dictionary of %d bytes" % size
    assert "dictionary" in fields["features"].split(), fields["features"]
    m = re.search(r"page table at offset (\d+), (\d+) bytes", fields["metadata"])
    pages_stored = int(re.match(r"\d+ pages, (\d+) bytes stored", fields["metadata"]).group(1))
    # the pages lie before the table; mkstipple puts the dictionary before both
    assert offset + size <= int(m.group(1)) - pages_stored, "dictionary overlaps the metadata"
    codecs = [codec for _, codec in blocks]
    assert "zstd-dict" in codecs, "no block uses the dictionary: %s" % sorted(set(codecs))


def test_dictionary_image_extracts_equal_to_source(lib_tree, dict_image, tmp_path):
    out = extract_image(dict_image, tmp_path / "out")
    assert_same_tree(lib_tree, out)


def test_dictionary_image_reads_through_a_mount(lib_tree, dict_image, mounted):
    with mounted(dict_image) as mnt:
        assert_same_tree(lib_tree, mnt)


def test_dictionary_image_checks_sound(dict_image):
    r = run([STIPPLE, "check", dict_image])
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_round_trip_at_level_19_with_bcj(lib_tree, tmp_path):
    """The default level: native modules are stored with BCJ and the dictionary together,
    and everything reads back."""
    image = build_image(lib_tree, tmp_path / "l19.stipple", "--block-size", "64K",
                        "--no-stable-blocks")
    r = run([STIPPLE, "info", "--blocks", image], check=True)
    assert re.search(r"^\d+\s+\d+\s+\d+\s+\d+\s+zstd-dict\s+x86$", r.stdout, re.M), \
        "no block uses BCJ and the dictionary together"
    assert dictionary(image)[1] > 0
    assert_same_tree(lib_tree, extract_image(image, tmp_path / "out"))


@pytest.mark.parametrize("block", ["512K", "1M"])
def test_no_dictionary_from_512k_blocks(lib_tree, tmp_path, block):
    """Where a dictionary saves less than its own size (measured): none is trained."""
    image = build_image(lib_tree, tmp_path / "big.stipple", "--level", "3", "--block-size", block)
    fields, blocks = info(image)
    assert dictionary(image)[1] == 0
    assert "dictionary" not in fields["features"].split()
    assert "zstd-dict" not in [codec for _, codec in blocks]


def test_dictionary_not_kept_when_it_cannot_pay(tmp_path):
    """Noise does not compress, with or without a dictionary: the image holds none, and is
    not larger than its data plus metadata."""
    src = tmp_path / "noise"
    src.mkdir()
    rnd = random.Random(7)
    for i in range(24):
        (src / ("n%02d.bin" % i)).write_bytes(rnd.randbytes(100_000 + 1000 * i))
    image = build_image(src, tmp_path / "noise.stipple", *SMALL)
    fields, blocks = info(image)
    assert dictionary(image)[1] == 0
    assert "dictionary" not in fields["features"].split()
    assert all(codec == "raw" for _, codec in blocks), blocks
    assert_same_tree(src, extract_image(image, tmp_path / "out"))


def test_same_image_whatever_threads_and_memory(lib_tree, dict_image, tmp_path):
    want = read_file(dict_image)
    for name, extra in [("t1", ("--threads", "1")), ("t2", ("--threads", "2")),
                        ("one-slot", ("--threads", "2", "--memory", "2M"))]:
        image = build_image(lib_tree, tmp_path / (name + ".stipple"), *SMALL, *extra)
        assert read_file(image) == want, "%s differs from the default build" % name


def test_memory_below_what_the_dictionary_needs_is_refused(lib_tree, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = run([MKSTIPPLE, "--quiet", *SMALL, "--memory", "1500K", lib_tree, out / "x.stipple"])
    assert r.returncode == 1, "exit %d:\n%s" % (r.returncode, r.stderr)
    assert "--memory" in r.stderr, r.stderr
    assert os.listdir(out) == []


@pytest.fixture
def damaged(dict_image, tmp_path):
    """A copy of the dictionary image with one byte of the dictionary flipped."""
    offset, size = dictionary(dict_image)
    bad = tmp_path / "bad-dict.stipple"
    shutil.copyfile(dict_image, bad)
    treeutil.flip_byte(bad, offset + size // 2)
    return bad


def test_check_reports_a_damaged_dictionary(damaged):
    r = run([STIPPLE, "check", damaged])
    assert r.returncode == 1, "check exited %d:\n%s" % (r.returncode, r.stderr)
    assert os.fspath(damaged) in r.stderr and "dictionary" in r.stderr, r.stderr


@pytest.mark.parametrize("rel", ["json/__init__.py", "email/__pycache__/message.cpython-311.pyc"])
def test_cat_on_a_damaged_dictionary_writes_no_wrong_bytes(lib_tree, damaged, rel):
    r = subprocess.run([STIPPLE, "cat", damaged, "/" + rel], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
    assert r.returncode == 1, "cat exited %d: %s" % (r.returncode, r.stderr)
    err = r.stderr.decode(errors="replace")
    assert os.fspath(damaged) in err and "dictionary" in err, err
    assert read_file(lib_tree / rel).startswith(r.stdout), "cat wrote bytes not the file's"
