# SPDX-License-Identifier: MIT
"""The names a start-up looks up, found or not, are recorded, kept in the image and
looked up at mount (issue 32, item 1): a walk that stats directories and probes names
that do not exist, recorded once, then repeated on a fresh mount of the image built
with that list, sends no LOOKUP to the daemon. The requests are counted by the kernel's
own FUSE trace events (tracefs, an instance of our own), not by the daemon; the walk's
answers are checked against the source tree. An image whose lookup table is too long or
damaged is refused or checked, and its mount still answers correctly."""

import os
import random
import re
import subprocess
import sys

import pytest

from conftest import MKSTIPPLE, STIPPLE, build_image, mount_image, run
from imageutil import (FEAT_LOOKUPS, LOOKUP_FIELDS, LOOKUP_SIZE, META_FIELDS, SB_FIELDS,
                       CraftedImage, get, put)
from test_record_readahead import daemon_pid, wait_gone
import mounts
from pagecache import drops, unless_dropped

TRACEFS = "/sys/kernel/tracing"
LOOKUP_MAX = 65536    # common/format.h STP_LOOKUP_MAX

# What the start-up does, relative to its root: directories it stats, names it probes
# that are not there (beside ones that are), and one file it reads.
STATS = ["lib", "lib/node_modules/pkg", "lib/node_modules/pkg/sub", "share/doc"]
PROBES = ["lib/node_modules/pkg/index.json", "lib/node_modules/pkg/index.node",
          "lib/node_modules/pkg/index.js", "lib/node_modules/missing", "share/nothing",
          "share/doc/README", "nope"]
READS = ["lib/node_modules/pkg/index.js"]

WALK = r"""
import os, sys
root, stats, probes, reads = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
out = []
for p in filter(None, stats.split(",")):
    st = os.stat(os.path.join(root, p))
    out.append("stat %s %o" % (p, st.st_mode))
for p in filter(None, probes.split(",")):
    try:
        st = os.stat(os.path.join(root, p))
        out.append("found %s %o %d" % (p, st.st_mode, st.st_size))
    except FileNotFoundError:
        out.append("missing %s" % p)
for p in filter(None, reads.split(",")):
    with open(os.path.join(root, p), "rb") as f:
        out.append("read %s %d" % (p, len(f.read())))
print("\n".join(out))
"""


def make_tree(d):
    tree = d / "tree"
    pkg = tree / "lib" / "node_modules" / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (tree / "share" / "doc").mkdir(parents=True)
    (pkg / "index.js").write_bytes(b"module.exports = 42;\n" * 300)
    (pkg / "index.json").write_text("{}\n")
    (tree / "share" / "doc" / "README").write_text("hello\n")
    for i in range(20):
        (tree / "lib" / ("other%d" % i)).write_bytes(os.urandom(5000))
    return tree


def walk(root):
    """Runs the start-up from ROOT: its answers, one a line."""
    r = subprocess.run([sys.executable, "-c", WALK, os.fspath(root), ",".join(STATS),
                        ",".join(PROBES), ",".join(READS)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module", autouse=True)
def tracefs():
    """tracefs at TRACEFS for the module: a fresh machine may not have it mounted. Mounted
    here (as root) when missing, and unmounted after."""
    mounted = False
    if not os.path.exists(os.path.join(TRACEFS, "events")) and os.geteuid() == 0 \
            and os.path.isdir(TRACEFS):
        mounted = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS],
                                 capture_output=True).returncode == 0
    yield
    if mounted:
        subprocess.run(["umount", TRACEFS], check=True)


