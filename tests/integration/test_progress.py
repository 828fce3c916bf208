# SPDX-License-Identifier: MIT
"""Progress on a terminal for check, extract and extract --tar: stderr is a pty (Python's
pty module); the line is redrawn in place with the bytes, the percentage, the rate and
the time left, at most about 5 times a second, and cleared at the end; -q silences it,
and nothing is drawn when stderr is not a terminal."""

import os
import re
import subprocess

import pytest

import ptyutil
from conftest import PYTHON_LIB, STIPPLE, build_image

LINE = re.compile(rb"\r(check|extract): ([\d.]+ \S+) of ([\d.]+ \S+) \((\d+)%\), (\S+)/s, "
                  rb"(\S+) left\x1b\[K")


@pytest.fixture(scope="module")
def big_image(tmp_path_factory):
    return build_image(PYTHON_LIB, tmp_path_factory.mktemp("progress") / "py.stipple",
                       "--level", "3", "--block-size", "1M")


def run_on_pty(args):
    """Runs stipple ARGS with stderr on a pty: (status, what the terminal got, seconds)."""
    return ptyutil.run_on_pty([STIPPLE, *args])


@pytest.mark.parametrize("cmd", ["check", "extract", "tar"])
def test_progress_on_a_terminal(big_image, tmp_path, cmd):
    args = {"check": ["check", big_image], "extract": ["extract", big_image, tmp_path / "o"],
            "tar": ["extract", "--tar", big_image, tmp_path / "o.tar"]}[cmd]
    status, got, secs = run_on_pty(args)
    assert status == 0, got
    lines = LINE.findall(got)
    assert lines, got[:2000]
    assert all(name == (b"check" if cmd == "check" else b"extract") for name, *_ in lines)
    total = lines[0][2]
    assert all(t == total for _, _, t, *_ in lines)
    assert total.startswith(b"%.1f" % (os.path.getsize(big_image) / 2**20)) or b"MiB" in total
    pcts = [int(p) for _, _, _, p, *_ in lines]
    assert pcts == sorted(pcts) and pcts[-1] <= 99
    assert len(lines) <= secs * 5 + 2, (len(lines), secs)  # at most ~5 a second
    # cleared at the end: nothing of the line is left on the screen
    assert got.rstrip(b"\r\n").endswith(b"\r\x1b[K") or b"\r\x1b[K" in got[-200:], got[-300:]


def test_quiet_and_not_a_terminal_draw_nothing(big_image, tmp_path):
    status, got, _ = run_on_pty(["check", "-q", big_image])
    assert status == 0 and got == b""
    status, got, _ = run_on_pty(["extract", "-q", big_image, tmp_path / "o"])
    assert status == 0 and got == b""
    r = subprocess.run([STIPPLE, "check", big_image], capture_output=True)
    assert r.returncode == 0 and r.stderr == b""
