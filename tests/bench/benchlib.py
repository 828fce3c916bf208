# SPDX-License-Identifier: MIT
"""Helpers shared by the Python benchmarks in tests/bench (mount_bench.py,
random_read_bench.py and others): running commands, mounting and unmounting, removing a
work directory only when nothing is mounted in it, the page cache, a daemon's memory, a
mount's status, a tree's regular files."""

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time

# The mount table through libmount: tests/integration/mounts.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import mounts  # noqa: E402

# Debian's interpreter (the benchmarks' own, by their #! line) and its standard library,
# the default tree: PYTHONHOME=PREFIX makes it look in PREFIX/lib/<basename of PYTHON_LIB>.
PYTHON = os.path.realpath(sys.executable)
PYTHON_LIB = sysconfig.get_path("stdlib")
# Debian's own interpreter: the one whose library a benchmark's default tree must be,
# whichever python3 runs the benchmark (PATH may hold a pyenv build ten times larger).
DEBIAN_PYTHON = "/usr/bin/python3"


def debian_stdlib():
    """The standard library of Debian's interpreter (/usr/lib/python3.X), asked of it."""
    return subprocess.run([DEBIAN_PYTHON, "-c", "import sysconfig; "
                           "print(sysconfig.get_path('stdlib'))"], check=True,
                          capture_output=True, text=True).stdout.strip()


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, **kw)


def is_mounted(path):
    return mounts.at(path) is not None


def unmount(path):
    for cmd in (["umount", path], ["umount", "-l", path]):
        if not is_mounted(path):
            break
        subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True)
    deadline = time.monotonic() + 10
    while is_mounted(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def mounts_under(path):
    path = os.path.realpath(path)
    return [m.target for m in mounts.table() if m.target == path or m.target.startswith(path + "/")]


def safe_rmtree(path, who="bench"):
    """Removes PATH unless something is still mounted in it: never delete through a
    mount (a bind mount of the real tree, say)."""
    left = mounts_under(path)
    if left:
        print("%s: not removing %s: %s still mounted" % (who, path, ", ".join(left)),
              file=sys.stderr)
        return
    shutil.rmtree(path, ignore_errors=True)


def wait_mounted(path, proc=None, timeout=20):
    """Waits until PATH is a mount point; PROC, a server started in the foreground,
    must not exit first."""
    deadline = time.monotonic() + timeout
    while not is_mounted(path):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("the server for %s exited %d before mounting"
                               % (path, proc.returncode))
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not get mounted" % path)
        time.sleep(0.01)


def into_page_cache(*paths):
    """Reads each existing file once, so that image files are served from memory."""
    for p in paths:
        if p and os.path.exists(p):
            with open(p, "rb") as f:
                while f.read(1 << 20):
                    pass


def peak_rss_mib(pid):
    """VmHWM of PID in MiB, or None when it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return None


def stipple_daemon_pid(stipple, mnt):
    """The daemon's pid as `stipple status` reports it."""
    out = subprocess.run([stipple, "status", mnt], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if line.startswith("daemon:") and "pid" in line:
            return int(line.split("pid", 1)[1].split(",")[0])
    raise RuntimeError("no daemon pid in `stipple status %s`" % mnt)


def mount_status(mount):
    """A stipple mount's status keys (its user.stipple.status attribute), as strings."""
    text = os.getxattr(mount, "user.stipple.status").decode()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def regular_files(root):
    """(path relative to ROOT, path) of each regular file under ROOT, links left out."""
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                yield os.path.relpath(p, root), p


def file_sizes(root):
    """{path relative to ROOT: size} of each regular file under ROOT."""
    return {rel: os.path.getsize(p) for rel, p in regular_files(root)}


def read_all(root):
    """Reads each regular file under ROOT to its end, 1 MiB at a time: the bytes read."""
    n = 0
    for _, p in regular_files(root):
        with open(p, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
    return n


def median(xs):
    return statistics.median(xs) if xs else None