def traced(mnt, fn):
    """Runs FN with the kernel's fuse_request_send event on for MNT's connection, in a
    trace instance of our own; returns FN's result and the opcodes sent, counted."""
    events = os.path.join(TRACEFS, "events", "fuse", "fuse_request_send")
    if not os.path.exists(events):
        pytest.skip("the kernel has no FUSE trace events")
    inst = os.path.join(TRACEFS, "instances", "stipple-lookups-%d" % os.getpid())
    os.mkdir(inst)
    try:
        ev = os.path.join(inst, "events", "fuse", "fuse_request_send")
        st = os.stat(mnt)
        with open(os.path.join(ev, "filter"), "w") as f:
            f.write("connection == %d" % ((os.major(st.st_dev) << 20) | os.minor(st.st_dev)))
        with open(os.path.join(ev, "enable"), "w") as f:
            f.write("1")
        try:
            result = fn()
        finally:
            with open(os.path.join(ev, "enable"), "w") as f:
                f.write("0")
        with open(os.path.join(inst, "trace")) as f:
            text = f.read()
    finally:
        os.rmdir(inst)
    counts = {}
    for op in re.findall(r"fuse_request_send: .*\((\w+)\)", text):
        counts[op] = counts.get(op, 0) + 1
    return result, counts


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The tree, a plain image of it, and the hot list one recording mount wrote."""
    d = tmp_path_factory.mktemp("lookups")
    tree = make_tree(d)
    return d, tree, record(tree, d, walk)


def record(tree, d, fn):
    """The hot list a recording mount of a plain image of TREE wrote while FN(MOUNT) ran."""
    base = build_image(tree, d / "base.stp", "--level", "1")
    hot = d / "hot.list"
    with mount_image(base, None, "--record", str(hot)) as mnt:
        pid = daemon_pid(mnt)
        fn(mnt)
    wait_gone(pid)
    return hot


def lookup_lines(hot):
    return [l.split("\t")[0] for l in hot.read_text().splitlines() if l.endswith("\tlookup")]


def range_lines(hot):
    """The lines of the hot list HOT that are not lookups: its files' ranges."""
    return [l for l in hot.read_text().splitlines() if not l.endswith("\tlookup")]


def ranges_only(hot, dst):
    """DST: the hot list HOT without its lookup lines, as lists were before the table."""
    dst.write_text("".join(l + "\n" for l in range_lines(hot)))
    return dst


@pytest.mark.needs_root
def test_recording_lists_each_name_looked_up_once_in_order(recorded):
    """Every directory on the way, every name probed (found or not), once, in the order
    the walk first met it."""
    _, _, hot = recorded
    names = lookup_lines(hot)
    assert len(names) == len(set(names)), names
    for p in STATS + PROBES + READS:
        assert p in names, (p, names)
    assert names.index("share/nothing") > names.index("lib/node_modules/missing")
    assert names.index("lib/node_modules/pkg") < names.index("lib/node_modules/pkg/sub")
    # the file read still has its ranges line, before the lookups
    ranges = range_lines(hot)
    assert ranges and ranges[0].startswith("lib/node_modules/pkg/index.js\t0-")


@pytest.mark.needs_root
def test_primed_walk_sends_no_lookup(recorded):
    """On a fresh mount of the image built with the list, once mount returned (priming
    done), the walk's every answer is the source tree's and the kernel sends the daemon
    no LOOKUP. The same image without the lookup lines, as control, sends some."""
    d, tree, hot = recorded
    want = walk(tree)
    plain = ranges_only(hot, d / "ranges.list")
    images = {"with": build_image(tree, d / "with.stp", "--level", "1", "--hot-list", hot),
              "without": build_image(tree, d / "without.stp", "--level", "1",
                                     "--hot-list", plain)}
    info = run([STIPPLE, "info", images["with"]]).stdout
    assert re.search(r"^lookups:\s+%d names" % len(lookup_lines(hot)), info, re.M), info
    info = run([STIPPLE, "info", images["without"]]).stdout
    assert not re.search(r"^lookups:|^features:.*lookups", info, re.M), info
    counts, mark = {}, drops()
    for kind, image in images.items():
        with mount_image(image, None, "--warm-workers", "2") as mnt:
            got, counts[kind] = traced(mnt, lambda: walk(mnt))
        assert got == want, (kind, got, want)
    with unless_dropped(mark):  # drop_caches=2 makes the kernel forget primed names
        assert counts["with"].get("FUSE_LOOKUP", 0) == 0, counts
    assert counts["without"].get("FUSE_LOOKUP", 0) >= len(PROBES), counts


