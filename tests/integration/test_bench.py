# SPDX-License-Identifier: MIT
"""stipple bench: the read sequence a seed gives, the counts and the JSON report, the bytes
it reads (checked against the source tree with XXH3 from libxxhash), damaged images and
bad arguments."""

import ctypes
import json
import math
import os
import re
import shutil
import stat

import pytest

from conftest import STIPPLE, build_image, run
from imageutil import FAST
import treeutil

JSON_FIELDS = {
    "image", "mode", "block_size", "blocks", "files", "file_bytes", "read_size", "threads",
    "seed", "cache_budget", "warm", "reads", "bytes", "wall_seconds", "mib_per_second",
    "reads_per_second", "latency_ns", "cache_hits", "cache_misses", "hit_ratio",
    "blocks_decoded", "decoded_bytes", "decode_seconds", "decode_mib_per_second", "checksum",
}
LATENCY_FIELDS = {"p50", "p90", "p99", "p99_9", "max", "mean"}


def bench(*args):
    return run([STIPPLE, "bench", *args])


def bench_json(*args):
    r = bench("--json", *args)
    assert r.returncode == 0, "bench exited %d:\n%s" % (r.returncode, r.stderr)
    return json.loads(r.stdout)


def unescape(text):
    """Undoes bench's path escaping (backslash as \\\\, other bytes as \\xHH)."""
    out, i, raw = bytearray(), 0, text.encode()
    while i < len(raw):
        if raw[i:i + 2] == b"\\\\":
            out += b"\\"
            i += 2
        elif raw[i:i + 2] == b"\\x":
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return bytes(out)


def print_reads(*args):
    """Runs bench --print-reads; returns the reads as (thread, index, offset, length,
    checksum, path bytes) tuples."""
    r = bench("--print-reads", *args)
    assert r.returncode == 0, "bench exited %d:\n%s" % (r.returncode, r.stderr)
    reads = []
    for line in r.stdout.splitlines():
        if not line.startswith("read "):
            continue
        _, thread, index, off, length, checksum, path = line.split(" ", 6)
        reads.append((int(thread), int(index), int(off), int(length), checksum, unescape(path)))
    return reads


def text_fields(stdout):
    return dict(re.findall(r"^([a-z ]+):\s+(.*)$", stdout, re.M))


_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3(data):
    return "%016x" % _xxh.XXH3_64bits(data, len(data))


def regular_files(root):
    """{path relative to ROOT as bytes, with a leading slash: size} of every name of a
    regular file, and {path: inode key} (hard links share a key)."""
    files, keys = {}, {}
    broot = os.fsencode(root)
    for dirpath, _, names in os.walk(broot):
        for name in names:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                rel = b"/" + os.path.relpath(full, broot)
                files[rel] = st.st_size
                keys[rel] = (st.st_dev, st.st_ino)
    return files, keys


def inode_sizes(files, keys):
    """{inode key: size}: each file once, as bench counts them."""
    return {keys[p]: s for p, s in files.items()}


# the read sequence


def test_fixed_seed_gives_the_same_reads(gen_image):
    first = print_reads("--reads", "400", "--seed", "7", gen_image)
    assert len(first) == 400
    assert print_reads("--reads", "400", "--seed", "7", gen_image) == first
    other = print_reads("--reads", "400", "--seed", "8", gen_image)
    assert len(other) == 400 and other != first, "another seed gave the same reads"
    # the default seed is fixed too
    assert print_reads("--reads", "50", gen_image) == print_reads("--reads", "50", gen_image)


def test_fixed_seed_gives_the_same_checksum(gen_image):
    a = bench_json("--reads", "2000", "--seed", "3", "--threads", "2", gen_image)
    b = bench_json("--reads", "2000", "--seed", "3", "--threads", "2", gen_image)
    c = bench_json("--reads", "2000", "--seed", "4", "--threads", "2", gen_image)
    assert a["checksum"] == b["checksum"] and a["bytes"] == b["bytes"]
    assert c["checksum"] != a["checksum"]


