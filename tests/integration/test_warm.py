# SPDX-License-Identifier: MIT
"""Hot lists, recording, warming and `stipple status` (issue 5).

Recording: `stipple mount --record FILE` lists the files a workload read, in the order of
their first read, with the page-aligned ranges read; the list builds an image whose hot
region is exactly those ranges as mkstipple lays them out (clamped to the file, widened
by its margin if it has one, each file from a page of the stream, runs of zeros as
holes), and which reads back byte for byte. Hot lists written by
hand: plain paths, missing paths, malformed ranges, escapes. Warming: progress and
`--wait`, reads racing the warmers, blocks let go once read, pages pushed into the page
cache, memory within (workers + cache budget) blocks. The daemon writes the hot list as
it exits, a moment after umount returns: every recording test waits for the daemon's pid
(from `stipple status`) to go before it reads the list.
"""

import contextlib
import os
import random
import re
import subprocess
import threading
import time

import pytest

from conftest import (IS_ROOT, MKSTIPPLE, MOUNT_STIPPLE, PYTHON, PYTHON_LIB, STIPPLE,
                      is_mounted, mount_image, run, unmount)
import imageutil
from imageutil import HOLE_MIN, HOT_PAGE, RANGE_MARGIN
import treeutil
from pagecache import drops, held, read_pushed, unless_dropped



PAGE = HOT_PAGE
BS = 64 << 10               # block size of the small images: a hot region of many blocks
# Packed layout: these tests lay the hot region out byte for byte (hot_size_of_warm); a
# stable image pads it to its block, which test_stable_blocks covers.
FAST = (*imageutil.FAST, "--no-stable-blocks")
STATUS_XATTR = "user.stipple.status"


# ---- trees ------------------------------------------------------------------------------

def data(seed, size, text=True):
    """Unique deterministic bytes without a zero page (so no holes): text that zstd
    shrinks, or noise that it stores as it is."""
    rnd = random.Random(seed)
    if not text:
        return rnd.randbytes(size)
    words = [b"stipple", b"warm", b"block", b"hot", b"list", b"record", b"\n", b"%d" % seed]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words) + b" "
    return bytes(out[:size])


def write_files(root, files):
    """FILES: {relative path (str or bytes): bytes}. Returns ROOT."""
    root = os.fsencode(root)
    for rel, content in files.items():
        path = os.path.join(root, os.fsencode(rel))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    return os.fsdecode(root)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


# ---- hot lists --------------------------------------------------------------------------

def escape(path):
    """A path (bytes) as a hot list line writes it."""
    return path.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")


def unescape(text):
    out, i = bytearray(), 0
    while i < len(text):
        c = text[i:i + 1]
        if c == b"\\" and i + 1 < len(text):
            n = text[i + 1:i + 2]
            out += {b"t": b"\t", b"n": b"\n"}.get(n, n)
            i += 2
        else:
            out += c
            i += 1
    return bytes(out)


def parse_hot_list(raw):
    """[(path bytes, [(start, end)] or None)] from hot list text (bytes), as mkstipple
    reads it; asserts the recorder's own format (a newline after every line). The names
    only looked up (lines ending in a TAB and "lookup", test_lookups.py) are left out."""
    assert raw == b"" or raw.endswith(b"\n"), raw[-100:]
    entries = []
    for line in raw.split(b"\n")[:-1]:
        path, tab, ranges = line.partition(b"\t")
        if ranges == b"lookup":
            continue
        spans = None
        if tab:
            spans = []
            for part in ranges.split(b","):
                m = re.fullmatch(rb"(\d+)-(\d+)", part)
                assert m, "malformed range %r in %r" % (part, line)
                spans.append((int(m.group(1)), int(m.group(2))))
        entries.append((unescape(path), spans))
    return entries