@pytest.mark.needs_root
def test_old_lists_build_as_before(recorded):
    """A hot list without lookup lines builds the image it built before the table
    existed: no feature bit, header fields 0."""
    d, tree, hot = recorded
    plain = ranges_only(hot, d / "old.list")
    image = build_image(tree, d / "old.stp", "--level", "1", "--hot-list", plain)
    img = CraftedImage(image)
    assert img.header("lookup_count") == 0 and img.header("lookup_off") == 0
    assert not get(SB_FIELDS, "feat_incompat", img.data) & FEAT_LOOKUPS


def with_table(src, dst, records, count=None, pad=0):
    """SRC's metadata with a lookup table of RECORDS ((dir, name bytes) pairs; a name is
    appended to the string pool) and COUNT in the header (default: their number),
    PAD zero bytes of room after the records."""
    img = CraftedImage(src)
    strings = bytearray()
    recs = bytearray()
    base = img.header("strings_size")
    for dir_ino, name in records:
        rec = bytearray(LOOKUP_SIZE)
        for field, value in (("dir", dir_ino), ("name_off", base + len(strings)),
                             ("name_len", len(name))):
            put(LOOKUP_FIELDS, field, rec, value)
        recs += rec
        strings += name
    # the pool stays last: grow it, then the table after it (8-aligned)
    img.meta += strings
    put(META_FIELDS, "strings_size", img.meta, base + len(strings))
    img.meta += bytes(-len(img.meta) % 8)
    off = len(img.meta)
    img.meta += recs + bytes(pad)
    put(META_FIELDS, "lookup_count", img.meta, len(records) if count is None else count)
    put(META_FIELDS, "lookup_off", img.meta, off)
    put(SB_FIELDS, "feat_incompat", img.data,
        get(SB_FIELDS, "feat_incompat", img.data) | FEAT_LOOKUPS)
    return img.write(dst)


def primed_probe(mnt):
    """What a mount whose table holds lib/absent primes: that name (not there) and the
    hot file, stat'ed."""
    assert not os.path.exists(os.path.join(mnt, "lib", "absent"))
    assert os.stat(os.path.join(mnt, READS[0])).st_size > 0


@pytest.mark.needs_root
def test_hostile_lookup_tables(recorded, tmp_path):
    """Past 65536 records the image is refused; a record naming a file as its directory,
    or a name with a slash, is damage stipple check reports; a mount of it skips that
    record, primes the hot files and the table's other names (the kernel then sends no
    LOOKUP for them), and answers every lookup from the tree."""
    d, tree, hot = recorded
    ranges = ranges_only(hot, tmp_path / "ranges.list")
    src = build_image(tree, tmp_path / "src.stp", "--level", "1", "--no-meta-pages",
                      "--hot-list", ranges)
    img = CraftedImage(src)
    lib = img.lookup("lib")
    index_js = img.lookup("lib/node_modules/pkg/index.js")

    ok = with_table(src, tmp_path / "ok.stp", [(lib, b"absent")])
    r = run([STIPPLE, "check", ok])
    assert r.returncode == 0, r.stdout + r.stderr

    huge = with_table(src, tmp_path / "huge.stp", [(lib, b"x")], count=LOOKUP_MAX + 1,
                      pad=LOOKUP_MAX * LOOKUP_SIZE)
    r = run([STIPPLE, "ls", huge])
    assert r.returncode != 0 and "metadata header invalid" in r.stderr, r.stderr

    # not in a directory; names that are not one name
    for bad in ((index_js, b"x"), (lib, b"a/b"), (lib, b"..")):
        image = with_table(src, tmp_path / "bad.stp", [(lib, b"absent"), bad])
        r = run([STIPPLE, "check", image])
        assert r.returncode != 0 and "lookup 1" in r.stdout + r.stderr, r.stdout + r.stderr
        mark = drops()
        with mount_image(image, None, "--warm-workers", "2") as mnt:
            _, counts = traced(mnt, lambda: primed_probe(mnt))
            with unless_dropped(mark):  # drop_caches=2 makes the kernel forget primed names
                assert counts.get("FUSE_LOOKUP", 0) == 0, (bad, counts)
            assert walk(mnt) == walk(tree)


