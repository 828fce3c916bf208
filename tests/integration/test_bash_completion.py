# SPDX-License-Identifier: MIT
"""The bash completion of stipple, mkstipple and mount.stipple: meson installs one file and
its links where bash-completion looks, and bash, with bash-completion loaded, completes
commands, options, option values and mount options from it. The functions are driven as
bash does on TAB (COMP_WORDS, COMP_CWORD), and the candidates compared with what the
programs' --help lists."""

import json
import os
import re
import subprocess

import pytest

from conftest import BUILD, MKSTIPPLE, REPO, STIPPLE, run

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"
OURS = os.path.join(REPO, "mounthelper", "bash-completion", "stipple")

# Prints the candidates for the words given, one per line.
DRIVER = r'''
source %s
source "$1"
shift
fn=$1
shift
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
"$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
printf '%%s\n' "${COMPREPLY[@]}"
''' % BASH_COMPLETION


@pytest.fixture(scope="module")
def complete():
    if not os.path.exists(BASH_COMPLETION):
        pytest.skip("needs bash-completion (%s)" % BASH_COMPLETION)
    for prog in (STIPPLE, MKSTIPPLE):
        if not os.access(prog, os.X_OK):
            pytest.skip("%s is not built" % prog)

    def candidates(fn, *words, cwd=None):
        r = subprocess.run(["bash", "-c", DRIVER, "driver", OURS, fn, *map(str, words)],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           cwd=cwd, timeout=60)
        assert r.returncode == 0, r.stderr
        return [c for c in r.stdout.split("\n") if c]
    return candidates


def help_options(*cmd):
    """The long options a --help text lists at the start of its option lines."""
    text = run([*cmd, "--help"], check=True).stdout
    return {m.group(1) for m in re.finditer(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", text, re.M)}


def test_subcommand(complete):
    assert complete("_stipple", STIPPLE, "ex") == ["extract"]
    listed = run([STIPPLE, "--help"], check=True).stdout.split("commands:")[1].split("\n\n")[0]
    names = [ln.split()[0] for ln in listed.strip().splitlines()]
    assert "mount" in names and "check" in names
    assert complete("_stipple", STIPPLE, "")[:len(names)] == names


def test_subcommand_options(complete):
    got = set(complete("_stipple", STIPPLE, "mount", "--"))
    want = help_options(STIPPLE, "mount")
    assert "--cache-budget" in want and got >= want, want - got
    assert complete("_stipple", STIPPLE, "check", "--ke") == ["--key"]


def test_mkstipple_options(complete):
    got = set(complete("_mkstipple", MKSTIPPLE, "--"))
    want = help_options(MKSTIPPLE)
    assert {"--level", "--hot-list", "--exclude-from"} <= want and got >= want, want - got
    assert complete("_mkstipple", MKSTIPPLE, "--hot-l") == ["--hot-list"]


def test_option_values(complete, tmp_path):
    (tmp_path / "hot.txt").write_text("x\n")
    (tmp_path / "sub").mkdir()
    # a FILE value is a file name; a number or size gets no candidates
    assert complete("_mkstipple", MKSTIPPLE, "--hot-list", "ho", cwd=tmp_path) == ["hot.txt"]
    assert complete("_mkstipple", MKSTIPPLE, "--level", "", cwd=tmp_path) == []
    assert complete("_mkstipple", MKSTIPPLE, "-b", "", cwd=tmp_path) == []
    assert complete("_mkstipple", MKSTIPPLE, "--gid", "", cwd=tmp_path) == []
    # the DIR of `stipple mount IMAGE DIR` is a directory
    assert complete("_stipple", STIPPLE, "mount", "hot.txt", "", cwd=tmp_path) == ["sub"]
    assert complete("_stipple", STIPPLE, "mount", "h", cwd=tmp_path) == ["hot.txt"]
    # and so is the DIR of `stipple publish IMAGE DIR`; its --name takes free text
    assert complete("_stipple", STIPPLE, "publish", "hot.txt", "", cwd=tmp_path) == ["sub"]
    assert complete("_stipple", STIPPLE, "publish", "--name", "", cwd=tmp_path) == []
    assert complete("_stipple", STIPPLE, "publish", "--na") == ["--name"]


def test_mount_options(complete):
    assert complete("_stipple", STIPPLE, "mount", "-o", "cache_b") == ["cache_budget="]
    assert complete("_mount_stipple", "mount.stipple", "a", "b", "-o", "ro,sandbox=l") == \
        ["ro,sandbox=log"]
    assert complete("_mount_stipple", "mount.stipple", "a", "b", "-t", "fu") == ["fuse.stipple"]


def test_installed_where_bash_completion_looks(tmp_path):
    """meson installs the file and one link per program, under the prefix."""
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        pytest.skip("no meson build in %s" % BUILD)
    r = run(["meson", "introspect", "--installed", BUILD], check=True)
    installed = [dst for dst in json.loads(r.stdout).values()
                 if "/bash-completion/completions/" in dst]
    assert any(dst.endswith("/completions/stipple") for dst in installed), installed
    dest = tmp_path / "root"
    run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", dest],
        check=True)
    prefix = run(["meson", "introspect", "--buildoptions", BUILD], check=True).stdout
    prefix = next(o["value"] for o in json.loads(prefix) if o["name"] == "prefix")
    cdir = dest / prefix.lstrip("/") / "share" / "bash-completion" / "completions"
    assert (cdir / "stipple").read_bytes() == open(OURS, "rb").read()
    for name in ("mkstipple", "mount.stipple", "mount.fuse.stipple"):
        assert os.readlink(cdir / name) == "stipple", name
