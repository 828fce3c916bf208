# SPDX-License-Identifier: MIT
"""Fixtures shared by the integration tests.

The programs come from $STIPPLE_BUILD (default <repo>/build), which tests/run builds.
Fixtures: mkstipple, stipple, mount_stipple (paths), gen_tree (a session-wide tree from
treeutil.make_tree, never to be modified), gen_tree_info, gen_image (that tree in 64 KiB
blocks, session-wide, never to be modified), image_of (builds an image into tmp_path), and
mounted (a context manager that mounts an image and always unmounts).
Marker: @pytest.mark.needs_root("why"), for a test that is skipped unless run as root.
Helpers importable by tests: run(), read_file(), build_image() (imageutil.build, where
every test image is built), mount_image(), extract_image(), is_mounted() and unmount()
(the mount table is read through libmount: mounts.py); IS_ROOT; PYTHON, PYTHON_LIB and
PYTHON_SONAME, Debian's interpreter, its standard library (a real tree the tests pack)
and libpython.
"""

import contextlib
import os
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import mounts  # noqa: E402
import treeutil  # noqa: E402
from treeutil import IS_ROOT, read_file  # noqa: E402,F401
import imageutil  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("STIPPLE_BUILD", os.path.join(REPO, "build")))
MKSTIPPLE = os.path.join(BUILD, "builder", "mkstipple")
STIPPLE = os.path.join(BUILD, "mounthelper", "stipple")
MOUNT_STIPPLE = os.path.join(BUILD, "mounthelper", "mount.stipple")
# Every command of `stipple` but mount. Without /proc, a `stipple` in the build tree cannot
# tell that it runs from there (mounthelper/mount/progpath.h) and looks for the installed
# readers: tests without /proc run these directly (test_deb runs the installed pair).
STIPPLE_READERS = os.path.join(BUILD, "mounthelper", "stipple-readers")


def _system_python():
    """Debian's interpreter (the one with pytest, which tests/run uses), its standard
    library folder and libpython's soname, asked of it rather than named by version."""
    python = os.path.realpath("/usr/bin/python3")
    code = ("import sysconfig; print(sysconfig.get_path('stdlib')); "
            "print(sysconfig.get_config_var('INSTSONAME'))")
    out = subprocess.run([python, "-c", code], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, check=True).stdout.split()
    return python, out[0], out[1]


# PYTHON_LIB's folder name (python3.X) is where PYTHONHOME=PREFIX makes PYTHON look:
# PREFIX/lib/python3.X.
PYTHON, PYTHON_LIB, PYTHON_SONAME = _system_python()


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_root(reason): skipped unless the tests run as "
                            "root (mounts, other owners, other users); REASON says which")


def pytest_runtest_setup(item):
    mark = item.get_closest_marker("needs_root")
    if mark is not None and not IS_ROOT:
        pytest.skip("needs root: %s" % (mark.args[0] if mark.args else "it mounts"))


def run(cmd, timeout=600, check=False, **kw):
    """Runs CMD (a list) capturing text output; never reads stdin. CHECK asserts exit 0
    with the command's stderr in the failure message."""
    cmd = [os.fspath(c) for c in cmd]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                       errors="replace", **kw)
    if check:
        assert r.returncode == 0, "%s exited %d:\n%s%s" % (
            " ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-4000:])
    return r


def linked(exe):
    """The shared libraries the dynamic loader maps for program EXE, as ldd names them
    ("libfuse3.so.3"): those its ELF header names and theirs."""
    r = run(["ldd", exe], check=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def _need(path):
    if not os.access(path, os.X_OK):
        pytest.skip("%s is not built (run tests/run, or set STIPPLE_BUILD)" % path)
    return path


@pytest.fixture(scope="session")
def mkstipple():
    return _need(MKSTIPPLE)


@pytest.fixture(scope="session")
def stipple():
    return _need(STIPPLE)


@pytest.fixture(scope="session")
def mount_stipple():
    return _need(MOUNT_STIPPLE)


@pytest.fixture(scope="session")
def gen_tree_info(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen") / "tree"
    info = treeutil.make_tree(root)
    info["path"] = root
    return info


@pytest.fixture(scope="session")
def gen_tree(gen_tree_info):
    """The generated tree (treeutil.make_tree), shared by the session: do not modify."""
    return gen_tree_info["path"]


# Test images are built in one place: imageutil.build (imageutil.mkstipple for a test
# that looks at the finished run). build_image is its name here.
build_image = imageutil.build


@pytest.fixture(scope="session")
def gen_image(gen_tree, tmp_path_factory):
    """The generated tree in 64 KiB blocks: many blocks, files across block edges. Shared
    by the session: do not modify."""
    image = tmp_path_factory.mktemp("gen-image") / "gen.stipple"
    return build_image(gen_tree, image, *imageutil.FAST)


@pytest.fixture
def image_of(tmp_path):
    """image_of(tree, *mkstipple_args, name=None): builds an image of TREE in tmp_path
    (default args: none, so pass --level 3 / --block-size for speed) and returns its path."""
    count = [0]

    def build(tree, *args, name=None):
        count[0] += 1
        image = tmp_path / (name or "image-%d.stipple" % count[0])
        return build_image(tree, image, *args)

    return build


def process_alive(pid):
    """Whether process PID runs (not gone, not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def is_mounted(path):
    """Whether something is mounted at PATH (mounts.py: libmount's reading)."""
    return mounts.at(path) is not None


def unmount(path):
    """Unmounts PATH however possible: umount, then a lazy fusermount3."""
    for cmd in (["umount", path], ["fusermount3", "-u", "-z", path], ["umount", "-l", path]):
        if not is_mounted(path):
            return
        subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    deadline = time.monotonic() + 10
    while is_mounted(path) and time.monotonic() < deadline:
        time.sleep(0.1)


@contextlib.contextmanager
def mount_image(image, mountpoint=None, *args, timeout=60, wrapper=()):
    """Runs `stipple mount ARGS IMAGE DIR` (DIR: a new temporary directory when not given;
    run by the WRAPPER command when given, e.g. prlimit), waits until DIR is a mount point,
    yields DIR, and always unmounts afterwards."""
    made = mountpoint is None
    if made:
        mountpoint = tempfile.mkdtemp(prefix="stipple-mnt-")
    mountpoint = os.fspath(mountpoint)
    try:
        r = run([*wrapper, _need(STIPPLE), "mount", *args, image, mountpoint], timeout=timeout)
        assert r.returncode == 0, "stipple mount %s exited %d:\n%s" % (
            image, r.returncode, r.stderr[-4000:])
        deadline = time.monotonic() + 10
        while not is_mounted(mountpoint):
            assert time.monotonic() < deadline, "%s is not mounted after stipple mount" % mountpoint
            time.sleep(0.05)
        yield mountpoint
    finally:
        unmount(mountpoint)
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(mountpoint)


def mount_status(mnt):
    """The daemon's key=value status at mount MNT (its user.stipple.status attribute,
    status.h), every value a str."""
    text = os.getxattr(mnt, "user.stipple.status").decode()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture
def mounted():
    """mounted(image, mountpoint=None, *mount_args): the mount_image context manager."""
    return mount_image


def extract_image(image, dest):
    """Runs `stipple extract IMAGE DEST` and asserts it succeeded; returns DEST."""
    r = run([_need(STIPPLE), "extract", image, dest])
    assert r.returncode == 0, "stipple extract %s exited %d:\n%s" % (
        image, r.returncode, r.stderr[-4000:])
    return dest
