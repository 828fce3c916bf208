# SPDX-License-Identifier: MIT
"""The sandbox of a running mount daemon, seen from outside: every thread holds no
capability, has no_new_privs and a seccomp filter, runs as an unprivileged user, keeps
only /dev/fuse, the image and /dev/null open, and sees an empty root; the mount still
serves the tree; umount still ends the daemon; sandbox=log denies nothing in a session of
reads; sandbox=off and sandbox_user= do what they say; a bad sandbox user fails the mount
and leaves nothing mounted. Both `stipple mount` and `mount.stipple` are covered."""

import concurrent.futures
import contextlib
import ctypes
import grp
import os
import pwd
import random
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import (MOUNT_STIPPLE, REPO, STIPPLE, _need, build_image, is_mounted,
                      mount_image, run, unmount)
import mounts

FAST = ("--level", "3", "--block-size", "256K")
CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")

pytestmark = pytest.mark.needs_root


# A small tree: sizes around page and block edges, several blocks, nesting, a symlink.


def make_small_tree(root):
    rnd = random.Random(4)
    files = {
        "empty": b"",
        "one": b"x",
        "page": rnd.randbytes(4096),
        "page+1": rnd.randbytes(4097),
        "sub/noise": rnd.randbytes(700_000),
        "sub/deeper/text": b"stipple sandbox line\n" * 60_000,
        "sub/deeper/small": b"hello\n",
    }
    for i in range(40):
        files["many/f%02d" % i] = (b"%d " % i) * (i * 500)
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    os.symlink("sub/deeper/small", os.path.join(root, "link"))
    return files


@pytest.fixture(scope="module")
def small_image(tmp_path_factory):
    base = tmp_path_factory.mktemp("sandbox")
    tree = base / "tree"
    files = make_small_tree(tree)
    image = build_image(tree, base / "small.stipple", *FAST)
    return {"tree": tree, "files": files, "image": str(image)}


@contextlib.contextmanager
def helper_mount(image, *options, program=MOUNT_STIPPLE):
    """mount.stipple IMAGE DIR -o OPTIONS, as mount(8) would run it; always unmounts."""
    mountpoint = tempfile.mkdtemp(prefix="stipple-sbx-")
    try:
        args = [_need(program), image, mountpoint]
        if options:
            args += ["-o", ",".join(options)]
        r = run(args, timeout=60)
        assert r.returncode == 0, "mount.stipple exited %d:\n%s" % (r.returncode, r.stderr)
        deadline = time.monotonic() + 10
        while not is_mounted(mountpoint):
            assert time.monotonic() < deadline, "%s is not mounted" % mountpoint
            time.sleep(0.05)
        yield mountpoint
    finally:
        unmount(mountpoint)
        with contextlib.suppress(OSError):
            os.rmdir(mountpoint)


def stipple_mount(image, *options):
    args = ["-o", ",".join(options)] if options else []
    return mount_image(image, None, *args)


MOUNTERS = {"stipple mount": stipple_mount, "mount.stipple": helper_mount}


@pytest.fixture(params=sorted(MOUNTERS))
def mounter(request):
    return MOUNTERS[request.param]


# The daemon, found by what it holds open.


def fd_targets(pid):
    out = {}
    fd_dir = "/proc/%d/fd" % pid
    for name in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            out[int(name)] = os.readlink(os.path.join(fd_dir, name))
    return out


def daemon_pid(image):
    """The one process that holds IMAGE open (the daemon; mkstipple has exited)."""
    image = os.path.realpath(image)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if image in fd_targets(int(name)).values():
                found.append(int(name))
    assert len(found) == 1, "processes holding %s open: %s" % (image, found)
    return found[0]


def status_fields(path):
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def thread_status(pid):
    tasks = "/proc/%d/task" % pid
    return {int(t): status_fields(os.path.join(tasks, t, "status")) for t in os.listdir(tasks)}


def is_gone(pid):
    try:
        return status_fields("/proc/%d/status" % pid)["State"].startswith("Z")
    except FileNotFoundError:
        return True


