# SPDX-License-Identifier: MIT
"""mount.stipple starts without libcrypto: the loader maps none for it (ldd), a local mount's
monitor has none mapped (the kernel's /proc/PID/maps) and is `stipple` itself, which execs
nothing; a verify= mount's monitor is mount.stipple-checked, with libcrypto, and serves
every byte: mount.stipple execs it (strace), `stipple mount` at once. URL mounts through the twin are covered by test_http.py and test_published.py."""

import os
import re
import shutil

import pytest

from conftest import BUILD, MOUNT_STIPPLE, STIPPLE, linked, read_file, run, unmount
from test_mount import foreground_mount
from test_mount_verify import assert_tree, signed  # noqa: F401 (a fixture)

CHECKED = os.path.join(BUILD, "mounthelper", "mount.stipple-checked")


def test_helper_needs_no_libcrypto():
    libs = linked(MOUNT_STIPPLE)
    assert "libfuse3.so.3" in libs, libs  # ldd read the right program
    assert not [lib for lib in libs if lib.startswith("libcrypto")], libs
    assert [lib for lib in linked(CHECKED) if lib.startswith("libcrypto")]


def monitor_of(fg):
    """What the foreground monitor runs: its executable and the libraries it has mapped."""
    pid = fg.proc.pid
    maps = read_file("/proc/%d/maps" % pid).decode()
    libs = {os.path.basename(ln.split()[-1]) for ln in maps.splitlines() if ".so" in ln}
    return os.readlink("/proc/%d/exe" % pid), libs


def has(libs, name):
    """Whether LIBS (file names, libfoo.so.1.2.3) hold library NAME (libfoo)."""
    return any(lib.startswith(name + ".so") for lib in libs)


@pytest.mark.needs_root("mounts")
def test_local_mount_runs_without_libcrypto(signed, tmp_path):  # noqa: F811
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    with foreground_mount(signed["unsigned"], mnt) as fg:
        exe, libs = monitor_of(fg)
        # the monitor runs in `stipple mount`'s own process: no second program to start
        assert exe == os.path.realpath(STIPPLE)
        assert has(libs, "libfuse3"), libs  # the maps read are the monitor's
        assert not has(libs, "libcrypto") and not has(libs, "libjansson"), libs
        # nor libmount (with libblkid, libselinux, pcre2): about 2 ms of every mount
        assert not has(libs, "libmount") and not has(libs, "libblkid"), libs
        assert_tree(mnt, signed)


@pytest.mark.needs_root("mounts")
def test_verify_mount_runs_the_checked_helper(signed, tmp_path):  # noqa: F811
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    with foreground_mount(signed["image"], mnt, "-o", "verify=" + signed["key"].pub) as fg:
        exe, libs = monitor_of(fg)
        assert exe == os.path.realpath(CHECKED)
        assert has(libs, "libcrypto"), libs
        assert_tree(mnt, signed)


def execs_of(mnt, *args):
    """The programs mount.stipple's own process runs (strace of execve, children not
    followed), mounting on MNT with ARGS; unmounted after."""
    log = mnt + ".strace"
    try:
        r = run(["strace", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", log,
                 MOUNT_STIPPLE, *args], timeout=60)
        assert r.returncode == 0, r.stderr
        return re.findall(r'^execve\("([^"]+)"', read_file(log).decode(), re.M)
    finally:
        unmount(mnt)


@pytest.mark.needs_root("mounts")
def test_helper_execs_the_checked_one_for_verify_only(signed, tmp_path):  # noqa: F811
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    assert execs_of(mnt, signed["unsigned"], mnt) == [MOUNT_STIPPLE]
    assert execs_of(mnt, signed["image"], mnt, "-o", "verify=" + signed["key"].pub) == [
        MOUNT_STIPPLE, os.path.realpath(CHECKED)]
