# SPDX-License-Identifier: MIT
"""Exit statuses that agree across the subcommands: a file named by an option or an
operand that is missing is a failure (1) everywhere, never a usage error (2); and
`extract --tar | head` ends as cat(1) does when its reader goes away."""

import os
import signal
import subprocess

import pytest

from conftest import MKSTIPPLE, STIPPLE, run


def missing_cases(image, tmp_path):
    nope = os.fspath(tmp_path / "no-such-file")
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    return {
        "check --key": (["check", "--key", nope, image], nope),
        "bench --key": (["bench", "--key", nope, image], nope),
        "verify PUBKEY": (["verify", image, nope], nope),
        "sign SECKEY": (["sign", image, nope], nope),
        "mount --verify": (["mount", "--verify", nope, image, mnt], nope),
        "info IMAGE": (["info", nope], nope),
        "ls IMAGE": (["ls", nope], nope),
        "cat IMAGE": (["cat", nope, "/x"], nope),
        "check IMAGE": (["check", nope], nope),
        "extract IMAGE": (["extract", nope, tmp_path / "out"], nope),
    }


@pytest.mark.parametrize("case", ["check --key", "bench --key", "verify PUBKEY",
                                  "sign SECKEY", "mount --verify", "info IMAGE",
                                  "ls IMAGE", "cat IMAGE", "check IMAGE", "extract IMAGE"])
def test_a_missing_file_is_a_failure_everywhere(gen_image, tmp_path, case):
    args, nope = missing_cases(gen_image, tmp_path)[case]
    r = run([STIPPLE, *args])
    assert r.returncode == 1, (case, r.returncode, r.stderr)
    assert nope in r.stderr and "No such file or directory" in r.stderr, r.stderr
    assert "usage:" not in r.stderr
    assert not os.path.exists(tmp_path / "out")


def closed_early(cmd):
    """Runs CMD, reads 100 bytes of its output and closes the pipe: (status, stderr)."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.read(100)
    p.stdout.close()
    err = p.stderr.read()
    return p.wait(timeout=120), err


def test_extract_tar_into_a_closed_pipe_ends_as_cat_does(gen_image):
    cat_status, cat_err = closed_early(["cat", gen_image, gen_image, gen_image])
    assert cat_status == -signal.SIGPIPE and cat_err == b""  # what cat(1) does
    status, err = closed_early([STIPPLE, "extract", "--tar", gen_image, "-"])
    assert (status, err) == (cat_status, b"")
    status, err = closed_early([STIPPLE, "cat", gen_image, "/files/large"])
    assert (status, err) == (cat_status, b"")


# mkstipple gives the same status as the stipple commands for a file an option names
# that is missing: 1, with the file named and no usage hint.
@pytest.mark.parametrize("option", ["--sign", "--hot-list", "--exclude-from", "-T", "-pf"])
def test_mkstipple_missing_option_file(option, tmp_path):
    missing = tmp_path / "missing"
    r = subprocess.run([MKSTIPPLE, option, str(missing), "/usr/share/doc/bash",
                        str(tmp_path / "out.stp")], capture_output=True, text=True)
    assert r.returncode == 1, (option, r.returncode, r.stderr)
    assert str(missing) in r.stderr and "No such file" in r.stderr
    assert "Try 'mkstipple --help'" not in r.stderr
    assert not (tmp_path / "out.stp").exists()