def wait_gone(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while not is_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def read_all(mountpoint, files):
    """Reads every file through the mount, in parallel so that the loop starts threads."""
    def read(rel):
        with open(os.path.join(mountpoint, rel), "rb") as f:
            return rel, f.read()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return dict(pool.map(read, sorted(files) * 2))


def assert_serves(mountpoint, image_info):
    files = image_info["files"]
    got = read_all(mountpoint, files)
    bad = [rel for rel, data in files.items() if got[rel] != data]
    assert not bad, "files read back wrong through the mount: %s" % bad
    assert os.readlink(os.path.join(mountpoint, "link")) == "sub/deeper/small"
    with open(os.path.join(mountpoint, "link"), "rb") as f:
        assert f.read() == b"hello\n"
    assert sorted(os.listdir(mountpoint)) == sorted(os.listdir(image_info["tree"]))
    assert sorted(os.listdir(os.path.join(mountpoint, "many"))) == sorted(
        os.listdir(os.path.join(image_info["tree"], "many")))
    assert not os.path.exists(os.path.join(mountpoint, "no-such-file"))


def assert_confined(pid, image, uid=None, root_started=True, bounding_empty=None, gid=None):
    """BOUNDING_EMPTY (default: ROOT_STARTED): the bounding set must be empty too. UID and
    GID (when given): every real, effective, saved and file-system id."""
    if bounding_empty is None:
        bounding_empty = root_started
    threads = thread_status(pid)
    assert len(threads) >= 2, "the loop runs a single thread: %s" % sorted(threads)
    for tid, st in threads.items():
        where = "daemon %d thread %d" % (pid, tid)
        for field in CAP_FIELDS:
            if field == "CapBnd" and not bounding_empty:
                continue  # only root or a user namespace can empty it; no_new_privs makes it moot
            assert int(st[field], 16) == 0, "%s: %s %s" % (where, field, st[field])
        assert st["NoNewPrivs"] == "1", "%s: NoNewPrivs %s" % (where, st["NoNewPrivs"])
        assert st["Seccomp"] == "2", "%s: Seccomp %s" % (where, st["Seccomp"])
        uids = [int(u) for u in st["Uid"].split()]
        gids = [int(g) for g in st["Gid"].split()]
        assert 0 not in uids, "%s: Uid %s" % (where, st["Uid"])
        assert 0 not in gids, "%s: Gid %s" % (where, st["Gid"])
        if uid is not None:
            assert uids == [uid] * 4, "%s: Uid %s, expected %d" % (where, st["Uid"], uid)
        if gid is not None:
            assert gids == [gid] * 4, "%s: Gid %s, expected %d" % (where, st["Gid"], gid)
        if root_started:
            assert st["Groups"] == "", "%s: Groups %s" % (where, st["Groups"])

    targets = fd_targets(pid)
    # root's daemon keeps its empty root's mount open (sandbox.c: enter_detached_root):
    # allowed only when it is that root, never the host's
    for fd, t in list(targets.items()):
        if t == "/" and mounts.is_own_empty_root(pid, "/proc/%d/fd/%d" % (pid, fd)):
            del targets[fd]
    allowed = {"/dev/null", "/dev/fuse", os.path.realpath(image)}
    # and the two ends of one pipe of its own, which its signal handlers write to
    pipes = [t for t in targets.values() if t.startswith("pipe:")]
    if len(pipes) == 2 and pipes[0] == pipes[1]:
        allowed.add(pipes[0])
    stray = {fd: t for fd, t in targets.items() if t not in allowed}
    assert not stray, "daemon %d holds more than /dev/fuse, the image and /dev/null: %s" % (
        pid, stray)
    assert "/dev/fuse" in targets.values() and os.path.realpath(image) in targets.values()
    assert all(targets.get(fd) == "/dev/null" for fd in (0, 1, 2)), targets


def assert_empty_root(pid, own_namespace=False):
    """Its root is an empty read-only tmpfs that the host does not have, and it sees no
    other mount: root's daemon, in a tmpfs made detached (sandbox.c), sees none at all,
    or that tmpfs alone where the kernel refused one; a user's (OWN_NAMESPACE: in its
    user namespace) that tmpfs alone, pivoted into."""
    seen = mounts.table(pid)
    assert len(seen) == 1 if own_namespace else len(seen) <= 1, \
        "daemon %d sees %d mounts:\n%s" % (pid, len(seen), "\n".join(map(str, seen[:20])))
    if seen:
        assert seen[0][:4] == ("/", seen[0].source, "tmpfs", "/"), seen[0]
    assert mounts.is_own_empty_root(pid, "/proc/%d/root" % pid)


STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")


def kernel_log():
    """(timestamp, line) of each kernel log line; None if unreadable or without times."""
    r = run(["dmesg"], timeout=60)
    if r.returncode != 0:
        return None
    lines = r.stdout.splitlines()
    stamped = [(float(m.group(1)), line) for line in lines for m in [STAMP.match(line)] if m]
    return None if lines and not stamped else stamped  # no times: cannot tell new from old


def kernel_log_time():
    """The time of the kernel log's last line, to look only at what comes after."""
    log = kernel_log()
    return log[-1][0] if log else 0.0


def sandbox_records(pid, since):
    """Kernel audit records of seccomp (type=1326) for PID logged after SINCE: an earlier
    process may have had the same pid. None when dmesg is unreadable."""
    log = kernel_log()
    if log is None:
        return None
    pattern = re.compile(r"type=1326 .* pid=%d " % pid)
    return [line for t, line in log if t > since and pattern.search(line)]


def default_sandbox_user():
    for name in ("stipple", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    pytest.skip("neither a 'stipple' nor a 'nobody' user")


# The tests


def test_daemon_is_confined(small_image, mounter):
    image = small_image["image"]
    with mounter(image) as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        user = default_sandbox_user()
        assert_confined(pid, image, uid=user.pw_uid, gid=user.pw_gid)
        assert_empty_root(pid)
        assert not is_gone(pid)
    assert wait_gone(pid), "daemon %d still runs after umount" % pid


def has_interpreter(exe):
    """Whether ELF program EXE names a program interpreter (PT_INTERP): a dynamic one."""
    return "INTERP" in run(["readelf", "-lW", exe], check=True).stdout


@pytest.fixture(scope="module")
def static_build(tmp_path_factory):
    """mount.stipple and a stipple-mountd built with -Dstatic_daemon=true, in a build
    directory of their own (the monitor runs its sibling daemon)."""
    build = tmp_path_factory.mktemp("static-daemon") / "build"
    run(["meson", "setup", build, REPO, "-Dstatic_daemon=true"], check=True)
    run(["ninja", "-C", build, "mounthelper/mount.stipple", "mounthelper/stipple-mountd"],
        timeout=1800, check=True)
    return build / "mounthelper"


def test_static_daemon_is_confined(small_image, static_build):
    """-Dstatic_daemon: the daemon, started without a dynamic loader, serves the tree,
    is confined as the shared one is, and ends with the mount."""
    daemon = static_build / "stipple-mountd"
    assert not has_interpreter(daemon), "%s has a program interpreter" % daemon
    assert has_interpreter(static_build / "mount.stipple")
    image = small_image["image"]
    with helper_mount(image, program=static_build / "mount.stipple") as mnt:
        pid = daemon_pid(image)
        assert os.path.realpath("/proc/%d/exe" % pid) == str(daemon)
        assert_serves(mnt, small_image)
        user = default_sandbox_user()
        assert_confined(pid, image, uid=user.pw_uid, gid=user.pw_gid)
        assert_empty_root(pid)
    assert wait_gone(pid), "daemon %d still runs after umount" % pid


def kernel_makes_detached_tmpfs():
    """Whether fsopen(2) gives this process a tmpfs context (Linux 5.2; a container's
    filter may refuse it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(430, b"tmpfs", 0)  # SYS_fsopen, one number on every architecture
    if fd < 0:
        return False
    os.close(fd)
    return True


# The filter as the kernel holds it (PTRACE_SECCOMP_GET_FILTER), run on a call here.

PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SECCOMP_GET_FILTER = 16, 17, 0x420c
# (audit arch, mmap, mprotect) of the machines the test knows
SECCOMP_ARCH = {"x86_64": (0xc000003e, 9, 10), "aarch64": (0xc00000b7, 222, 226)}
PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_PRIVATE_ANON = 0x02 | 0x20
RET_ALLOW, RET_EACCES = 0x7fff0000, 0x50000 | 13


def seccomp_filters(pid):
    """The classic BPF programs of PID's seccomp filters, newest first: lists of
    (code, jt, jf, k)."""
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        pytest.skip("cannot trace the daemon: %s" % os.strerror(ctypes.get_errno()))
    progs = []
    try:
        os.waitpid(pid, 0x40000000)  # __WALL: it stops
        for index in range(16):
            n = libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, None)
            if n <= 0:
                break
            buf = ctypes.create_string_buffer(8 * n)
            assert libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, buf) == n
            progs.append([struct.unpack_from("<HBBI", buf.raw, 8 * i) for i in range(n)])
    finally:
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    return progs


def bpf_run(prog, data):
    """The value PROG (classic BPF, the instructions seccomp accepts) returns on DATA."""
    import struct
    a = x = pc = 0
    mem = [0] * 16
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        cls, src = code & 7, None
        if cls in (4, 5):
            src = x if code & 8 else k
        if cls == 0:  # ld: abs word, imm, mem, len
            a = {0x20: lambda: struct.unpack_from("<I", data, k)[0], 0x00: lambda: k,
                 0x60: lambda: mem[k], 0x80: lambda: len(data)}[code & 0xe0]()
        elif cls == 1:
            x = {0x00: k, 0x80: len(data)}.get(code & 0xe0, mem[k % 16])
        elif cls in (2, 3):
            mem[k] = a if cls == 2 else x
        elif cls == 4:
            ops = {0x00: a + src, 0x10: a - src, 0x40: a | src, 0x50: a & src,
                   0x60: a << src, 0x70: a >> src, 0x80: -a, 0xa0: a ^ src}
            a = ops[code & 0xf0] & 0xffffffff
        elif cls == 5:
            if code & 0xf0 == 0:
                pc += k
                continue
            cond = {0x10: a == src, 0x20: a > src, 0x30: a >= src,
                    0x40: a & src != 0}[code & 0xf0]
            pc += jt if cond else jf
        elif cls == 6:
            return a if code & 0x18 == 0x10 else k
        else:
            x, a = (a, a) if code & 0xf8 == 0 else (x, x)


def seccomp_verdict(progs, nr, *args, arch=None):
    """What the kernel does with call NR(ARGS) under PROGS: the most severe action. ARCH:
    the AUDIT_ARCH_* of the call's table (default: this machine's)."""
    import platform
    import struct
    arch = arch or SECCOMP_ARCH[platform.machine()][0]
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    signed = lambda v: v - (1 << 32) if v & 0x80000000 else v
    return min((bpf_run(p, data) for p in progs), key=lambda v: signed(v & 0xffff0000))


def live_daemon_filters(small_image, mounter):
    """The pid of a serving mount's daemon, and its filters as loaded."""
    image = small_image["image"]
    with mounter(image) as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        progs = seccomp_filters(pid)
    assert progs, "no seccomp filter"
    return pid, progs


def test_daemon_maps_nothing_read_only(small_image, mounter):
    """Memory mapped read-only, or made so once written, escapes RLIMIT_DATA (review 5 #2,
    #3): the daemon's filter, as loaded, answers EACCES to a read-only private mapping
    and to mprotect(PROT_READ), and allows what malloc and thread stacks do. The cache
    once mapped cuts' zero tails so, and the daemon's filter let it."""
    import platform
    if platform.machine() not in SECCOMP_ARCH:
        pytest.skip("the test knows no call numbers for %s" % platform.machine())
    _, mmap, mprotect = SECCOMP_ARCH[platform.machine()]
    _, progs = live_daemon_filters(small_image, mounter)
    rw = PROT_READ | PROT_WRITE
    assert seccomp_verdict(progs, mmap, 0, 1 << 20, PROT_READ, MAP_PRIVATE_ANON) == RET_EACCES
    assert seccomp_verdict(progs, mprotect, 0, 4096, PROT_READ) == RET_EACCES
    assert seccomp_verdict(progs, mmap, 0, 1 << 20, rw, MAP_PRIVATE_ANON) == RET_ALLOW
    assert seccomp_verdict(progs, mmap, 0, 1 << 26, PROT_NONE, MAP_PRIVATE_ANON) == RET_ALLOW
    assert seccomp_verdict(progs, mprotect, 0, 4096, rw) == RET_ALLOW


TGKILL = {"x86_64": 234, "aarch64": 131}
RET_KILL_PROCESS = 0x80000000


def test_daemon_filter_is_built_for_the_daemon(small_image, mounter):
    """The monitor builds the daemon's filter while the daemon execs (filters.h): its
    tgkill rule names the daemon's pid, not the monitor's, so that the daemon can cancel
    its own threads and signal no other process."""
    import platform
    if platform.machine() not in TGKILL:
        pytest.skip("the test knows no call numbers for %s" % platform.machine())
    pid, progs = live_daemon_filters(small_image, mounter)
    tgkill = TGKILL[platform.machine()]
    assert seccomp_verdict(progs, tgkill, pid, pid + 1, signal.SIGCANCEL
                           if hasattr(signal, "SIGCANCEL") else 32) == RET_ALLOW
    for other in (os.getpid(), 1, pid + 1, pid - 1):
        assert seccomp_verdict(progs, tgkill, other, other, 9) == RET_KILL_PROCESS, other


AUDIT_ARCH_I386, X32_SYSCALL_BIT = 0x40000003, 0x40000000


def test_daemon_filter_kills_other_abis(small_image, mounter):
    """A call through another system-call table means another call by the same number, so
    the daemon's filter, as loaded, kills it whatever the number: i386's (int 0x80; getpid
    is 20 there, write 4) and x32's (amd64's entry with bit 30 set). test_sandbox.c runs
    them for real, but a kernel without the i386 entry faults int 0x80 before any filter."""
    import platform
    if platform.machine() != "x86_64":
        pytest.skip("x32 and int 0x80 are amd64's")
    _, progs = live_daemon_filters(small_image, mounter)
    for nr in (20, 4, 3, 0):
        assert seccomp_verdict(progs, nr, arch=AUDIT_ARCH_I386) == RET_KILL_PROCESS, nr
    for nr in (39, 0, 1, 9):
        assert seccomp_verdict(progs, X32_SYSCALL_BIT | nr) == RET_KILL_PROCESS, nr
    assert seccomp_verdict(progs, 39) == RET_ALLOW  # getpid itself


def test_root_daemon_copies_no_mount_tree(small_image, mounter):
    """Root's daemon takes a detached tmpfs as its root (sandbox.c): it stays in the
    host's mount namespace, having copied none of it, and its root is that tmpfs, held
    open by one descriptor of its own. A private namespace's copy (what it did before)
    had to be detached again, and the detach waited for an RCU grace period on every
    mount's way to live."""
    if not kernel_makes_detached_tmpfs():
        pytest.skip("the kernel refuses fsopen: the daemon takes a private namespace")
    image = small_image["image"]
    with mounter(image) as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        assert os.readlink("/proc/%d/ns/mnt" % pid) == os.readlink("/proc/self/ns/mnt")
        assert mounts.table(pid) == []  # nothing of the host's is beneath its root
        assert mounts.is_own_empty_root(pid, "/proc/%d/root" % pid)
        own = [fd for fd, t in fd_targets(pid).items()
               if t == "/" and mounts.is_own_empty_root(pid, "/proc/%d/fd/%d" % (pid, fd))]
        assert len(own) == 1, fd_targets(pid)


def test_umount_ends_daemon(small_image, mounter):
    image = small_image["image"]
    since = kernel_log_time()
    with mounter(image) as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        r = run(["umount", mnt], timeout=60)
        assert r.returncode == 0, r.stderr
        assert wait_gone(pid), "daemon %d still runs after umount" % pid
        assert not is_mounted(mnt)
    records = sandbox_records(pid, since)
    if records is None:
        pytest.skip("dmesg is not readable")
    assert not records, "the filter denied calls:\n%s" % "\n".join(records)


def test_log_mode_denies_nothing(small_image, mounter):
    """sandbox=log allows and logs what the filter lacks: a session of reads, listings,
    failed lookups and the umount must log nothing."""
    image = small_image["image"]
    since = kernel_log_time()
    with mounter(image, "sandbox=log") as mnt:
        pid = daemon_pid(image)
        assert_confined(pid, image)
        assert_empty_root(pid)
        for _ in range(3):
            assert_serves(mnt, small_image)
        for dirpath, dirnames, filenames in os.walk(mnt):
            for name in filenames + dirnames:
                os.lstat(os.path.join(dirpath, name))
        assert run(["umount", mnt], timeout=60).returncode == 0
        assert wait_gone(pid)
    records = sandbox_records(pid, since)
    if records is None:
        pytest.skip("dmesg is not readable")
    assert not records, "calls outside the filter:\n%s" % "\n".join(records)


def test_sandbox_off(small_image, mounter):
    image = small_image["image"]
    with mounter(image, "sandbox=off") as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        st = status_fields("/proc/%d/status" % pid)
        assert st["Seccomp"] == "0" and st["NoNewPrivs"] == "0", st
        assert st["Uid"].split() == ["0"] * 4, st["Uid"]
        # nothing ahead of the setup either (the SANDBOX message said off): the daemon
        # stays in the host's mount namespace, its root the host's
        assert os.readlink("/proc/%d/ns/mnt" % pid) == os.readlink("/proc/self/ns/mnt")
        assert os.path.samefile("/proc/%d/root" % pid, "/")
    assert wait_gone(pid)


def test_sandbox_user(small_image, mounter):
    try:
        user = pwd.getpwnam("daemon")
    except KeyError:
        pytest.skip("no 'daemon' user")
    image = small_image["image"]
    with mounter(image, "sandbox_user=daemon") as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        assert_confined(pid, image, uid=user.pw_uid)
        gids = status_fields("/proc/%d/status" % pid)["Gid"].split()
        assert gids == [str(user.pw_gid)] * 4, gids


@pytest.mark.parametrize("program", ["stipple", "mount.stipple"])
def test_unknown_sandbox_user_fails_and_unmounts(small_image, program, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    image = small_image["image"]
    if program == "stipple":
        args = [_need(STIPPLE), "mount", "-o", "sandbox_user=no-such-user-x", image, mnt]
    else:
        args = [_need(MOUNT_STIPPLE), image, mnt, "-o", "sandbox_user=no-such-user-x"]
    try:
        r = run(args, timeout=60)
        assert r.returncode != 0, "mounted with an unknown sandbox user"
        if program == "mount.stipple":
            assert r.returncode == 32, r.returncode
        assert "no-such-user-x" in r.stderr, r.stderr
        assert not is_mounted(mnt), "a failed sandbox left %s mounted" % mnt
        assert os.listdir(mnt) == []
    finally:
        unmount(mnt)


@pytest.mark.parametrize("program", ["stipple", "mount.stipple"])
def test_auto_unmount_is_refused(small_image, program, tmp_path):
    """auto_unmount depends on a socket to fusermount3 that confinement closes (fusermount3
    then sees a live mount and leaves): refused before anything is mounted."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    image = small_image["image"]
    if program == "stipple":
        args = [_need(STIPPLE), "mount", "-o", "auto_unmount", image, mnt]
    else:
        args = [_need(MOUNT_STIPPLE), image, mnt, "-o", "ro,auto_unmount"]
    try:
        r = run(args, timeout=60)
        assert r.returncode != 0, "mounted with auto_unmount"
        assert "option auto_unmount is refused" in r.stderr, r.stderr
        assert "fusermount3" in r.stderr, r.stderr
        assert not is_mounted(mnt)
    finally:
        unmount(mnt)


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@pytest.fixture
def stipple_user():
    """The dedicated 'stipple' system user, created if missing and then removed again."""
    created = False
    if not user_exists("stipple"):
        if not shutil.which("useradd"):
            pytest.skip("needs useradd")
        r = run(["useradd", "--system", "--user-group", "--no-create-home",
                 "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "stipple"],
                timeout=60)
        assert r.returncode == 0, r.stderr
        created = True
    try:
        yield pwd.getpwnam("stipple")
    finally:
        if created:
            run(["userdel", "stipple"], timeout=60)
            with contextlib.suppress(KeyError):
                grp.getgrnam("stipple")
                run(["groupdel", "stipple"], timeout=60)


def background_mount(program, image, mnt, *options):
    if program == "stipple":
        args = [_need(STIPPLE), "mount"] + (["-o", ",".join(options)] if options else [])
        return run(args + [image, mnt], timeout=60)
    args = [_need(MOUNT_STIPPLE), image, mnt] + (["-o", ",".join(options)] if options else [])
    return run(args, timeout=60)


@pytest.mark.parametrize("program", ["stipple", "mount.stipple"])
def test_dedicated_user_by_default(small_image, program, tmp_path, stipple_user):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    image = small_image["image"]
    try:
        r = background_mount(program, image, mnt)
        assert r.returncode == 0, r.stderr
        assert "nobody" not in r.stderr, r.stderr
        pid = daemon_pid(image)
        assert_serves(str(mnt), small_image)
        assert_confined(pid, image, uid=stipple_user.pw_uid)
        gids = status_fields("/proc/%d/status" % pid)["Gid"].split()
        assert gids == [str(stipple_user.pw_gid)] * 4, gids
    finally:
        unmount(mnt)


@pytest.mark.parametrize("program", ["stipple", "mount.stipple"])
def test_nobody_fallback_warns(small_image, program, tmp_path):
    """Without a 'stipple' user the daemon runs as nobody, and says so before it detaches:
    the warning reaches the user of a background mount."""
    if user_exists("stipple"):
        pytest.skip("this machine has a 'stipple' user")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    image = small_image["image"]
    try:
        r = background_mount(program, image, mnt)
        assert r.returncode == 0, r.stderr
        assert "warning: sandbox: no user 'stipple'" in r.stderr, r.stderr
        assert "'nobody'" in r.stderr and "systemd-sysusers" in r.stderr, r.stderr
        assert r.stderr.count("no user 'stipple'") == 1, r.stderr
        pid = daemon_pid(image)
        assert_serves(str(mnt), small_image)  # the loop starts its threads
        assert_confined(pid, image, uid=pwd.getpwnam("nobody").pw_uid)
    finally:
        unmount(mnt)


@contextlib.contextmanager
def fuse_open_to_users():
    """/dev/fuse readable and writable by everyone for the duration, its mode restored."""
    mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    os.chmod("/dev/fuse", mode | 0o666)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", mode)


def users_may_unshare():
    """Whether uid 65534 may create a user namespace here (then its daemon has one)."""
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "unshare", "--user", "true"], capture_output=True, timeout=60)
    return r.returncode == 0


def test_unprivileged_mount_is_confined(small_image):
    """A user's `stipple mount` through fusermount3: no uid change, but no capability,
    no_new_privs and the filter all the same, and, where the kernel lets users create
    user namespaces, an empty root in a namespace of its own."""
    if not shutil.which("fusermount3") or not shutil.which("setpriv"):
        pytest.skip("needs fusermount3 and setpriv")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    userns = users_may_unshare()
    base = tempfile.mkdtemp(prefix="stipple-sbx-user-")
    try:
        os.chmod(base, 0o755)
        image = os.path.join(base, "img.stipple")
        shutil.copy(small_image["image"], image)
        os.chmod(image, 0o644)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        os.chown(mnt, 65534, 65534)
        with fuse_open_to_users():
            r = run(as_nobody + [_need(STIPPLE), "mount", image, mnt], timeout=60)
            assert r.returncode == 0, r.stderr
            if userns:
                assert "user namespace" not in r.stderr, r.stderr
            pid = daemon_pid(image)
            for rel, data in small_image["files"].items():
                got = subprocess.run(as_nobody + ["cat", os.path.join(mnt, rel)],
                                     stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
                assert got.returncode == 0 and got.stdout == data, (rel, got.stderr)
            # inside its user namespace the daemon could empty its bounding set too
            assert_confined(pid, image, uid=65534, root_started=False, bounding_empty=userns)
            if userns:
                assert_empty_root(pid, own_namespace=True)
            r = run(as_nobody + ["fusermount3", "-u", mnt], timeout=60)
            assert r.returncode == 0, r.stderr
            assert wait_gone(pid), "daemon %d still runs after fusermount3 -u" % pid
    finally:
        unmount(os.path.join(base, "mnt"))
        shutil.rmtree(base, ignore_errors=True)


# ---- issue 28, item 15: a daemon that dies after LIVE takes its mount with it ----------


def watchers_of(mnt):
    """Pids of the watchers (comm stipple-watch) whose command line names MNT."""
    want = os.fsencode(os.path.realpath(mnt))
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open("/proc/%s/comm" % name) as f:
                if f.read().strip() != "stipple-watch":
                    continue
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(name))
    return found


def mounted_within(mnt, seconds):
    """Whether MNT is still mounted after SECONDS (checked often)."""
    deadline = time.monotonic() + seconds
    while is_mounted(mnt) and time.monotonic() < deadline:
        time.sleep(0.02)
    return is_mounted(mnt)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSEGV"])
def test_dead_daemon_takes_its_mount(small_image, mounter, how):
    """kill -9 (or a crash) of the daemon of a live mount, whose monitor has returned:
    within two seconds nothing is mounted there (before: a dead mount, ENOTCONN, until
    someone ran umount -l), and the watcher that did it has gone too."""
    image = small_image["image"]
    with mounter(image) as mnt:
        pid = daemon_pid(image)
        assert_serves(mnt, small_image)
        watchers = watchers_of(mnt)
        os.kill(pid, getattr(signal, how))
        assert wait_gone(pid)
        assert not mounted_within(mnt, 2), "a dead mount is left at %s" % mnt
        assert os.listdir(mnt) == []
        assert len(watchers) == 1 and wait_gone(watchers[0], timeout=5), watchers


def test_watcher_holds_little_and_leaves_with_the_mount(small_image, mounter):
    """The watcher keeps CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH (for the unmount) and
    CAP_KILL (to end a daemon that stays: test_lingering.py) alone, three descriptors (the
    daemon's pidfd, a copy of the mount's /dev/fuse, whose end it watches, and the mount
    point's parent; a URL's fetcher's pidfd too) and its mount table, polled for changes,
    beside /dev/null
    as stdin, stdout and stderr (not left closed, for a later open to take), no terminal; an
    ordinary umount ends it, and the daemon too. The clone of the mount tree the monitor
    looked through for the mount's device is the watcher's to close once the monitor has
    gone (its close waits for an RCU grace period): it goes at once, else it would hold the
    FUSE mount's superblock, and the daemon, past the umount."""
    image = small_image["image"]
    with mounter(image) as mnt:
        pid = daemon_pid(image)
        (watcher,) = watchers_of(mnt)
        st = status_fields("/proc/%d/status" % watcher)
        kept = 1 << 21 | 1 << 2 | 1 << 5  # CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH, CAP_KILL
        assert int(st["CapEff"], 16) == kept and int(st["CapPrm"], 16) == kept, st
        deadline = time.monotonic() + 5
        while len(fd_targets(watcher)) > 7 and time.monotonic() < deadline:
            time.sleep(0.01)
        fds = fd_targets(watcher)
        assert sorted(fds.values()) == sorted(
            ["anon_inode:[pidfd]", "/dev/fuse", "/proc/%d/mountinfo" % watcher,
             os.path.dirname(os.path.realpath(mnt))] +
            ["/dev/null"] * 3), fds
        assert [fds[i] for i in range(3)] == ["/dev/null"] * 3, fds
        assert run(["umount", mnt], timeout=60).returncode == 0
        assert wait_gone(pid) and wait_gone(watcher, timeout=5)
        assert not is_mounted(mnt)