@pytest.mark.needs_root
def test_lookup_lines_build_reproducibly_and_bad_ones_are_said(recorded, tmp_path):
    """The table depends on the list alone (--threads, --memory); a repeated line is kept
    once; a line whose directory is not one of the tree's, or whose name no directory
    holds, is reported with the list's name and line and skipped, the build exit 0."""
    d, tree, hot = recorded
    listed = hot.read_text()
    extra = ["lib\tlookup", "absent/dir/x\tlookup", "lib/other1/x\tlookup",
             "lib/..\tlookup"]
    lst = tmp_path / "more.list"
    lst.write_text(listed + "".join(l + "\n" for l in extra))
    a = build_image(tree, tmp_path / "a.stp", "--level", "1", "--threads", "1",
                    "--hot-list", lst)
    b = build_image(tree, tmp_path / "b.stp", "--level", "1", "--threads", "2",
                    "--memory", "300M", "--hot-list", lst)
    assert open(a, "rb").read() == open(b, "rb").read()
    info = run([STIPPLE, "info", a]).stdout
    assert re.search(r"^lookups:\s+%d names" % len(lookup_lines(hot)), info, re.M), info
    first = len(listed.splitlines())
    r = run([MKSTIPPLE, "-q",
             "--level", "1", "--hot-list", lst, tree, tmp_path / "c.stp"])
    assert r.returncode == 0, r.stderr
    for n, why in ((first + 2, "its directory is not in the tree"),
                   (first + 3, "not in a directory"),
                   (first + 4, "not a name a directory holds")):
        assert "%s:%d: " % (lst, n) in r.stderr and why in r.stderr, r.stderr


LISTED = ["share/many/f%02d.xml" % i for i in range(30)]

LIST_WALK = r"""
import os, sys
root = sys.argv[1]
out = []
# a runtime that has stat'ed many files already (the daemon then sends a listing's
# entries with attributes)...
for i in range(20):
    out.append("%s %d" % (i, os.stat(os.path.join(root, "lib", "other%d" % i)).st_size))
# ...lists a directory and stats what it found, as LibreOffice does its toolbars
d = os.path.join(root, "share", "many")
for e in sorted(os.scandir(d), key=lambda e: e.name):
    out.append("%s %d" % (e.name, os.stat(os.path.join(d, e.name)).st_size))
print("\n".join(out))
"""


