# SPDX-License-Identifier: MIT
"""--version and -V: stipple, every stipple subcommand (as `stipple --help` lists them)
and mkstipple print "PROGRAM VERSION" on stdout and exit 0, VERSION being the one
meson.build declares."""

import os
import re

import pytest

from conftest import REPO, run


def project_version():
    with open(os.path.join(REPO, "meson.build")) as f:
        m = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", f.read(), re.S)
    assert m, "no version in meson.build"
    return m.group(1)


def subcommands(stipple):
    text = run([stipple, "--help"], check=True).stdout
    listed = text.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    names = [ln.split()[0] for ln in listed.splitlines() if ln.strip()]
    assert {"mount", "info", "check", "extract"} <= set(names), names
    return names


def check_version(cmd, program):
    for flag in ("--version", "-V"):
        r = run([*cmd, flag])
        assert r.returncode == 0, (cmd, flag, r.stderr)
        assert r.stdout == "%s %s\n" % (program, project_version()), (cmd, flag, r.stdout)
        assert r.stderr == "", (cmd, flag, r.stderr)


def test_stipple_version(stipple):
    check_version([stipple], "stipple")


def test_every_subcommand_has_version(stipple):
    for name in subcommands(stipple):
        check_version([stipple, name], "stipple")


def test_mkstipple_version(mkstipple):
    check_version([mkstipple], "mkstipple")


def test_version_is_not_an_operand(stipple, tmp_path):
    """-V after other options is still the version, never an image named -V."""
    r = run([stipple, "ls", "-l", "-V"], cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("stipple "), r.stderr