def test_reads_do_not_depend_on_the_block_size(gen_tree, gen_image, tmp_path):
    other = build_image(gen_tree, tmp_path / "gen-1m.stipple", "--level", "1",
                        "--block-size", "1M")
    args = ("--reads", "300", "--seed", "11", "--threads", "3")
    assert print_reads(*args, other) == print_reads(*args, gen_image)


@pytest.mark.parametrize("block_size, budget", [("64K", 1337), ("1M", 226), ("32M", 8),
                                               ("64M", 8)])
def test_default_budget_follows_the_block_size(gen_tree, tmp_path, block_size, budget):
    """Eight blocks, or as many buffers as fit in 256 MiB when they are smaller (each
    buffer a block and zstd's margin of 128 KiB and more, in whole pages)."""
    image = build_image(gen_tree, tmp_path / "b.stipple", "--level", "1",
                        "--block-size", block_size)
    assert bench_json("--reads", "50", image)["cache_budget"] == budget
    assert bench_json("--reads", "50", "--cache-budget", "3", image)["cache_budget"] == 3


def test_random_reads_are_the_source_bytes(gen_tree, gen_image):
    files, _ = regular_files(gen_tree)
    reads = print_reads("--reads", "1500", "--read-size", "5000", "--threads", "2", gen_image)
    assert len(reads) == 1500
    hit = set()
    for thread, index, off, length, checksum, path in reads:
        assert path in files, "read of %r, not a regular file of the source" % path
        size = files[path]
        assert length == min(5000, size) and off + length <= size, (path, off, length, size)
        with open(os.path.join(os.fsencode(gen_tree), path.lstrip(b"/")), "rb") as f:
            f.seek(off)
            data = f.read(length)
        assert xxh3(data) == checksum, "%r at %d: bench read other bytes" % (path, off)
        hit.add(path)
    # offsets are uniform over file bytes: the large file holds most of them
    large = sum(1 for r in reads if r[5] == b"/files/large")
    share = files[b"/files/large"] / treeutil.tree_bytes(gen_tree)
    assert abs(large / len(reads) - share) < 0.1, (large, share)


def test_threads_split_the_reads(gen_image):
    reads = print_reads("--reads", "1001", "--threads", "4", gen_image)
    per_thread = [sum(1 for r in reads if r[0] == t) for t in range(4)]
    assert per_thread == [251, 250, 250, 250]
    for t in range(4):
        assert [r[1] for r in reads if r[0] == t] == list(range(per_thread[t]))


# counts and reports


@pytest.mark.parametrize("reads,size,threads", [(1, "4096", 1), (777, "4K", 3), (5000, "100", 2)])
def test_text_counts_match_the_request(gen_image, reads, size, threads):
    r = bench("--reads", str(reads), "--read-size", size, "--threads", str(threads), gen_image)
    assert r.returncode == 0, r.stderr
    f = text_fields(r.stdout)
    assert int(f["reads"]) == reads
    read_size = 4096 if size == "4K" else int(size)
    assert 0 < int(f["bytes"].split()[0]) <= reads * read_size
    assert "%d-byte reads, %d thread" % (read_size, threads) in f["run"]
    for label in ("wall time", "throughput", "latency", "cache", "decoded", "decode", "checksum"):
        assert label in f, "no %s line:\n%s" % (label, r.stdout)
    assert re.match(r"p50 .*, p90 .*, p99 .*, p99\.9 .*, max ", f["latency"]), f["latency"]
    assert re.match(r"[\d.]+ MiB/s, \d+ reads/s", f["throughput"]), f["throughput"]


