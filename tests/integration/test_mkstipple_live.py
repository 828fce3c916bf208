# SPDX-License-Identifier: MIT
"""mkstipple on a tree that lives while it is packed (issue 29): every unreadable entry
reported in one pass, --ignore-failed-read as tar has it, a file appended to during the
build read again and, while it keeps changing, stored whole as it last read, with tar's
"file changed as we read it" and exit 1; and the progress drawn on a terminal only. Images
are read back by `stipple extract` and `stipple check`, and compared with the source."""

import os
import subprocess
import threading
import time

import pytest

import ptyutil
from conftest import MKSTIPPLE, STIPPLE, extract_image, run
from imageutil import FAST
from test_build import as_nobody, world_dir


pytestmark = pytest.mark.needs_root("needs root")


def unreadable_tree(d):
    """A tree with two unreadable files (one empty, one short), an unreadable directory
    and readable files; returns (SOURCE, the unreadable paths)."""
    src = os.path.join(d, "src")
    os.makedirs(os.path.join(src, "sub", "closed"))
    for rel, data in (("ok.txt", b"readable\n"), ("sub/ok2", b"x" * 5000),
                      ("sub/secret", b"root only\n"), ("empty-secret", b""),
                      ("sub/closed/inside", b"hidden\n")):
        with open(os.path.join(src, rel), "wb") as f:
            f.write(data)
    bad = ["sub/secret", "empty-secret", "sub/closed"]
    for rel in bad:
        os.chmod(os.path.join(src, rel), 0)
    out = os.path.join(d, "out")
    os.mkdir(out)
    os.chown(out, 65534, 65534)
    return src, bad


def test_every_unreadable_entry_in_one_pass():
    with world_dir() as d:
        src, bad = unreadable_tree(d)
        image = os.path.join(d, "out", "x.stipple")
        r = run(as_nobody([MKSTIPPLE, *FAST, src, image]))
        assert r.returncode == 1, "exit %d\n%s" % (r.returncode, r.stderr)
        for rel in bad:
            assert rel in r.stderr, "%s not named:\n%s" % (rel, r.stderr)
        assert os.listdir(os.path.join(d, "out")) == []


def test_ignore_failed_read_leaves_them_out(tmp_path):
    with world_dir() as d:
        src, bad = unreadable_tree(d)
        image = os.path.join(d, "out", "x.stipple")
        r = run(as_nobody([MKSTIPPLE, *FAST, "--ignore-failed-read", "--json", src, image]))
        assert r.returncode == 0, "exit %d\n%s" % (r.returncode, r.stderr)
        for rel in bad:
            assert rel in r.stderr, "%s not warned about:\n%s" % (rel, r.stderr)
        out = extract_image(image, tmp_path / "out")
        got = sorted(os.path.relpath(os.path.join(p, n), out)
                     for p, ds, fs in os.walk(out) for n in ds + fs)
        assert got == ["ok.txt", "sub", "sub/ok2"]
        assert (out / "sub" / "ok2").read_bytes() == b"x" * 5000
        assert '"left_out":3' in r.stdout and '"errors":0' in r.stdout, r.stdout


class Appender:
    """Appends numbered lines to PATH in a loop until stopped, as a log writer does."""

    def __init__(self, path):
        self.path, self.stop, self.n = path, threading.Event(), 0
        self.thread = threading.Thread(target=self.run)

    def run(self):
        with open(self.path, "ab", buffering=0) as f:
            while not self.stop.is_set():
                f.write(b"line %08d %s\n" % (self.n, b"x" * 200))
                self.n += 1
                time.sleep(0.0005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_file_appended_during_the_build(tmp_path):
    """A log appended to throughout the build: every run writes an image (the issue saw
    2 aborts in 3 runs), exits 0 or 1, and when 1, says which file changed; the image
    passes stipple check, the log in it is whole lines of what was written (a prefix of
    the file, of the size recorded), and the other files are intact."""
    src = tmp_path / "src"
    src.mkdir()
    big = os.urandom(1 << 20) * 6  # 6 MiB: the build takes a while
    (src / "data.bin").write_bytes(big)
    (src / "copy.bin").write_bytes(big)  # a copy: stored once, checked again
    log = src / "app.log"
    log.write_bytes(b"")
    codes = []
    for i in range(4):
        image = tmp_path / ("x%d.stipple" % i)
        with Appender(log):
            r = run([MKSTIPPLE, "--level", "6", "--block-size", "64K", "-t", "1", src, image])
        codes.append(r.returncode)
        assert r.returncode in (0, 1), "run %d exit %d:\n%s" % (i, r.returncode, r.stderr)
        if r.returncode == 1:
            assert "app.log: file changed as we read it" in r.stderr, r.stderr
        assert image.exists(), "run %d left no image:\n%s" % (i, r.stderr)
        run([STIPPLE, "check", image], check=True)
        out = extract_image(image, tmp_path / ("out%d" % i))
        got = (out / "app.log").read_bytes()
        assert log.read_bytes().startswith(got)
        assert (out / "data.bin").read_bytes() == big
        assert (out / "copy.bin").read_bytes() == big
    print("exit codes:", codes)


def test_file_rewritten_after_the_scan_is_read_again(tmp_path):
    """A file that changed once (between the scan and its reading) and then stays still
    is stored as it is now, without a warning: exit 0."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(1 << 20) * 8)
    (src / "late.txt").write_bytes(b"before\n")
    image = tmp_path / "x.stipple"
    p = subprocess.Popen([MKSTIPPLE, "--level", "9", "--block-size", "64K", "-t", "1",
                          src, image], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.3)  # the scan is done, the packing of big.bin is not
    (src / "late.txt").write_bytes(b"after, and longer\n")
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    assert b"changed" not in err
    got = (extract_image(image, tmp_path / "out") / "late.txt").read_bytes()
    assert got in (b"before\n", b"after, and longer\n")  # never a mix of the two


def run_on_pty(cmd):
    """Runs CMD with stderr on a pseudo-terminal; returns (exit code, what it drew)."""
    code, drawn, _ = ptyutil.run_on_pty(cmd)
    return code, drawn.decode(errors="replace")


@pytest.fixture
def slow_src(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / ("f%d" % i)).write_bytes(os.urandom(1 << 20) * 2)
    return src


def test_progress_on_a_terminal_only(slow_src, tmp_path):
    cmd = [MKSTIPPLE, "--level", "9", "--block-size", "64K", "-t", "1", slow_src]
    code, drawn = run_on_pty(cmd + [tmp_path / "a.stipple"])
    assert code == 0, drawn
    for phase in ("scan", "compress:", "metadata"):
        assert "mkstipple: " + phase in drawn, drawn
    assert "%" in drawn and "ETA" in drawn and "/s" in drawn, drawn
    assert "\r" in drawn  # redrawn in place
    # 100% only at the end of the compress phase: never before the last redraw of it
    compress = [s for s in drawn.split("\r") if "compress:" in s]
    assert all("100%" not in s for s in compress[:-1]), compress
    # piped: nothing but the summary (on stdout), nothing on stderr
    r = run(cmd + [tmp_path / "b.stipple"])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # -q on a terminal: nothing drawn
    code, drawn = run_on_pty(cmd + ["-q", tmp_path / "c.stipple"])
    assert code == 0 and drawn == "", drawn