def merge(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def hot_spans(spans, size):
    """What mkstipple makes of a file's ranges (builder/order.c, parse_ranges): clamped to
    SIZE, widened by RANGE_MARGIN if there is one (the start then down to a page),
    merged; None (the whole
    file) when they cover the file; [] (the file is skipped) when every range lies past
    its end."""
    if spans is None:
        return None
    out = []
    for a, b in spans:
        if a < size and b > a:
            b = min(b, size)
            if RANGE_MARGIN:
                a = (a - RANGE_MARGIN) // PAGE * PAGE if a > RANGE_MARGIN else 0
                b = b + RANGE_MARGIN if size - b > RANGE_MARGIN else size
            out.append((a, b))
    out = merge(out)
    if out == [(0, size)]:
        return None
    return out


def laid_out(parts):
    """The hot region's size for hot files that add PARTS stream bytes each, in order:
    each starts on a page of the stream (builder/pack.c, pack_all)."""
    total = 0
    for n in parts:
        total = -(-total // PAGE) * PAGE + n
    return total


def stored(content, start, end):
    """Stream bytes mkstipple spends on CONTENT[start:end]: pages counted from START, a
    run of zero pages of HOLE_MIN or more is a hole (builder/pack.c, read_span)."""
    total = pending = 0
    for off in range(start, end, PAGE):
        page = content[off:min(off + PAGE, end)]
        if not page.strip(b"\0"):
            pending += len(page)
            continue
        if pending < HOLE_MIN:
            total += pending
        pending = 0
        total += len(page)
    return total + (pending if pending < HOLE_MIN else 0)


def widened(spans, size):
    """A line's ranges as mkstipple widens them (clamped to SIZE, widened by RANGE_MARGIN,
    the start then down to a page), in the line's order; a line without ranges is the
    whole file."""
    if spans is None:
        return [(0, size)]
    out = []
    for a, b in spans:
        if a < size and b > a:
            b = min(b, size)
            a = (a - RANGE_MARGIN) // PAGE * PAGE if a > RANGE_MARGIN else 0
            b = b + RANGE_MARGIN if size - b > RANGE_MARGIN else size
            out.append((a, b))
    return out


def hot_pieces(root, entries):
    """The hot region's pieces (path, start, end), in stream order, that a list of
    (path, spans) gives: every range takes the next rank, in list order; a byte that
    several ranges of a file cover goes with the earliest; pieces are laid out by rank,
    then start."""
    ranked, sizes, rank = {}, {}, 0
    for path, spans in entries:
        size = sizes.setdefault(path, os.path.getsize(os.path.join(os.fsencode(root), path)))
        for a, b in widened(spans, size):
            ranked.setdefault(path, []).append((a, b, rank))
            rank += 1
    pieces = []
    for path, rs in ranked.items():
        if sizes[path] == 0:
            pieces.append((min(r for _, _, r in rs), path, 0, 0))
            continue
        cuts = sorted({e for a, b, _ in rs for e in (a, b)})
        for a, b in zip(cuts, cuts[1:]):
            cover = [r for x, y, r in rs if x <= a and b <= y]
            if not cover:
                continue
            r = min(cover)
            if pieces and pieces[-1][1] == path and pieces[-1][3] == a and pieces[-1][0] == r:
                pieces[-1] = (r, path, pieces[-1][2], b)
            else:
                pieces.append((r, path, a, b))
    pieces.sort(key=lambda p: (p[0], p[2]))
    return [(path, a, b) for _, path, a, b in pieces]


def expected_hot_size(root, entries):
    """The hot region a list of (path, spans) gives (no hard links among the paths): each
    piece stored in turn, starting on a page of the stream unless it goes on from the
    piece before; a file that is one whole piece with the contents of an earlier one adds
    nothing (a file packed in parts is never shared)."""
    pieces = hot_pieces(root, entries)
    count = {}
    for path, _, _ in pieces:
        count[path] = count.get(path, 0) + 1
    total, prev, contents = 0, None, set()
    for path, a, b in pieces:
        content = read_bytes(os.path.join(os.fsencode(root), path))
        whole = count[path] == 1 and (a, b) == (0, len(content))
        if whole and content in contents:
            continue
        if prev != (path, a):  # a piece that does not go on from the one before
            total = -(-total // PAGE) * PAGE
        total += stored(content, a, b)
        if whole:
            contents.add(content)
        prev = (path, b)
    return total


def info_field(image, label):
    r = run([STIPPLE, "info", image], check=True)
    m = re.search(r"^%s:\s+(\d+)" % re.escape(label), r.stdout, re.M)
    assert m, "no %r in stipple info:\n%s" % (label, r.stdout)
    return int(m.group(1))


def hot_size(image):
    return info_field(image, "hot region")


def build(tree, image, *args):
    """mkstipple ARGS TREE IMAGE; returns its stderr (warnings, decoded without newline
    translation) after asserting exit 0."""
    r = imageutil.mkstipple(tree, image, *args, timeout=600)
    assert r.returncode == 0, "mkstipple exited %d:\n%s" % (r.returncode, r.stderr)
    return r.stderr


def write_list(path, lines):
    """Writes a hot list of LINES (bytes, without newlines)."""
    with open(path, "wb") as f:
        f.write(b"".join(line + b"\n" for line in lines))
    return os.fspath(path)


def stream_offsets(image, tree, names, probe=48):
    """Offset in IMAGE of each file's first PROBE bytes: noise is stored raw, so the
    order of the offsets is the order of the files in the data stream."""
    blob = read_bytes(image)
    out = {}
    for name in names:
        head = read_bytes(os.path.join(os.fsencode(tree), os.fsencode(name)))[:probe]
        pos = blob.find(head)
        assert pos > 0 and blob.find(head, pos + 1) < 0, name
        out[name] = pos
    return out


def cat_bytes(image, path):
    r = subprocess.run([STIPPLE, "cat", image, path], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def assert_extract_equals(image, tree, dest):
    r = run([STIPPLE, "extract", image, dest])
    assert r.returncode == 0, r.stderr
    diffs = treeutil.compare_trees(tree, dest, **({} if IS_ROOT else dict(
        ignore={"uid", "gid"}, ignore_xattrs=("trusted.", "security."))))
    assert not diffs, "\n".join(diffs[:50])


# ---- mounts and status ------------------------------------------------------------------

def status(mnt, *args, timeout=120):
    return run([STIPPLE, "status", *args, mnt], timeout=timeout)


def status_text(mnt):
    r = status(mnt)
    assert r.returncode == 0, "stipple status %s exited %d:\n%s" % (mnt, r.returncode, r.stderr)
    return r.stdout


def line_of(text, label):
    m = re.search(r"^%s:\s+(.*)$" % label, text, re.M)
    assert m, "no %s line in:\n%s" % (label, text)
    return m.group(1)


def raw_status(mnt):
    """The daemon's own key=value answer (status.h), numbers as ints."""
    out = {}
    for line in os.getxattr(mnt, STATUS_XATTR).decode().splitlines():
        k, _, v = line.partition("=")
        out[k] = int(v) if v.isdigit() else v
    return out


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def daemon_gone(pid):
    """The daemon has exited: its /proc entry is gone, or it is a zombie waiting for
    init (here a slow reaper) to collect it. Either way its hot list is written."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def vm_kb(pid):
    """VmHWM and VmRSS of PID, in KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0])
    return out


@contextlib.contextmanager
def live_mount(image, *args):
    """`stipple mount ARGS IMAGE DIR`: yields (DIR, daemon pid); after the unmount, waits
    for the daemon to exit, so that the hot list it writes on its way out is complete."""
    with mount_image(image, None, *args) as mnt:
        text = status_text(mnt)
        pid = int(re.search(r"^daemon:\s+pid (\d+),", text, re.M).group(1))
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            assert b"stipple" in f.read(), "pid %d from stipple status is not the daemon" % pid
        yield mnt, pid
    wait_for(lambda: daemon_gone(pid), 20, "the daemon %d outlived the unmount" % pid)


def read_whole(mnt, rel):
    return read_bytes(os.path.join(os.fsencode(mnt), os.fsencode(rel)))


def pread_random(mnt, rel, spans):
    """Reads SPANS [(offset, length)] of REL with readahead off, so that the daemon sees
    exactly the pages read."""
    fd = os.open(os.path.join(os.fsencode(mnt), os.fsencode(rel)), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return [os.pread(fd, n, off) for off, n in spans]
    finally:
        os.close(fd)


def pages(off, n):
    return (off // PAGE * PAGE, -(-(off + n) // PAGE) * PAGE)


# ---- recording --------------------------------------------------------------------------

REC_FILES = {
    b"app/main.py": data(1, 10_000),
    b"app/util.py": data(2, 33_333),
    b"lib/libbig.so": data(3, 1_200_000),
    b"lib/libother.so": data(4, 300_000, text=False),
    b"names/tab\tname": data(5, 5_000),
    b"names/new\nline": data(6, 7_000),
    b"names/back\\slash": data(7, 6_000),
    b"data/blob": data(8, 700_001, text=False),
    b"data/never-1": data(9, 20_000),
    b"data/never-2": data(10, 20_000),
    b"data/stat-only": data(11, 9_000),
}

# libbig.so is read only in part: two ranges at first, a third (to its end) later.
BIG_FIRST = [(100_000, 5_000), (650_000, 70_000)]
BIG_LATER = [(1_150_000, 50_000)]


@pytest.fixture(scope="module")
def rec_tree(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("rec") / "tree", REC_FILES)


@pytest.fixture(scope="module")
def recorded(rec_tree, tmp_path_factory):
    """Mounts the tree's image with --record, runs a small workload, and returns (list
    path, what the list must hold). Its tests carry needs_root."""
    d = tmp_path_factory.mktemp("recorded")
    image = d / "plain.stipple"
    build(rec_tree, image, *FAST)
    hot = d / "hot.list"
    hot.write_bytes(b"left from an earlier run\n")
    src = os.fsencode(rec_tree)
    with live_mount(image, "--record", hot) as (mnt, _):
        assert read_whole(mnt, "app/main.py") == REC_FILES[b"app/main.py"]
        big = REC_FILES[b"lib/libbig.so"]
        for (off, n), got in zip(BIG_FIRST, pread_random(mnt, "lib/libbig.so", BIG_FIRST)):
            assert got == big[off:off + n]
        # looked at, listed, opened: never read, so no ranges (only lookups, below)
        os.stat(os.path.join(mnt, "data", "never-1"))
        assert sorted(os.listdir(os.path.join(mnt, "data")))[0] == "blob"
        os.close(os.open(os.path.join(mnt, "data", "stat-only"), os.O_RDONLY))
        for name in (b"names/tab\tname", b"names/new\nline", b"names/back\\slash"):
            assert read_whole(mnt, name) == REC_FILES[name]
        assert read_whole(mnt, "data/blob") == REC_FILES[b"data/blob"]
        # read again: the order of first reads stays
        pread_random(mnt, "app/main.py", [(0, 10)])
        for (off, n), got in zip(BIG_LATER, pread_random(mnt, "lib/libbig.so", BIG_LATER)):
            assert got == big[off:off + n]
        assert pread_random(mnt, "app/util.py", [(0, 100)])[0] == REC_FILES[b"app/util.py"][:100]
        # the list is written when the mount ends, and replaces the earlier one only then
        assert hot.read_bytes() == b"left from an earlier run\n"

    def whole(rel):
        return [(0, -(-len(REC_FILES[rel]) // PAGE) * PAGE)]

    # ranges in the order first read: libbig.so again once read again after others
    want = [
        (b"app/main.py", whole(b"app/main.py")),
        (b"lib/libbig.so", [pages(o, n) for o, n in BIG_FIRST]),
        (b"names/tab\tname", whole(b"names/tab\tname")),
        (b"names/new\nline", whole(b"names/new\nline")),
        (b"names/back\\slash", whole(b"names/back\\slash")),
        (b"data/blob", whole(b"data/blob")),
        (b"lib/libbig.so", [pages(o, n) for o, n in BIG_LATER]),
        (b"app/util.py", [pages(0, 100)]),
    ]
    assert all(os.path.isfile(os.path.join(src, p)) for p, _ in want)
    return str(hot), want


@pytest.mark.needs_root
def test_record_lists_ranges_in_first_read_order(recorded):
    hot, want = recorded
    raw = read_bytes(hot)
    got = parse_hot_list(raw)
    assert [p for p, _ in got] == [p for p, _ in want], raw
    for (path, spans), (_, want_spans) in zip(got, want):
        assert spans is not None, "%r: no ranges" % path
        assert all(a % PAGE == 0 and b % PAGE == 0 and a < b for a, b in spans), (path, spans)
        assert spans == merge(spans), "%r: ranges not sorted and merged: %s" % (path, spans)
        # readahead is off for the partial reads, so the list holds exactly the pages read
        assert spans == want_spans, (path, spans, want_spans)
    # escapes: a tab, a newline and a backslash in names
    assert b"names/tab\\tname\t" in raw and b"names/new\\nline\t" in raw
    assert b"names/back\\\\slash\t" in raw
    # nothing read, so no ranges: what was stat'ed or opened is only a name looked up
    looked_up = [l[:-len(b"\tlookup")] for l in raw.split(b"\n") if l.endswith(b"\tlookup")]
    read = b"\n".join(l for l in raw.split(b"\n") if not l.endswith(b"\tlookup"))
    for never in (b"never-1", b"never-2", b"stat-only", b"libother"):
        assert never not in read
    assert b"data/never-1" in looked_up and b"data/stat-only" in looked_up, raw
    assert b"data/never-2" not in looked_up and b"lib/libother.so" not in looked_up, raw


@pytest.mark.needs_root
def test_recorded_list_builds_the_hot_region(recorded, rec_tree, tmp_path):
    hot, want = recorded
    image = tmp_path / "hot.stipple"
    warnings = build(rec_tree, image, *FAST, "--hot-list", hot)
    assert warnings == "", warnings  # the recorder's list parses back without a complaint
    size = hot_size(image)
    assert size == expected_hot_size(rec_tree, want)
    # by hand: whole files count their size, libbig.so only its three page-aligned ranges
    # (widened by the margin), app/util.py its first page (or all of it, widened); each
    # file starts on a page of the stream
    def part(rel, spans):
        spans = hot_spans(spans, len(REC_FILES[rel]))
        return len(REC_FILES[rel]) if spans is None else sum(b - a for a, b in spans)

    sizes = [len(REC_FILES[b"app/main.py"]),
             part(b"lib/libbig.so", [pages(o, n) for o, n in BIG_FIRST])]
    sizes += [len(REC_FILES[k]) for k in (b"names/tab\tname", b"names/new\nline",
                                          b"names/back\\slash", b"data/blob")]
    sizes += [part(b"lib/libbig.so", [pages(o, n) for o, n in BIG_LATER])]
    assert size == laid_out(sizes + [part(b"app/util.py", [(0, PAGE)])])
    if not RANGE_MARGIN:
        assert sizes[1] + sizes[-1] == 8192 + 73728 + 53248 - 128 and sizes[-2] == 700_001
    assert size > 10 * BS  # several blocks
    assert_extract_equals(image, rec_tree, tmp_path / "out")
    assert cat_bytes(image, "lib/libbig.so") == REC_FILES[b"lib/libbig.so"]
    assert cat_bytes(image, "app/util.py") == REC_FILES[b"app/util.py"]


def split_edges(spans, size):
    """Offsets where a file moves between its hot ranges and the rest."""
    return sorted({e for a, b in spans for e in (a, b) if 0 < e < size})


@pytest.mark.needs_root
def test_recorded_image_reads_back_through_the_mount(recorded, rec_tree, tmp_path):
    hot, _ = recorded
    image = tmp_path / "hot.stipple"
    build(rec_tree, image, *FAST, "--hot-list", hot)
    big = REC_FILES[b"lib/libbig.so"]
    spans = hot_spans(merge([pages(o, n) for o, n in BIG_FIRST + BIG_LATER]), len(big))
    with live_mount(image, "--warm-workers", "2") as (mnt, _):
        # reads straddling every edge between hot ranges and the rest, and block edges
        edges = split_edges(spans, len(big)) + list(range(BS, len(big), BS))
        reads = [(max(0, e - 3000), 6000) for e in edges] + [(e - 1, 2) for e in edges]
        for (off, n), got in zip(reads, pread_random(mnt, "lib/libbig.so", reads)):
            assert got == big[off:off + n], "libbig.so: %d bytes at %d" % (n, off)
        diffs = treeutil.compare_trees(rec_tree, mnt)
        assert not diffs, "\n".join(diffs[:50])


@pytest.mark.needs_root
def test_record_while_warming_still_lists_every_read(rec_tree, recorded, tmp_path):
    """Warming pushes pages into the page cache only when no list is being recorded: a
    page read from the page cache never reaches the recorder."""
    hot, want = recorded
    image = tmp_path / "hot.stipple"
    build(rec_tree, image, *FAST, "--hot-list", hot)
    again = tmp_path / "again.list"
    # a budget that holds the whole hot region: every warmed block waits for its reader
    with live_mount(image, "--record", again, "--warm-workers", "2",
                    "--cache-budget", "64") as (mnt, _):
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        paths = list(dict.fromkeys(p for p, _ in want))  # each once, in first-read order
        for path in paths:  # known to the kernel once its blocks are warmed
            os.stat(os.path.join(os.fsencode(mnt), path))
        time.sleep(0.2)
        for path in paths:
            assert read_whole(mnt, path) == REC_FILES[path]
        assert raw_status(mnt)["warm_stored_bytes"] == 0
    got = parse_hot_list(read_bytes(again))
    assert [p for p, _ in got] == paths
    for path, spans in got:
        size = len(read_bytes(os.path.join(os.fsencode(rec_tree), path)))
        assert hot_spans(spans, size) is None, (path, spans)  # read whole, listed whole


@pytest.mark.needs_root
def test_record_options_and_errors(rec_tree, tmp_path):
    image = tmp_path / "plain.stipple"
    build(rec_tree, image, *FAST)
    # -o record= through stipple mount, and through the mount(8) helper with warm_workers=
    for how in ("stipple", "helper"):
        lst = tmp_path / ("%s.list" % how)
        mnt = tmp_path / ("mnt-" + how)
        mnt.mkdir()
        cmd = ([STIPPLE, "mount", "-o", "record=%s,warm_workers=3" % lst, image, mnt]
               if how == "stipple" else
               [MOUNT_STIPPLE, image, mnt, "-o", "record=%s,warm_workers=3" % lst])
        r = run(cmd)
        assert r.returncode == 0, r.stderr
        try:
            text = status_text(str(mnt))
            pid = int(re.search(r"pid (\d+)", text).group(1))
            status = raw_status(str(mnt))
            assert status["warm_workers_set"] == 3
            assert status["warm_workers"] == 0  # no hot region: warming never started
            assert read_whole(str(mnt), "app/util.py") == REC_FILES[b"app/util.py"]
        finally:
            unmount(str(mnt))
        wait_for(lambda: daemon_gone(pid), 20, "daemon outlived umount")
        assert parse_hot_list(lst.read_bytes()) == [(b"app/util.py", [(0, 36864)])]
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    bad = [
        (["--record", "a,b"], "no commas"),
        (["-o", "record="], "record= needs a value"),
        (["--record", str(tmp_path / "no" / "dir" / "hot.list")], "no/dir/hot.list"),
        (["--warm-workers", "257"], "warm_workers"),
        (["--warm-workers", "-1"], "warm_workers"),
        (["-o", "warm_workers=many"], "warm_workers=many"),
    ]
    for args, msg in bad:
        r = run([STIPPLE, "mount", *args, image, mnt])
        assert r.returncode != 0 and msg in r.stderr, (args, r.returncode, r.stderr)
        assert not is_mounted(str(mnt))
    r = run([MOUNT_STIPPLE, image, mnt, "-o", "warm_workers=300"])
    assert r.returncode != 0 and "warm_workers=300" in r.stderr, r.stderr
    assert not is_mounted(str(mnt))


# ---- hot lists written by hand -----------------------------------------------------------

@pytest.fixture(scope="module")
def noise_tree(tmp_path_factory):
    """Incompressible files (stored raw, so they can be found in the image) and names
    that need escapes."""
    files = {"n%d" % i: data(100 + i, 20_000 + 7_000 * i, text=False) for i in range(6)}
    files.update({
        "sub/n6": data(106, 50_000, text=False),
        b"esc/tab\tx": data(110, 9_000, text=False),
        b"esc/nl\ny": data(111, 9_100, text=False),
        b"esc/back\\z": data(112, 9_200, text=False),
        b"esc/q": data(113, 9_300, text=False),
        "big": data(120, 100_000, text=False),
        "huge": data(123, 1_600_000, text=False),
        "large": data(124, 1_000_000, text=False),
        "g": data(121, 30_000, text=False),
        "h": data(122, 60_000, text=False),
    })
    root = write_files(tmp_path_factory.mktemp("noise") / "tree", files)
    os.symlink("n1", os.path.join(root, "link"))
    return root


def test_hot_list_of_plain_paths(noise_tree, tmp_path):
    lst = write_list(tmp_path / "plain.list", [
        b"# start-up of the application",   # 1
        b"",                                 # 2
        b"/n3",                              # 3
        b"./n1",                             # 4
        b"sub/../n2",                        # 5  .. as the readers resolve it: n2
        b"sub//n6",                          # 6
        b"n3",                               # 7  listed twice: the first line counts
        b"sub",                              # 8  a directory
        b"link",                             # 9  a symbolic link
        b"missing/file",                     # 10
        b"n0\r",                             # 11 a carriage return is part of the name,
                                             #    shown escaped (\015) as every name is
        b"n5",                               # 12
    ])
    image = tmp_path / "plain.stipple"
    warnings = build(noise_tree, image, *FAST, "--hot-list", lst)
    for n, what in [(8, "sub: not a regular file"), (9, "link: not a regular file"),
                    (10, "missing/file: not in the tree"), (11, "n0\\015: not in the tree")]:
        assert "mkstipple: %s:%d: %s, skipped" % (lst, n, what) in warnings, warnings
    assert warnings.count("\n") == 4, warnings  # nothing about lines 1-7, 12
    hot = ["n3", "n1", "n2", "sub/n6", "n5"]
    assert hot_size(image) == laid_out(len(read_bytes(os.path.join(noise_tree, h))) for h in hot)
    off = stream_offsets(image, noise_tree, hot + ["n0", "n4", "big"])
    assert [off[h] for h in hot] == sorted(off[h] for h in hot), off
    assert max(off[h] for h in hot) < min(off[c] for c in ("n0", "n4", "big")), off
    assert_extract_equals(image, noise_tree, tmp_path / "out")


def test_hot_list_names_with_escapes(noise_tree, tmp_path):
    lst = write_list(tmp_path / "esc.list", [
        b"esc/back\\\\z", b"esc/nl\\ny", b"esc/tab\\tx", b"esc/\\q"])
    image = tmp_path / "esc.stipple"
    assert build(noise_tree, image, *FAST, "--hot-list", lst) == ""
    names = [b"esc/back\\z", b"esc/nl\ny", b"esc/tab\tx", b"esc/q"]
    src = os.fsencode(noise_tree)
    assert hot_size(image) == laid_out(len(read_bytes(os.path.join(src, n))) for n in names)
    off = stream_offsets(image, src, names)
    assert [off[n] for n in names] == sorted(off.values()), off


@pytest.mark.parametrize("ranges", [b"10-5", b"abc", b"5-", b"0-4096;8192-12288",
                                    b"0-4096,,8192-12288", b"0x10-0x20", b"0-4096 ",
                                    b"-5-10"])
def test_hot_list_malformed_ranges_mean_the_whole_file(noise_tree, tmp_path, ranges):
    lst = write_list(tmp_path / "bad.list", [b"n1", b"big\t" + ranges])
    image = tmp_path / "bad.stipple"
    warnings = build(noise_tree, image, *FAST, "--hot-list", lst)
    assert "mkstipple: %s:2: big: malformed ranges, reading the whole file" % lst in warnings, \
        warnings
    assert hot_size(image) == laid_out([len(read_bytes(os.path.join(noise_tree, "n1"))), 100_000])


def test_hot_list_ranges_clamped_and_merged(noise_tree, tmp_path):
    m = RANGE_MARGIN
    lines = [
        # clamped to the file, merged, unsorted, the last one past the end dropped
        b"huge\t1550000-9999999,0-4096,2048-8192,700000-704096,1700000-1800000",
        b"g\t0-999999999",                                    # covers the file: whole
        b"h\t30000-60000,0-30000",                            # adjacent: the whole file
        b"large\t%d-%d,%d-%d" % (  # not page-aligned: as given (widened by the margin)
            300_001 + m, 300_002 + m, 700_123 + m, 704_000 + m),
    ]
    lst = write_list(tmp_path / "ranges.list", lines)
    image = tmp_path / "ranges.stipple"
    assert build(noise_tree, image, *FAST, "--hot-list", lst) == ""
    entries = parse_hot_list(b"".join(line + b"\n" for line in lines))
    assert hot_size(image) == expected_hot_size(noise_tree, entries)
    if not m:
        assert hot_size(image) == laid_out([50_000 + 8_192 + 4_096, 30_000, 60_000, 1 + 3_877])
    for name in ("huge", "g", "h", "large"):
        assert cat_bytes(image, name) == read_bytes(os.path.join(noise_tree, name))


def test_hot_list_ranges_past_the_end(noise_tree, tmp_path):
    """A file that shrank since its list was recorded: ranges past its end are dropped,
    and a file left without any is skipped, not made hot whole."""
    lst = write_list(tmp_path / "past.list", [b"n1\t999999-1000000,2000000-2000001",
                                              b"n2\t4096-8192,50000-60000"])
    image = tmp_path / "past.stipple"
    warnings = build(noise_tree, image, *FAST, "--hot-list", lst)
    assert "mkstipple: %s:1: n1: every range lies past its end, skipped" % lst in warnings, \
        warnings
    assert warnings.count("\n") == 1, warnings
    assert hot_size(image) == expected_hot_size(noise_tree, [(b"n2", [(4096, 8192)])])
    assert hot_size(image) == (4096 if not RANGE_MARGIN else 34_000)
    assert cat_bytes(image, "n1") == read_bytes(os.path.join(noise_tree, "n1"))
    assert cat_bytes(image, "n2") == read_bytes(os.path.join(noise_tree, "n2"))


def test_hot_list_that_cannot_be_read(noise_tree, tmp_path):
    r = run([MKSTIPPLE, "--quiet", *FAST, "--hot-list", tmp_path / "absent.list", noise_tree,
             tmp_path / "x.stipple"])
    assert r.returncode == 1 and "absent.list" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "x.stipple")


def test_no_hot_list_no_hot_region(noise_tree, tmp_path):
    image = tmp_path / "plain.stipple"
    build(noise_tree, image, *FAST)
    assert hot_size(image) == 0


@pytest.fixture(scope="module")
def hole_tree(tmp_path_factory):
    """Files whose hot ranges start, end and lie in runs of zeros (holes of the image from
    64 KiB up, stored zeros below), ranges farther apart than the builder's margin."""
    root = tmp_path_factory.mktemp("holes") / "tree"
    files = {
        # data 0-10000, zeros to 160000, data to 190000, 3000 zeros, data to 263000,
        # 1.2 MB of zeros, data 1463000-1863000, zeros to the end (2063000)
        "zeros": data(30, 10_000) + bytes(150_000) + data(31, 30_000) + bytes(3_000)
        + data(32, 70_000) + bytes(1_200_000) + data(33, 400_000) + bytes(200_000),
        "short-zeros": data(34, 5_000) + bytes(40_000) + data(35, 5_000),
        "plain": data(36, 1_500_000),
    }
    write_files(root, files)
    with open(os.path.join(root, "sparse"), "wb") as f:  # real holes, and one at the end
        for off, (seed, n) in [(0, (37, 9_000)), (1_000_000, (38, 20_000)),
                               (2_500_000, (39, 5_000)), (4_000_000, (40, 300_000))]:
            f.seek(off)
            f.write(data(seed, n))
        f.truncate(6_000_000)
    return str(root)


HOLE_LIST = [
    b"sparse\t0-12288,990000-1030000,2000000-2502000,4250000-4700000,5900000-6000000",
    b"zeros\t1000-5000,9000-170000,195000-200000,700000-900000,1450000-1900000",
    b"short-zeros\t4000-46000",
    b"plain\t65000-70000,700000-710000,1300000-1300001",
]
HOLE_ENTRIES = parse_hot_list(b"".join(line + b"\n" for line in HOLE_LIST))


def test_hot_ranges_across_holes_read_back(hole_tree, tmp_path):
    lst = write_list(tmp_path / "holes.list", HOLE_LIST)
    image = tmp_path / "holes.stipple"
    assert build(hole_tree, image, *FAST, "--hot-list", lst) == ""
    assert hot_size(image) == expected_hot_size(hole_tree, HOLE_ENTRIES)
    spans = [hot_spans(sp, os.path.getsize(os.path.join(hole_tree, os.fsdecode(p))))
             for p, sp in HOLE_ENTRIES]
    assert all(sp for sp in spans[:2]), spans  # sparse and zeros stay split
    assert hot_size(image) < sum(b - a for sp in spans if sp for a, b in sp)  # holes
    for name in ("sparse", "zeros", "short-zeros", "plain"):
        assert cat_bytes(image, name) == read_bytes(os.path.join(hole_tree, name)), name
    assert_extract_equals(image, hole_tree, tmp_path / "out")


@pytest.mark.needs_root
@pytest.mark.parametrize("when", ["looked-up-first", "read-straight-away"])
def test_hot_ranges_across_holes_through_a_warming_mount(hole_tree, tmp_path, when):
    """Looked up before warming reaches them, the files' warmed pages go into the page
    cache (pages cut at unaligned hot/cold edges stay out); the bytes read then come
    from it, and must be the file's."""
    lst = write_list(tmp_path / "holes.list", HOLE_LIST)
    image = tmp_path / "holes.stipple"
    build(hole_tree, image, *FAST, "--hot-list", lst)
    with live_mount(image, "--warm-workers", "1", "--cache-budget", "1") as (mnt, _):
        if when == "looked-up-first":
            for p, _ in HOLE_ENTRIES:
                os.stat(os.path.join(os.fsencode(mnt), p))
            assert status(mnt, "--wait", "--timeout", "60").returncode == 0
            assert raw_status(mnt)["warm_stored_bytes"] > 0
        for p, sp in HOLE_ENTRIES:
            n = os.fsdecode(p)
            want = read_bytes(os.path.join(hole_tree, n))
            assert read_whole(mnt, n) == want, n
            hot = hot_spans(sp, len(want))
            edges = split_edges(hot, len(want)) if hot else []
            reads = [(max(0, e - PAGE - 7), 2 * PAGE + 14) for e in edges]
            for (off, k), got in zip(reads, pread_random(mnt, n, reads)):
                assert got == want[off:off + k], "%s: %d bytes at %d" % (n, k, off)


# ---- warming and status ------------------------------------------------------------------

WARM_FILES = {"hot/f%02d" % i: data(200 + i, 90_000 + 13_001 * i) for i in range(14)}
WARM_FILES.update({"cold/c%02d" % i: data(300 + i, 50_000) for i in range(6)})
WARM_FILES["hot/ranged"] = data(400, 600_000)
WARM_RANGES = b"hot/ranged\t0-8192,200704-299008,589824-600000"  # page-aligned, as recorded
RANGED = hot_spans([(0, 8192), (200704, 299008), (589824, 600000)], 600_000)


@pytest.fixture(scope="module")
def warm_tree(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("warm") / "tree", WARM_FILES)


@pytest.fixture(scope="module")
def warm_image(warm_tree, tmp_path_factory):
    d = tmp_path_factory.mktemp("warm-image")
    hot = sorted(k for k in WARM_FILES if k.startswith("hot/f"))
    lst = write_list(d / "hot.list", [h.encode() for h in hot] + [WARM_RANGES])
    image = d / "warm.stipple"
    assert build(warm_tree, image, *FAST, "--hot-list", lst) == ""
    size = hot_size(image)
    assert size == hot_size_of_warm() and size > 30 * BS, size
    return str(image)


def hot_blocks(image):
    return -(-hot_size(image) // BS)


def hot_names():
    return [k for k in WARM_FILES if k.startswith("hot/")]


@pytest.mark.needs_root
def test_status_wait_then_done(warm_image):
    n = hot_blocks(warm_image)
    with live_mount(warm_image, "--warm-workers", "2", "--cache-budget", "64") as (mnt, pid):
        r = status(mnt, "--wait")
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(r"%d of %d hot blocks \(done\), \d+ held, .* into the page cache "
                            r"\(2 workers\)" % (n, n), line_of(r.stdout, "warming")), r.stdout
        text = status_text(mnt)
        assert line_of(text, "image") == os.path.realpath(warm_image)
        assert re.match(r"pid %d, memory \S+ \S+ \(peak \S+ \S+\)$" % pid, line_of(text, "daemon"))
        assert re.match(r"\d+ of 64 blocks of 64\.0 KiB held, \d+ in use; \d+ hits, \d+ misses$",
                        line_of(text, "cache")), text
        assert line_of(text, "metadata")
        raw = raw_status(mnt)
        assert raw["hot_blocks"] == raw["warmed"] == n and raw["warm_done"] == 1
        assert raw["block_size"] == BS and raw["pid"] == pid
        assert raw["blocks_decoded"] >= n


@pytest.mark.needs_root
@pytest.mark.parametrize("budget", ["1", "8"])
def test_reads_during_warming(warm_tree, warm_image, budget):
    """Readers start the moment the mount is live, in several threads, while the warmers
    decode the same blocks: every byte must be the file's."""
    files = {k: WARM_FILES[k] for k in WARM_FILES}
    names = hot_names() + [k for k in files if k.startswith("cold/")]
    errors = []

    def reader(seed, mnt):
        rnd = random.Random(seed)
        order = names[:]
        rnd.shuffle(order)
        try:
            for i, rel in enumerate(order):
                want = files[rel]
                path = os.path.join(mnt, rel)
                if i % 3 == 0:
                    got = read_bytes(path)
                    if got != want:
                        errors.append("%s: whole file differs" % rel)
                    continue
                fd = os.open(path, os.O_RDONLY)
                try:
                    for _ in range(4):
                        off = rnd.randrange(len(want))
                        n = rnd.choice([1, 4096, 70_000, 300_000])
                        if os.pread(fd, n, off) != want[off:off + n]:
                            errors.append("%s: %d bytes at %d differ" % (rel, n, off))
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("%d: %r" % (seed, e))

    with live_mount(warm_image, "--warm-workers", "2", "--cache-budget", budget) as (mnt, _):
        threads = [threading.Thread(target=reader, args=(s, mnt)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # every hot page read: the warmer never waits for room, and finishes
        for rel in hot_names():
            assert read_whole(mnt, rel) == WARM_FILES[rel]
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        assert raw_status(mnt)["warm_done"] == 1
    assert not errors, "\n".join(errors[:20])


@pytest.mark.needs_root
def test_held_blocks_let_go_once_read(warm_image):
    """Without priming, no hot file is known to the kernel until it is read: warmed
    blocks are held until then, and let go once every hot page has been read."""
    with live_mount(warm_image, "--warm-workers", "2", "--cache-budget", "64",
                    "--no-prime") as (mnt, _):
        assert status(mnt, "--wait").returncode == 0
        assert raw_status(mnt)["warm_held"] > 0
        for rel in hot_names():
            assert read_whole(mnt, rel) == WARM_FILES[rel]
        # every hot page has been read: no block is held any more
        wait_for(lambda: raw_status(mnt)["warm_held"] == 0, 5,
                 "blocks still held after every hot page was read: %s" % raw_status(mnt))
        assert re.search(r", 0 held,", line_of(status_text(mnt), "warming"))
        assert raw_status(mnt)["cache_pinned"] == 0


def lookup_then_warm(mnt):
    """Makes the kernel know every hot file (a lookup each) while warming, one block at a
    time (one worker, a budget of one block), has barely started; then waits for it. Each
    block is let go once its pages are stored, so the warmer never waits for room."""
    for rel in hot_names():
        os.stat(os.path.join(mnt, rel))
    assert status(mnt, "--wait", "--timeout", "60").returncode == 0


@pytest.mark.needs_root
def test_warmed_pages_go_into_the_page_cache(warm_image):
    """Files the kernel knows before their blocks are warmed get their hot pages pushed
    into the page cache; what is read from there must be the files' bytes."""
    with live_mount(warm_image, "--warm-workers", "1", "--cache-budget", "1") as (mnt, _):
        lookup_then_warm(mnt)
        stored = raw_status(mnt)["warm_stored_bytes"]
        # all but a page at each block edge inside a file, and a block or two warmed
        # before the lookups
        assert stored > hot_size_of_warm() * 0.8, stored
        for rel in hot_names():
            assert read_whole(mnt, rel) == WARM_FILES[rel]


@pytest.mark.needs_root
def test_warmed_files_read_without_decoding_again(warm_image):
    """Hot files start on pages of the stream, so every page of them lies in one block
    and is pushed whole: reading them afterwards decodes nothing again."""
    mark = drops()
    with live_mount(warm_image, "--warm-workers", "1", "--cache-budget", "1") as (mnt, _), \
            held(hot_paths(mnt)), unless_dropped(mark):
        lookup_then_warm(mnt)
        st = raw_status(mnt)
        decoded = st["blocks_decoded"]
        reclaimed = read_hot_parts(mnt)
        again = raw_status(mnt)["blocks_decoded"] - decoded
        # but a decode for each page the kernel reclaimed since its push (pagecache.py)
        assert again <= reclaimed, "%d of %d hot blocks decoded again, %d pages reclaimed" % (
            again, hot_blocks_of_warm(), reclaimed)


def hot_size_of_warm():
    return laid_out([len(WARM_FILES[k]) for k in sorted(WARM_FILES) if k.startswith("hot/f")]
                    + [sum(b - a for a, b in RANGED)])


def read_hot_parts(mnt):
    """Reads every hot page and nothing else (readahead off for the ranged file), once
    warming has pushed them all: none may be missing from the page cache but those the
    kernel reclaimed since. Returns how many it reclaimed (pagecache.read_pushed)."""
    reclaimed = 0
    for rel in hot_names():
        if rel != "hot/ranged":
            got, n = read_pushed(os.path.join(mnt, rel))
            assert got == WARM_FILES[rel], rel
            reclaimed += n
    got, n = read_pushed(os.path.join(mnt, "hot/ranged"), RANGED)
    assert got == [WARM_FILES["hot/ranged"][a:b] for a, b in RANGED]
    return reclaimed + n


def hot_paths(mnt):
    """The hot files' paths, to hold their inodes (pagecache.held)."""
    return [os.path.join(mnt, rel) for rel in hot_names()]


def hot_blocks_of_warm():
    return -(-hot_size_of_warm() // BS)


@pytest.mark.needs_root
def test_pages_of_files_looked_up_after_warming_go_into_the_page_cache(warm_image):
    """The store follows the lookup reply, and the kernel makes the inode only once the
    reply reaches it: a store that comes too early is tried again."""
    with live_mount(warm_image, "--warm-workers", "2", "--cache-budget", "64",
                    "-o", "noprime") as (mnt, _):
        assert status(mnt, "--wait").returncode == 0
        held = raw_status(mnt)["warm_held"]
        assert held > hot_blocks_of_warm() // 2
        for rel in hot_names():
            os.stat(os.path.join(mnt, rel))
        wait_for(lambda: raw_status(mnt)["warm_stored_bytes"] > hot_size_of_warm() * 0.5, 5,
                 "little stored into the page cache: %s" % raw_status(mnt))


@pytest.mark.needs_root
def test_priming_fills_the_page_cache_before_any_access(warm_image):
    """The mount looks the hot files up before it returns, so warming pushes every hot
    page into the page cache with nobody reading: one worker and a budget of one block
    finish (each block is let go once stored), every hot page is in the page cache before
    the first read (or was reclaimed from it since: pagecache.py), and reading the hot
    parts afterwards decodes nothing but for reclaimed pages, and gives the files' bytes."""
    mark = drops()
    with live_mount(warm_image, "--warm-workers", "1", "--cache-budget", "1") as (mnt, _), \
            held(hot_paths(mnt)), unless_dropped(mark):
        r = status(mnt, "--wait", "--timeout", "60")
        assert r.returncode == 0 and "(done)" in r.stdout, r.stdout + r.stderr
        st = raw_status(mnt)
        assert st["warm_held"] == 0, "%s" % st
        # read_hot_parts checks each hot page
        assert st["warm_stored_bytes"] > hot_size_of_warm() * 0.8, st
        decoded = st["blocks_decoded"]
        reclaimed = read_hot_parts(mnt)
        again = raw_status(mnt)["blocks_decoded"] - decoded
        assert again <= reclaimed, "%d of %d hot blocks decoded again, %d pages reclaimed" % (
            again, hot_blocks_of_warm(), reclaimed)


@pytest.mark.needs_root
@pytest.mark.parametrize("how", [("--no-prime",), ("-o", "noprime"), ("--warm-workers", "0")])
def test_unprimed_mount_stores_nothing_before_a_lookup(warm_image, how):
    """Without priming (or without warming) the kernel learns of no hot file, so nothing
    can be stored until the application looks files up (and a lookup stores at once, so
    there is no asking the page cache afterwards)."""
    args = ("--warm-workers", "2", "--cache-budget", "64") + how
    with live_mount(warm_image, *args) as (mnt, _):
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        assert raw_status(mnt)["warm_stored_bytes"] == 0
        assert read_whole(mnt, "hot/f00") == WARM_FILES["hot/f00"]


@pytest.mark.needs_root
def test_warming_off(warm_tree, warm_image, tmp_path):
    with live_mount(warm_image, "--warm-workers", "0") as (mnt, _):
        assert line_of(status_text(mnt), "warming") == "off (no workers)"
        r = status(mnt, "--wait", "--timeout", "5")
        assert r.returncode == 0 and "off (no workers)" in r.stdout
        assert raw_status(mnt)["blocks_decoded"] == 0  # nothing decoded until read
        assert read_whole(mnt, "hot/f03") == WARM_FILES["hot/f03"]
    plain = tmp_path / "plain.stipple"
    build(warm_tree, plain, *FAST)
    with live_mount(plain, "--warm-workers", "4") as (mnt, _):
        assert line_of(status_text(mnt), "warming") == "off (no hot region)"
        assert status(mnt, "--wait", "--timeout", "5").returncode == 0
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, warm_image, mnt, "-o", "warm_workers=0"])
    assert r.returncode == 0, r.stderr
    try:
        assert line_of(status_text(str(mnt)), "warming") == "off (no workers)"
    finally:
        unmount(str(mnt))


@pytest.mark.needs_root
def test_status_of_something_else(warm_image, tmp_path):
    plain_dir = tmp_path / "plain dir"
    plain_dir.mkdir()
    r = status(str(plain_dir))
    assert r.returncode == 1
    assert "stipple status: %s: not a stipple mount" % plain_dir in r.stderr, r.stderr
    assert r.stdout == ""
    r = status(str(tmp_path / "absent"))
    assert r.returncode == 1 and str(tmp_path / "absent") in r.stderr, r.stderr
    with live_mount(warm_image) as (mnt, _):
        sub = os.path.join(mnt, "hot")  # the mount's root is what answers
        r = status(sub)
        assert r.returncode == 1 and "%s: not a stipple mount" % sub in r.stderr, r.stderr
        # the status attribute is hidden from listings
        assert "user.stipple.status" not in os.listxattr(mnt)
    for args in ([], ["--timeout", "0", "/"], ["--timeout", "x", "/"], ["--timeout", "nan", "/"],
                 ["--bogus", "/"], ["a", "b"]):
        r = run([STIPPLE, "status", *args])
        assert r.returncode == 2, (args, r.returncode, r.stderr)


@pytest.mark.needs_root
def test_status_wait_timeout(warm_image):
    """One worker and a budget of one block, with no reader to let go of the block it
    holds: it waits for room before each next block, so warming takes a long while and
    --timeout gives up. Reading every hot page lets it finish. (Unprimed: a primed mount
    stores every block and never waits.)"""
    with live_mount(warm_image, "--warm-workers", "1", "--cache-budget", "1",
                    "--no-prime") as (mnt, _):
        start = time.monotonic()
        r = status(mnt, "--wait", "--timeout", "0.2")
        took = time.monotonic() - start
        assert raw_status(mnt)["warm_done"] == 0, "warming finished too soon for this test"
        assert r.returncode == 1, r.stdout + r.stderr
        assert "%s: warming not done after 0.2 s" % mnt in r.stderr, r.stderr
        assert r.stdout == ""
        assert 0.2 <= took < 5, took
        for rel in hot_names():
            assert read_whole(mnt, rel) == WARM_FILES[rel]
        r = status(mnt, "--wait", "--timeout", "60")
        assert r.returncode == 0 and "(done)" in r.stdout, r.stdout + r.stderr


# ---- memory -------------------------------------------------------------------------------

MEM_BS = 1 << 20
MEM_HOT = 16


@pytest.fixture(scope="module")
def mem_image(tmp_path_factory):
    """Sixteen 1 MiB blocks of hot text, so that blocks outweigh the daemon's baseline."""
    d = tmp_path_factory.mktemp("mem")
    files = {"f%02d" % i: data(500 + i, MEM_BS) for i in range(MEM_HOT)}
    files["tail"] = data(600, 12_345)  # the stream is not a whole number of blocks
    tree = write_files(d / "tree", files)
    lst = write_list(d / "hot.list", [("f%02d" % i).encode() for i in range(MEM_HOT)])
    image = d / "mem.stipple"
    assert build(tree, image, "--level", "3", "--block-size", "1M", "--hot-list", lst) == ""
    assert hot_size(image) == MEM_HOT * MEM_BS
    return str(image), tree


@pytest.mark.needs_root
@pytest.mark.parametrize("workers,budget", [(2, 2), (8, 2), (2, 8)])
def test_warming_memory_is_bounded(mem_image, workers, budget):
    """VmHWM of the daemon stays within its baseline plus (workers + budget) blocks plus
    a fixed allowance, while the warmer is full and then while one reader reads the hot
    files. Unprimed, so that warmed blocks stay held until read: the worst case.

    The baseline is measured on a mount of the same image without warming and before any
    read: it holds the decoded metadata, libfuse's buffers and the program. On top of it,
    warming may hold one block per worker being decoded and the cache budget; the
    allowance adds two blocks and 1 MiB: the cache keeps an evicted buffer to decode the
    next block into (one block); a freed block stays in the malloc arena of the thread
    that decoded it while another thread's arena makes a new one (up to one block, seen
    now and then); and the compressed input of each decode (here about a sixth of a
    block), a zstd context per decoding thread and the stacks of the warming threads
    (the 1 MiB). While a reader reads, four blocks more: the kernel keeps several reads
    of a file in flight (readahead), and each pins the one or two blocks it spans, on top
    of the budget. A warmer that kept every block it decoded would go past the bound by
    nine blocks or more. Measured here (1 MiB blocks, baseline 3.1 MiB), over the
    baseline, in blocks: while warming 2.7-4.8 (2 workers, budget 2), 4.8-10.2 (8, 2),
    9.8-10.2 (2, 8); while reading at most 8.3, 11.5 and 11.3.
    """
    image, tree = mem_image
    with live_mount(image, "--warm-workers", "0", "--cache-budget", str(budget)) as (mnt, pid):
        status_text(mnt)
        base = vm_kb(pid)["VmHWM"]
    bound = base + ((workers + budget + 2) * MEM_BS >> 10) + 1024
    full = max(budget - 1, 1)  # the warmer leaves one block of the budget to readers
    with live_mount(image, "--warm-workers", str(workers), "--cache-budget", str(budget),
                    "--no-prime") as (mnt, pid):
        wait_for(lambda: raw_status(mnt)["warm_held"] >= full, 30,
                 "the warmer never filled its budget: %s" % raw_status(mnt))
        time.sleep(1.3)  # with nobody reading, it lets its oldest block go and goes on
        warm = vm_kb(pid)["VmHWM"]
        for i in range(MEM_HOT):
            assert read_whole(mnt, "f%02d" % i) == read_bytes(os.path.join(tree, "f%02d" % i))
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        read = vm_kb(pid)["VmHWM"]
        meta = raw_status(mnt)["metadata_bytes"]
    print("workers %d budget %d: baseline %d KiB, warming %d KiB, reading %d KiB, bound %d "
          "KiB, metadata %d bytes" % (workers, budget, base, warm, read, bound, meta))
    assert warm <= bound, "peak %d KiB while warming, bound %d KiB (baseline %d KiB)" % (
        warm, bound, base)
    assert read <= bound + (4 * MEM_BS >> 10), \
        "peak %d KiB while reading, bound %d KiB (baseline %d KiB)" % (read, bound, base)


# ---- the generated tree, hot-listed, through a warming mount ------------------------------

@pytest.fixture(scope="module")
def gen_hot_image(gen_tree, tmp_path_factory):
    """The shared generated tree with every file under files/, a/, hard/ and names/ on
    the hot list, some only in part."""
    d = tmp_path_factory.mktemp("gen-hot")
    ranged = {b"files/large": b"0-65536,1000000-1100000,3000000-3145728",
              b"files/sparse": b"0-8192,2100000-2200000",
              b"files/zeros-written": b"4096-1600000"}
    lines = []
    src = os.fsencode(gen_tree)
    for top in (b"files", b"a", b"hard", b"names"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, top)):
            dirnames.sort()
            for name in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, name), src)
                line = escape(rel)
                if rel in ranged:
                    line += b"\t" + ranged[rel]
                lines.append(line)
    lst = write_list(d / "gen.list", lines)
    image = d / "gen-hot.stipple"
    assert build(gen_tree, image, *FAST, "--hot-list", lst) == ""
    assert hot_size(image) > 10 * BS
    return str(image)


@pytest.mark.needs_root
def test_generated_tree_through_a_warming_mount(gen_tree, gen_hot_image):
    errors = []
    files = []
    for dirpath, _, names in os.walk(os.path.join(gen_tree, "files")):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), gen_tree)
            files.append((rel, read_bytes(os.path.join(gen_tree, rel))))

    def reader(seed, mnt):
        rnd = random.Random(seed)
        try:
            for _ in range(60):
                rel, want = rnd.choice(files)
                fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
                try:
                    off = rnd.randrange(len(want) + 1)
                    n = rnd.choice([1, 4096, 70_000, 1 << 20])
                    if os.pread(fd, n, off) != want[off:off + n]:
                        errors.append("%s: %d bytes at %d differ" % (rel, n, off))
                    if rnd.random() < 0.2:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("%d: %r" % (seed, e))

    with live_mount(gen_hot_image, "--warm-workers", "2") as (mnt, _):
        threads = [threading.Thread(target=reader, args=(s, mnt)) for s in range(4)]
        for t in threads:
            t.start()
        diffs = treeutil.compare_trees(gen_tree, mnt)
        for t in threads:
            t.join()
        assert not diffs, "\n".join(diffs[:50])
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
    assert not errors, "\n".join(errors[:20])


# ---- a real start-up: Python's standard library -------------------------------------------

PY_CODE = ("import json, email.parser, sqlite3, decimal, os;"
           "print(json.dumps({'a': [1, 2]})); print(os.__file__)")


def run_python(prefix):
    env = {"PYTHONHOME": str(prefix), "PATH": "/usr/bin:/bin", "LC_ALL": "C",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return run([PYTHON, "-s", "-c", PY_CODE], env=env, check=True).stdout


@pytest.mark.needs_root
def test_python_start_up_recorded_and_replayed(tmp_path):
    """Record what Python reads while it imports a few modules from a mounted standard
    library, build the library again with that list, and start Python from the new image
    while it warms."""
    if not os.path.isfile(os.path.join(PYTHON_LIB, "os.py")) or not os.access(PYTHON, os.X_OK):
        pytest.skip("Debian's Python 3.11 is not installed")
    plain = tmp_path / "py.stipple"
    build(PYTHON_LIB, plain, "--level", "3", "--block-size", "1M")
    prefix = tmp_path / "prefix"
    lib = prefix / "lib" / os.path.basename(PYTHON_LIB)
    lib.mkdir(parents=True)
    lst = tmp_path / "py.list"
    with live_mount(plain, "--record", lst) as (mnt, pid):
        os.rmdir(lib)
        os.symlink(mnt, lib)  # PYTHONHOME=prefix finds the mount at prefix/lib/python3.X
        try:
            out = run_python(prefix)
        finally:
            os.unlink(lib)
            os.mkdir(lib)
    assert out.splitlines() == ['{"a": [1, 2]}', str(lib / "os.py")]
    entries = parse_hot_list(read_bytes(lst))
    paths = [p for p, _ in entries]
    # a file read again after others is listed again, never twice in a row
    assert len(set(paths)) > 10 and all(a != b for a, b in zip(paths, paths[1:])), paths
    assert any(p.startswith(b"json/") for p in paths), paths
    assert any(b"decimal" in p for p in paths), paths
    for p in paths:
        assert os.path.isfile(os.path.join(os.fsencode(PYTHON_LIB), p)), p
    hot = tmp_path / "py-hot.stipple"
    assert build(PYTHON_LIB, hot, "--level", "3", "--block-size", "1M", "--hot-list", lst,
                 "--no-stable-blocks") == ""
    assert hot_size(hot) == expected_hot_size(PYTHON_LIB, entries)
    with live_mount(hot, "--warm-workers", "2") as (mnt, _):
        os.rmdir(lib)
        os.symlink(mnt, lib)
        try:
            assert run_python(prefix) == out
        finally:
            os.unlink(lib)
            os.mkdir(lib)
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        diffs = treeutil.compare_trees(PYTHON_LIB, mnt)
        assert not diffs, "\n".join(diffs[:50])


@pytest.mark.needs_root
def test_pieces_after_a_files_end_stay_page_aligned(tmp_path):
    """A file's ranges in the order read: a range at its end (a partial last page), then
    one at its start. The second piece follows the first in the stream, and must still
    start on a stream page, or its file pages straddle stream pages and one straddles the
    edge of two blocks: warming could not push it, and reading it after warming would
    decode both blocks again. Once warmed, reading the hot ranges decodes nothing."""
    size = 300_001
    content = data(70, size, text=False)
    tree = write_files(tmp_path / "tree", {b"f": content})
    lst = write_list(tmp_path / "order.list", [b"f\t294912-300001,0-135168"])
    image = tmp_path / "order.stipple"
    assert build(tree, image, *FAST, "--hot-list", lst) == ""
    entries = parse_hot_list(read_bytes(lst))
    assert hot_size(image) == expected_hot_size(tree, entries)
    mark = drops()
    with live_mount(image, "--warm-workers", "1", "--cache-budget", "64") as (mnt, _), \
            held([os.path.join(mnt, "f")]), unless_dropped(mark):
        assert status(mnt, "--wait", "--timeout", "60").returncode == 0
        time.sleep(0.2)
        st = raw_status(mnt)
        spans = hot_spans([(294912, size), (0, 135168)], size) or [(0, size)]
        # every hot page went in: a page straddling two blocks could not have. (Not
        # warm_store_failures == 0: it also counts a store given up while a lookup's reply
        # was still on its way, which the retry then made: pagestore.h, warm.c.)
        assert st["warm_stored_bytes"] == sum(b - a for a, b in spans), "%s" % st
        before = st["blocks_decoded"]
        got, reclaimed = read_pushed(os.path.join(mnt, "f"), spans)
        assert got == [content[a:b] for a, b in spans]
        # but a decode for each page the kernel reclaimed since its push (pagecache.py)
        st = raw_status(mnt)
        assert st["blocks_decoded"] - before <= reclaimed, (reclaimed, st)
