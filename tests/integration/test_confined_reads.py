# SPDX-License-Identifier: MIT
"""Only the confined daemon reads an image's bytes (review 8's confined-reads.py, made to
see again). A mount runs under `strace -f -y`, which names the file behind every
descriptor, however it was got: opened by path, through /proc/self/fd/N (the monitor,
since review 8 #5) or received over a socket (the daemon). Then:
- no process but the daemon (the one that exec'd stipple-mountd, its threads included)
  reads a byte of the image past its 256-byte superblock;
- the daemon reads none of it before its seccomp filter is installed;
- the daemon did read the image (else the check saw nothing).
For root's mount.stipple and for a user's `stipple mount` (strace as root, the command as
the user, so that fusermount3 stays setuid; /dev/fuse opened to users for the test)."""

import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, is_mounted, run, unmount
from test_http import NOBODY, as_nobody, fuse_open_to_users

pytestmark = pytest.mark.needs_root

READS = ("read", "pread64", "readv", "preadv", "preadv2", "mmap", "sendfile",
         "copy_file_range", "splice")
CALLS = READS + ("seccomp", "clone", "clone3", "fork", "vfork", "execve", "execveat")
LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+)")
RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)")


def joined(lines):
    """strace's lines with each call split by another process's joined again."""
    pending = {}
    for line in lines:
        line = line.rstrip("\n")
        pid = line.split(None, 1)[0]
        if line.endswith("<unfinished ...>"):
            pending[pid] = line[:-len("<unfinished ...>")].rstrip()
            continue
        m = RESUMED.match(line)
        if m:
            line = pending.pop(pid, pid + " ?(") + m[2]
        yield line


class Trace:
    """The processes of a traced mount: which are the daemon, which are confined."""

    def __init__(self, image):
        self.image = image
        self.confined, self.proc, self.daemons = {}, {}, set()
        self.daemon_reads, self.problems = 0, []

    def fork(self, pid, child, args):
        self.confined[child] = self.confined.get(pid, False)
        self.proc[child] = self.proc.get(pid, pid) if "CLONE_THREAD" in args else child

    def read(self, pid, call, args, ret, line):
        if "<%s>" % self.image not in args.split(",")[4 if call == "mmap" else 0]:
            return
        proc = self.proc.get(pid, pid)
        if proc in self.daemons:
            self.daemon_reads += 1
            if not self.confined.get(pid):
                self.problems.append("the daemon read the image unconfined: " + line)
        elif call != "pread64" or int(args.rsplit(",", 1)[1]) + ret > 256:
            self.problems.append("not the daemon read the image: " + line)

    def take(self, line):
        m = LINE.match(line)
        if not m or m[2] not in CALLS:
            return
        pid, call, args, ret = int(m[1]), m[2], m[3], int(m[4], 0)
        if call in ("clone", "clone3", "fork", "vfork") and ret > 0:
            self.fork(pid, ret, args)
        elif call == "seccomp" and ret == 0 and "SECCOMP_SET_MODE_FILTER" in args:
            self.confined[pid] = True
        elif call.startswith("execve") and ret == 0 and "/stipple-mountd" in args.split(",")[0]:
            self.daemons.add(self.proc.get(pid, pid))
        elif call in READS and ret > 0:
            self.read(pid, call, args, ret, line[:200])


def traced_mount(image, mnt, cmd, as_user=None):
    """Runs CMD under strace, reads the mount through, unmounts: the Trace."""
    log = mnt + ".strace"
    prefix = ["strace", "-f", "-qq", "-y", "-s", "0", "-o", log, "-e", "trace=" + ",".join(CALLS)]
    if as_user:
        prefix += ["-u", as_user]
    tracer = subprocess.Popen(prefix + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(mnt):
            assert tracer.poll() is None or time.monotonic() < deadline, tracer.stderr.read()
            assert time.monotonic() < deadline, "not mounted"
            time.sleep(0.1)
        for root, _, files in os.walk(mnt):
            for name in files:
                path = os.path.join(root, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        f.read(1 << 16)
    finally:
        unmount(mnt)
        try:
            tracer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tracer.kill()
    trace = Trace(os.path.realpath(image))
    with open(log, errors="replace") as f:
        for line in joined(f):
            trace.take(line)
    os.unlink(log)
    return trace


def check(trace):
    assert trace.daemons, "no stipple-mountd seen in the trace"
    assert trace.daemon_reads, "the daemon's reads of the image were not seen"
    assert not trace.problems, "\n".join(trace.problems[:5])


@pytest.fixture
def strace():
    if not shutil.which("strace"):
        pytest.skip("needs strace")


def test_roots_mount_reads_the_image_confined_only(strace, gen_image, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    check(traced_mount(gen_image, str(mnt), [MOUNT_STIPPLE, gen_image, mnt, "-o", "noprime"]))


def test_a_users_mount_reads_the_image_confined_only(strace, gen_image, tmp_path):
    with as_nobody() as (_, env, mnt, home):
        image = os.path.join(home, "gen.stp")
        shutil.copyfile(gen_image, image)
        os.chown(image, NOBODY, NOBODY)
        with fuse_open_to_users():
            trace = traced_mount(image, mnt, ["env", "-i"] + ["%s=%s" % kv for kv in env.items()]
                                 + [STIPPLE, "mount", "--no-prime", image, mnt], as_user="nobody")
        check(trace)