def list_walk(root):
    r = subprocess.run([sys.executable, "-c", LIST_WALK, os.fspath(root)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.needs_root
def test_names_met_in_listings_are_recorded(tmp_path):
    """A name the kernel learnt from a directory listing, then stat'ed, is recorded as a
    lookup too: recording sends listings without attributes, so that each such stat is a
    LOOKUP the recorder sees. The mount of the image built with the list then answers
    the same walk without any LOOKUP."""
    tree = make_tree(tmp_path)
    (tree / "share" / "many").mkdir()
    for i, p in enumerate(LISTED):
        (tree / p).write_bytes(b"<x/>" * (i + 1))
    hot = record(tree, tmp_path, list_walk)
    names = lookup_lines(hot)
    missing = [p for p in LISTED if p not in names]
    assert not missing, ("listed and stat'ed, not recorded", missing)
    image = build_image(tree, tmp_path / "hot.stp", "--level", "1", "--hot-list", hot)
    mark = drops()
    with mount_image(image, None, "--warm-workers", "2") as mnt:
        got, counts = traced(mnt, lambda: list_walk(mnt))
    assert got == list_walk(tree)
    with unless_dropped(mark):  # drop_caches=2 makes the kernel forget primed names
        assert counts.get("FUSE_LOOKUP", 0) == 0, counts


@pytest.mark.needs_root
def test_a_large_lookup_table_never_undoes_the_mount(tmp_path):
    """Priming 10000 names, each a few ms when the metadata exceeds meta_cache= (1M here,
    the metadata of 126000 entries is 14 MB), took longer than the mount's 10 s deadline,
    and a late priming undid the mount: "the daemon did not answer within 10 s" every
    time (review 4 #3). The lookups now stop at their own budget: the mount is live and
    answers."""
    tree = tmp_path / "tree"
    names = []
    for d in range(3000):
        sub = tree / ("d%04d" % d) / "sub00"
        sub.mkdir(parents=True)
        for f in range(40):
            (sub / ("file_%03d.js" % f)).touch()
        names += ["d%04d/sub00/file_%03d.js" % (d, (d * 7) % 40),
                  "d%04d/sub00/missing_%d.node" % (d, d % 3),
                  "d%04d/sub00/file_%03d.js" % (d, (d * 11 + 3) % 40)]
    names += ["d%04d/sub00/nothing_%d" % (d, k) for d in range(0, 3000, 3) for k in range(2)]
    (tree / "d0123" / "sub00" / "file_004.js").write_bytes(b"123/4\n")
    random.Random(4).shuffle(names)  # a start-up's order: no two names on one page
    hot = tmp_path / "hot.list"
    hot.write_text("".join("%s\tlookup\n" % n for n in names[:10000]))
    image = build_image(tree, tmp_path / "big.stp", "--level", "1", "--hot-list", hot)
    for _ in range(2):
        mnt = tmp_path / "mnt"
        mnt.mkdir(exist_ok=True)
        with mount_image(image, mnt, "-o", "meta_cache=1M", timeout=60) as m:
            with open(os.path.join(m, "d0123", "sub00", "file_004.js"), "rb") as f:
                assert f.read() == b"123/4\n"


OPEN_READ_ACCESS = r"""
import os, sys
p = os.path.join(sys.argv[1], "lib", "node_modules", "pkg", "index.js")
with open(p, "rb") as f:
    data = f.read()
print(len(data), os.access(p, os.R_OK), os.access(os.path.dirname(p), os.X_OK))
"""


@pytest.mark.needs_root
def test_priming_settles_open_flush_and_access(recorded):
    """A launch's first open, close and access(2) each cost a round trip the daemon
    answers "not supported" once a mount; priming makes them, so that a launch on the
    primed mount sends none. Without priming (--no-prime), the same reads send them."""
    d, tree, hot = recorded
    image = build_image(tree, d / "settle.stp", "--level", "1", "--hot-list", hot)
    want = "%d True True\n" % (tree / "lib/node_modules/pkg/index.js").stat().st_size

    def probe(mnt):
        r = subprocess.run([sys.executable, "-c", OPEN_READ_ACCESS, os.fspath(mnt)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    counts = {}
    for kind, extra in (("primed", []), ("unprimed", ["--no-prime"])):
        with mount_image(image, None, "--warm-workers", "2", *extra) as mnt:
            got, counts[kind] = traced(mnt, lambda: probe(mnt))
        assert got == want, (kind, got)
    settled = ("FUSE_OPEN", "FUSE_FLUSH", "FUSE_ACCESS")
    assert not any(counts["primed"].get(op) for op in settled), counts
    assert counts["unprimed"].get("FUSE_OPEN", 0) >= 1, counts


@pytest.mark.needs_root
def test_priming_opens_nothing_on_a_dev_mount(recorded):
    """Priming's settling open goes to a path the daemon names and whose kind it answers:
    with -o dev that may be a device node, whose open alone can act, by the priming
    child (review 5 #5). On a dev mount priming opens nothing: the launch's first open
    still reaches the daemon (it did not before: priming had made it)."""
    d, tree, hot = recorded
    image = build_image(tree, d / "settle-dev.stp", "--level", "1", "--hot-list", hot)
    with mount_image(image, None, "-o", "dev", "--warm-workers", "2") as mnt:
        assert "nodev" not in mounts.at(mnt).vfs_options, mounts.at(mnt).vfs_options
        got, counts = traced(mnt, lambda: open(os.path.join(
            mnt, "lib", "node_modules", "pkg", "index.js"), "rb").read())
    assert got == (tree / "lib/node_modules/pkg/index.js").read_bytes()
    assert counts.get("FUSE_OPEN", 0) >= 1, counts
