# SPDX-License-Identifier: MIT
"""mkstipple in pipelines (issue 29): -T/--files-from and --null, pseudo definitions (-p,
-pf: the m type), -v and --dry-run, --mtime's date forms, one-line usage errors and the
hints for mksquashfs's options, a symlink as SOURCE, --json and -q. Each image is read
back by `stipple extract` as root and compared with the source tree (os.lstat), or the
output with what the source tree holds, never with mkstipple's own earlier output."""

import calendar
import json
import os
import stat
import subprocess

import pytest

from conftest import MKSTIPPLE, build_image, extract_image, run
from imageutil import FAST


pytestmark = pytest.mark.needs_root("needs root to extract owners")


def walk(root):
    """Paths of every entry below ROOT, relative to it, directories with a '/' after."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            out.append(rel + "/" if name in dirs and not os.path.islink(
                os.path.join(dirpath, name)) else rel)
    return sorted(out)


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    for d in ("etc/conf.d", "usr/bin", "usr/lib/deep", "var/log", "sp ace"):
        os.makedirs(root / d)
    files = {"etc/passwd": b"root:x:0:0\n", "etc/conf.d/a.conf": b"a=1\n",
             "usr/bin/tool": b"\x7fELF" + b"t" * 3000, "usr/lib/deep/lib.so": b"L" * 9000,
             "var/log/old.log": b"log\n" * 100, "sp ace/na me": b"spaced\n",
             "top": b"top\n"}
    for rel, data in files.items():
        (root / rel).write_bytes(data)
        os.chmod(root / rel, 0o644)
    os.link(root / "top", root / "usr" / "top-link")
    os.symlink("../etc/passwd", root / "usr" / "pw")
    return root


def build(src, image, *args, ok=True):
    r = run([MKSTIPPLE, *FAST, *args, src, image])
    if ok:
        assert r.returncode == 0, "mkstipple %s exited %d:\n%s" % (args, r.returncode,
                                                                   r.stderr)
    return r


def paths_in(image, tmp_path, name="out"):
    return walk(extract_image(image, tmp_path / name))


def expected_for(src, listed):
    """What -T LISTED should pack, from the source tree: each listed path, everything
    below it, and the directories above it."""
    want = set()
    for rel in walk(src):
        bare = rel.rstrip("/")
        for p in listed:
            if bare == p or bare.startswith(p + "/") or p.startswith(bare + "/"):
                want.add(rel)
    return sorted(want)


@pytest.mark.parametrize("null", [False, True])
def test_files_from(src, tmp_path, null):
    listed = ["etc/conf.d", "usr/bin/tool", "sp ace/na me"]
    spelled = ["./etc/conf.d/", "usr//bin/tool", "/sp ace/na me"]  # as tar takes them
    lst = tmp_path / "list"
    lst.write_bytes(b"".join(p.encode() + (b"\0" if null else b"\n") for p in spelled))
    image = tmp_path / "x.stipple"
    build(src, image, "-T", lst, *(["--null"] if null else []))
    assert paths_in(image, tmp_path) == expected_for(src, listed)


def test_files_from_missing_path(src, tmp_path):
    lst = tmp_path / "list"
    lst.write_text("etc/passwd\nno/such/file\nalso-missing\n")
    image = tmp_path / "x.stipple"
    r = build(src, image, "-T", lst, ok=False)
    assert r.returncode == 1, r.stderr
    assert "no/such/file" in r.stderr and "also-missing" in r.stderr, r.stderr
    assert not image.exists()
    r = build(src, image, "-T", lst, "--ignore-failed-read")
    assert paths_in(image, tmp_path) == ["etc/", "etc/passwd"]


def test_files_from_refuses_dotdot(src, tmp_path):
    lst = tmp_path / "list"
    lst.write_text("etc/../../outside\n")
    r = build(src, tmp_path / "x.stipple", "-T", lst, ok=False)
    assert r.returncode == 1 and "outside" in r.stderr, r.stderr


def test_pseudo_mode_and_owner(src, tmp_path):
    pf = tmp_path / "pseudo"
    pf.write_text("# mksquashfs style\n"
                  "/usr/bin/tool m 4755 0 0\n"
                  "\"sp ace/na me\" m 600 1234 5678\n"
                  "top m 640 root 42\n"
                  "etc m 700 7 8\n")
    image = tmp_path / "x.stipple"
    build(src, image, "--all-root", "-pf", pf, "-p", "var/log/old.log m 0444 99 98",
          "-p", "/ m 0750 3 4")
    out = extract_image(image, tmp_path / "out")
    st = os.lstat(out)  # the root, as mksquashfs's -root-mode and -root-uid set it
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o750, 3, 4)
    want = {"usr/bin/tool": (0o4755, 0, 0), "sp ace/na me": (0o600, 1234, 5678),
            "top": (0o640, 0, 42), "usr/top-link": (0o640, 0, 42),  # the same inode
            "etc": (0o700, 7, 8), "var/log/old.log": (0o444, 99, 98),
            "etc/passwd": (0o644, 0, 0)}  # --all-root, no definition
    for rel, (mode, uid, gid) in want.items():
        st = os.lstat(out / rel)
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (mode, uid, gid), rel
    assert stat.S_ISDIR(os.lstat(out / "etc").st_mode)


@pytest.mark.parametrize("definition, code, named", [
    ("top d 755 0 0", 2, "only the m type"),
    ("top m 9755 0 0", 2, "MODE"),
    ("top m 755 no-such-user-xyz 0", 2, "UID"),
    ("top m 755 0", 2, "GID"),
    ("nowhere m 755 0 0", 1, "nowhere"),
])
def test_pseudo_refused(src, tmp_path, definition, code, named):
    image = tmp_path / "x.stipple"
    r = build(src, image, "-p", definition, ok=False)
    assert r.returncode == code, r.stderr
    assert named in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == (2 if code == 2 else 1), r.stderr
    assert not image.exists()


def test_verbose_lists_every_entry(src, tmp_path):
    image = tmp_path / "x.stipple"
    r = build(src, image, "-v", "--exclude", "*.log")
    listed = sorted(r.stdout.splitlines()[:-1])  # the summary comes last
    want = [p for p in walk(src) if not p.endswith(".log")]
    assert listed == want
    assert paths_in(image, tmp_path) == want


def test_dry_run_writes_nothing(src, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = run([MKSTIPPLE, "--dry-run", "-v", src, out / "x.stipple"])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()[:-1]) == walk(src)
    assert os.listdir(out) == []
    r = run([MKSTIPPLE, "-n", "--json", src])  # no IMAGE needed
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dry_run"] is True and doc["image"] is None and doc["image_bytes"] is None
    assert doc["bytes_in"] == sum(os.lstat(os.path.join(src, p)).st_size for p in walk(src)
                                  if os.path.isfile(os.path.join(src, p))
                                  and not os.path.islink(os.path.join(src, p))
                                  and p != "usr/top-link")


def epoch(*t, east=0):
    return calendar.timegm(t) - east


@pytest.mark.parametrize("value, want", [
    ("@1700000000", 1700000000),
    ("1700000000", 1700000000),
    ("2024-01-02", epoch(2024, 1, 2, 0, 0, 0)),
    ("2024-01-02 03:04:05", epoch(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02T03:04:05Z", epoch(2024, 1, 2, 3, 4, 5)),
    ("2024-01-02 03:04", epoch(2024, 1, 2, 3, 4, 0)),
    ("2024-01-02 03:04:05 +0100", epoch(2024, 1, 2, 3, 4, 5, east=3600)),
    ("2024-01-02T03:04:05-05:30", epoch(2024, 1, 2, 3, 4, 5, east=-(5 * 3600 + 1800))),
    ("2024-01-02 03:04:05.75 UTC", epoch(2024, 1, 2, 3, 4, 5)),
    ("REF", 1234567890),
])
def test_mtime_forms(src, tmp_path, value, want):
    if value == "REF":  # tar's rule: a value starting with / or . is a file
        ref = tmp_path / "ref"
        ref.write_text("r")
        os.utime(ref, (1234567890, 1234567890))
        value = str(ref)
    image = tmp_path / "x.stipple"
    build(src, image, "--mtime", value)
    out = extract_image(image, tmp_path / "out")
    for rel in ("top", "etc", "usr/pw"):
        assert os.lstat(out / rel).st_mtime == want, (value, rel)


def test_mtime_relative_file(src, tmp_path):
    ref = tmp_path / "ref"
    ref.write_text("r")
    os.utime(ref, (1111111111, 1111111111))
    image = tmp_path / "x.stipple"
    r = run([MKSTIPPLE, *FAST, "--mtime", "./ref", src, image], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.lstat(extract_image(image, tmp_path / "out") / "top").st_mtime == 1111111111


@pytest.mark.parametrize("value", ["2024-13-01", "2024-01-02 25:00:00", "yesterday",
                                   "2024-01-02 03:04:05 +2500", "./no-such-ref-file"])
def test_mtime_refused(src, tmp_path, value):
    r = build(src, tmp_path / "x.stipple", "--mtime", value, ok=False)
    assert r.returncode == 2 and "--mtime" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 2, r.stderr  # and the hint


@pytest.mark.parametrize("args, names", [
    (["-comp", "xz"], "--level"),
    (["-all-root"], "--all-root"),
    (["-e", "x"], "--exclude"),
    (["-noappend"], "new image"),
    (["-Xcompression-level", "9"], "--level"),
    (["-processors", "2"], "--threads"),
    (["-mem", "1G"], "--memory"),
    (["-ef", "list"], "--exclude-from"),
    (["-force-uid", "0"], "--uid"),
    (["--no-such-option"], "--no-such-option"),
    (["-z"], "-z"),
    (["-root-mode", "755"], "-p '/ m"),
    (["-no-duplicates"], "stored once"),
    (["--level", "99"], "--level"),
    (["--mtime", "tomorrow"], "--mtime"),
])
def test_usage_error_is_one_line_and_a_hint(src, tmp_path, args, names):
    r = run([MKSTIPPLE, *args, src, tmp_path / "x.stipple"])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 2 and names in lines[0], r.stderr
    assert lines[0].startswith("mkstipple: ")
    assert lines[1] == "Try 'mkstipple --help' for more information."
    assert not (tmp_path / "x.stipple").exists()


@pytest.mark.parametrize("args, named", [(["--mtime"], "--mtime needs a value"),
                                         (["-T"], "-T needs a value"),
                                         (["--quiet=yes"], "--quiet=yes")])
def test_option_at_the_end_or_with_a_value_it_takes_not(src, tmp_path, args, named):
    r = run([MKSTIPPLE, src, tmp_path / "x.stipple", *args])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 2 and named in lines[0], r.stderr


@pytest.mark.parametrize("operands", [[], ["only-source"], ["a", "b", "c"]])
def test_missing_operands_one_line(operands):
    r = run([MKSTIPPLE, *operands])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 2, r.stderr


def test_mksquashfs_pf_and_b_are_taken(src, tmp_path):
    """-b and -pf mean the same in both: they are taken, not refused."""
    pf = tmp_path / "pseudo"
    pf.write_text("top m 600 5 6\n")
    image = tmp_path / "x.stipple"
    build_image(src, image, "-l", "3", "-b", "128K", "-pf", pf, quiet=False)
    st = os.lstat(extract_image(image, tmp_path / "out") / "top")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, 5, 6)


def test_symlink_source_is_followed(src, tmp_path):
    link = tmp_path / "lib64"
    os.symlink(src, link)
    image = tmp_path / "x.stipple"
    build(link, image)
    out = extract_image(image, tmp_path / "out")
    assert walk(out) == walk(src)
    assert (out / "top").read_bytes() == (src / "top").read_bytes()
    assert os.path.islink(out / "usr" / "pw")  # below the top nothing is followed


def test_json_summary(src, tmp_path):
    image = tmp_path / "x.stipple"
    r = build(src, image, "--json")
    doc = json.loads(r.stdout)
    regular = {os.lstat(os.path.join(src, p)).st_ino: os.lstat(os.path.join(src, p)).st_size
               for p in walk(src) if stat.S_ISREG(os.lstat(os.path.join(src, p)).st_mode)}
    assert doc["image"] == str(image) and doc["dry_run"] is False
    assert doc["files"] == len(regular)
    assert doc["bytes_in"] == sum(regular.values())
    assert doc["inodes"] == len({os.lstat(os.path.join(src, p)).st_ino
                                 for p in walk(src)}) + 1  # and the root
    assert doc["image_bytes"] == os.path.getsize(image)
    assert abs(doc["ratio"] - doc["image_bytes"] / doc["bytes_in"]) < 1e-3
    for k in ("left_out", "changed", "warnings", "errors"):
        assert doc[k] == 0, k
    assert r.stderr == ""
    # -q keeps the JSON (asked for) and nothing else; to standard output, on stderr
    r = subprocess.run([MKSTIPPLE, *FAST, "-q", "--json", src, "-"], capture_output=True,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0
    assert json.loads(r.stderr)["image"] == "-"
    assert len(r.stdout) == json.loads(r.stderr)["image_bytes"]


def test_quiet_prints_nothing(src, tmp_path):
    r = build(src, tmp_path / "x.stipple", "-q")
    assert r.stdout == "" and r.stderr == ""