def test_json_holds_the_documented_fields(gen_tree, gen_image):
    files = inode_sizes(*regular_files(gen_tree))
    j = bench_json("--reads", "3000", "--read-size", "4096", "--seed", "5",
                   "--cache-budget", "4", gen_image)
    assert set(j) == JSON_FIELDS
    assert set(j["latency_ns"]) == LATENCY_FIELDS
    assert j["image"] == os.fspath(gen_image)
    assert (j["mode"], j["read_size"], j["threads"], j["seed"], j["cache_budget"], j["warm"]) == \
        ("random", 4096, 1, 5, 4, False)
    assert j["block_size"] == 65536 and j["blocks"] >= 2
    assert j["files"] == len(files)
    assert j["file_bytes"] == sum(files.values()) == treeutil.tree_bytes(gen_tree)
    assert j["reads"] == 3000
    assert 0 < j["bytes"] <= 3000 * 4096
    assert j["wall_seconds"] > 0
    assert j["reads_per_second"] == pytest.approx(j["reads"] / j["wall_seconds"], rel=1e-3)
    assert j["mib_per_second"] == pytest.approx(j["bytes"] / 2**20 / j["wall_seconds"], rel=1e-3)
    lat = j["latency_ns"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
    assert lat["mean"] <= lat["max"]
    assert lat["max"] <= j["wall_seconds"] * 1e9
    lookups = j["cache_hits"] + j["cache_misses"]
    assert lookups > 0 and j["hit_ratio"] == pytest.approx(j["cache_hits"] / lookups, abs=1e-5)
    assert j["blocks_decoded"] == j["cache_misses"] > 0
    assert 0 < j["decoded_bytes"] <= j["blocks_decoded"] * 65536
    assert 0 < j["decode_seconds"] <= j["wall_seconds"]
    assert j["decode_mib_per_second"] == pytest.approx(
        j["decoded_bytes"] / 2**20 / j["decode_seconds"], rel=1e-3)
    assert re.fullmatch(r"[0-9a-f]{16}", j["checksum"])


def test_sequential_reads_every_byte_once(gen_tree, gen_image):
    names, keys = regular_files(gen_tree)
    files = inode_sizes(names, keys)
    chunk = 65536
    j = bench_json("--sequential", "--read-size", "64K", "--threads", "2", gen_image)
    assert j["mode"] == "sequential"
    assert j["bytes"] == sum(files.values())
    assert j["reads"] == sum(math.ceil(s / chunk) for s in files.values())
    reads = print_reads("--sequential", "--read-size", "64K", gen_image)
    got = {}
    for _, _, off, length, checksum, path in reads:
        got.setdefault(path, []).append((off, length, checksum))
    # each file once, under one of its names
    assert sorted(keys[p] for p in got) == sorted(k for k, s in files.items() if s)
    for path, chunks in got.items():
        with open(os.path.join(os.fsencode(gen_tree), path.lstrip(b"/")), "rb") as f:
            data = f.read()
        assert [(o, n) for o, n, _ in chunks] == \
            [(o, min(chunk, len(data) - o)) for o in range(0, len(data), chunk)], path
        for o, n, checksum in chunks:
            assert xxh3(data[o:o + n]) == checksum, "%r at %d" % (path, o)


def test_warm_cache_covering_the_image_decodes_nothing(gen_image):
    j = bench_json("--warm", "--cache-budget", "100000", "--reads", "2000", gen_image)
    assert j["warm"] is True
    assert j["cache_misses"] == 0 and j["blocks_decoded"] == 0 and j["decoded_bytes"] == 0
    assert j["hit_ratio"] == 1.0 and j["decode_seconds"] == 0


def test_json_escapes_the_image_path(gen_image, tmp_path):
    name = b'we"ird\\ name\n\ttab-\xc3\xa9-\xe9.stipple'
    odd = os.path.join(os.fsencode(tmp_path), name)
    shutil.copyfile(gen_image, odd)
    j = bench_json("--reads", "10", odd)
    assert j["image"] == os.path.join(os.fspath(tmp_path), 'we"ird\\ name\n\ttab-\u00e9-\ufffd.stipple')


# damaged images and bad arguments


def blocks_of(image):
    r = run([STIPPLE, "info", "--blocks", image])
    assert r.returncode == 0, r.stderr
    return [tuple(int(v) for v in line.split()[:3]) for line in r.stdout.splitlines()
            if re.match(r"\d+\s+\d+\s+\d+\s+\d+\s", line)]


@pytest.fixture
def damaged(gen_image, tmp_path):
    """A copy of the image with a byte flipped in its middle block; (path, block number)."""
    blocks = blocks_of(gen_image)
    number, offset, stored = blocks[len(blocks) // 2]
    bad = tmp_path / "damaged.stipple"
    shutil.copyfile(gen_image, bad)
    treeutil.flip_byte(bad, offset + stored // 2)
    return bad, number


@pytest.mark.parametrize("args", [["--sequential"], ["--sequential", "--threads", "3"],
                                  ["--sequential", "--json"], ["--reads", "50000"]])
def test_damaged_block_is_reported(damaged, args):
    bad, number = damaged
    r = bench(*args, bad)
    assert r.returncode == 1, "exit %d:\n%s" % (r.returncode, r.stderr)
    assert os.fspath(bad) in r.stderr and "damaged" in r.stderr, r.stderr
    assert re.search(r"\bblock %d\b" % number, r.stderr), r.stderr
    assert re.search(r"cannot read \d+ bytes at offset \d+ \(data blocks? ", r.stderr), r.stderr
    assert r.stdout == "", "a report despite the damage:\n" + r.stdout


def test_damaged_block_found_while_warming(damaged):
    bad, number = damaged
    r = bench("--warm", "--cache-budget", "100000", bad)
    assert r.returncode == 1, r.stderr
    assert "warming block %d: damaged image" % number in r.stderr, r.stderr


def test_damaged_superblock(gen_image, tmp_path):
    bad = tmp_path / "bad-sb.stipple"
    shutil.copyfile(gen_image, bad)
    with open(bad, "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xff")
    r = bench(bad)
    assert r.returncode == 1 and os.fspath(bad) in r.stderr and "damaged" in r.stderr, r.stderr


def test_help():
    r = bench("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: stipple bench"), r.stdout
    for opt in ("--reads", "--read-size", "--threads", "--seed", "--cache-budget", "--json",
                "--sequential", "--warm", "--print-reads"):
        assert opt in r.stdout, opt


@pytest.mark.parametrize("args,message", [
    (["--reads", "0", "IMG"], "--reads '0'"),
    (["--read-size", "0", "IMG"], "--read-size '0'"),
    (["--reads", "many", "IMG"], "--reads 'many'"),
    (["--threads", "0", "IMG"], "--threads '0'"),
    (["--cache-budget", "0", "IMG"], "--cache-budget '0'"),
    (["--read-size", "2G", "IMG"], "--read-size '2G'"),
    ([], "missing operand"),
    (["IMG", "IMG"], "too many operands"),
    (["--bogus", "IMG"], "--bogus"),
    (["--json", "--print-reads", "IMG"], "do not go together"),
])
def test_bad_arguments_exit_2(gen_image, args, message):
    r = bench(*[os.fspath(gen_image) if a == "IMG" else a for a in args])
    assert r.returncode == 2, "exit %d:\n%s" % (r.returncode, r.stderr)
    assert r.stderr.startswith("stipple bench: ") and message in r.stderr, r.stderr
    assert r.stdout == ""


def test_missing_image(tmp_path):
    missing = tmp_path / "nope.stipple"
    r = bench(missing)
    assert r.returncode == 1, r.stderr
    assert os.fspath(missing) in r.stderr and "No such file" in r.stderr, r.stderr


def test_image_without_file_bytes(tmp_path, stipple):
    tree = tmp_path / "tree"
    (tree / "dir").mkdir(parents=True)
    (tree / "empty").write_bytes(b"")
    image = build_image(tree, tmp_path / "empty.stipple", *FAST)
    r = bench(image)
    assert r.returncode == 1 and "no file bytes" in r.stderr, r.stderr
