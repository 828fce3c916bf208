# SPDX-License-Identifier: MIT
"""`stipple extract` as root under a directory with a default ACL: the owner of DIR's
parent (an adversary of a root extract, stipple(1) GUARANTEES) runs `setfacl -d -m
u:eve:rwx` on it. Every node extract makes would inherit that entry, masked only by the
0700 or 0600 it is made with, until the final chmod to the image's mode widens the mask
(a 0640 file readable by eve, a 4750 helper she can run). Each node must end up with the
ACLs the image gives it and no other, with --acls and --no-acls, whether extract makes
DIR or DIR was there (its own ACLs stay: it is the user's), and without /proc, where a
FIFO's ACL can only go by its name. `nobody` stands for eve; the attributes are read with
os.getxattr, not through stipple."""

import errno
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import STIPPLE, STIPPLE_READERS, build_image, run
from imageutil import FAST
from test_extract_races import OLD_KERNEL_C, compile_c, no_proc

ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"
# the parent's default ACL: nobody rwx, and a mask that lets it through
INHERIT = "u:nobody:rwx,m::rwx"

pytestmark = pytest.mark.needs_root("files of root's under a directory of another's")


@pytest.fixture
def base():
    """A directory of the test's own under /tmp, removed afterwards; skipped where
    setfacl is missing or the filesystem holds no ACL."""
    if not (shutil.which("setfacl") and shutil.which("getfacl")):
        pytest.skip("needs setfacl and getfacl")
    path = tempfile.mkdtemp(prefix="stp-acl-", dir="/tmp")
    try:
        if setfacl(path, "-d", "-m", INHERIT).returncode:
            pytest.skip("the filesystem of /tmp holds no ACL")
        setfacl(path, "-k")
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def setfacl(path, *args):
    return subprocess.run(["setfacl", *args, path], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def getfacl(path, *args):
    r = subprocess.run(["getfacl", "--omit-header", "--absolute-names", *args, path],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def make_source(root, acl_on=None):
    """The tree: a 0640 file, a 0755 dir with a file, a 4750 file, a FIFO; with ACL_ON, an
    ACL of its own (daemon may read) on that file."""
    os.mkdir(root)
    with open(os.path.join(root, "shadow"), "wb") as f:
        f.write(b"root:*:1::::::\n")
    os.chmod(os.path.join(root, "shadow"), 0o640)
    os.mkdir(os.path.join(root, "dir"))
    os.chmod(os.path.join(root, "dir"), 0o755)
    with open(os.path.join(root, "dir", "file"), "wb") as f:
        f.write(b"file\n")
    with open(os.path.join(root, "helper"), "wb") as f:
        f.write(b"#!/bin/sh\n")
    os.chmod(os.path.join(root, "helper"), 0o4750)
    os.mkfifo(os.path.join(root, "fifo"))
    if acl_on:
        r = setfacl(os.path.join(root, acl_on), "-m", "u:daemon:r")
        assert r.returncode == 0, r.stderr
    return root


def image_of(base, acl_on=None):
    source = make_source(os.path.join(base, "src"), acl_on)
    return source, build_image(source, os.path.join(base, "acl.stipple"), *FAST)


def extract(image, dest, *options):
    r = subprocess.run([STIPPLE, "extract", *options, image, dest], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""


def acl(path, name):
    """The ACL attribute NAME of PATH, or None when it has none."""
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError as e:
        if e.errno == errno.ENODATA:
            return None
        raise


def nodes(root):
    """Every path below ROOT."""
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            yield os.path.join(dirpath, n)


def acls_of(paths):
    """{path: (access ACL, default ACL)} of those PATHS that carry one."""
    out = {}
    for p in paths:
        access = acl(p, ACCESS)
        default = acl(p, DEFAULT) if stat.S_ISDIR(os.lstat(p).st_mode) else None
        if access is not None or default is not None:
            out[p] = (access, default)
    return out


def assert_modes(source, dest):
    """Each node's mode as the image has it: the mask the final chmod sets changes none."""
    for p in nodes(source):
        q = os.path.join(dest, os.path.relpath(p, source))
        assert os.lstat(q).st_mode == os.lstat(p).st_mode, q


@pytest.mark.parametrize("options", [(), ("--acls",), ("--no-acls",)])
def test_made_dir_and_nodes_carry_no_inherited_acl(base, options):
    """DIR made by extract, below a parent with a default ACL: neither DIR nor any node
    below it carries an access or default ACL, as the image gives none."""
    source, image = image_of(base)
    parent = os.path.join(base, "ws")
    os.mkdir(parent)
    assert setfacl(parent, "-d", "-m", INHERIT).returncode == 0
    dest = os.path.join(parent, "out")
    extract(image, dest, *options)
    carried = acls_of([dest, *nodes(dest)])
    assert carried == {}, "\n".join(p + ":\n" + getfacl(p) for p in carried)
    assert_modes(source, dest)


@pytest.mark.parametrize("options,restored", [(("--acls",), True), (("--no-acls",), False)])
def test_image_acl_alone(base, options, restored):
    """The source's own ACL on one file: --acls restores exactly it, nothing inherited
    added; --no-acls leaves that file without any; no other node carries one."""
    source, image = image_of(base, acl_on="shadow")
    parent = os.path.join(base, "ws")
    os.mkdir(parent)
    assert setfacl(parent, "-d", "-m", INHERIT).returncode == 0
    dest = os.path.join(parent, "out")
    extract(image, dest, *options)
    shadow = os.path.join(dest, "shadow")
    carried = acls_of([dest, *nodes(dest)])
    want = {shadow: (acl(os.path.join(source, "shadow"), ACCESS), None)} if restored else {}
    assert carried == want, "\n".join(p + ":\n" + getfacl(p) for p in carried)
    if restored:
        assert getfacl(shadow) == getfacl(os.path.join(source, "shadow"))
        assert "nobody" not in getfacl(shadow)
    assert_modes(source, dest)


def test_existing_dir_keeps_its_acl(base):
    """An empty DIR that was there, with a default ACL of its own: it keeps it (the
    user's), and no node extract makes below it carries one."""
    source, image = image_of(base)
    dest = os.path.join(base, "out")
    os.mkdir(dest)
    assert setfacl(dest, "-d", "-m", INHERIT).returncode == 0
    before = (acl(dest, ACCESS), acl(dest, DEFAULT), getfacl(dest, "-d"))
    extract(image, dest)
    assert (acl(dest, ACCESS), acl(dest, DEFAULT), getfacl(dest, "-d")) == before
    carried = acls_of(nodes(dest))
    assert carried == {}, "\n".join(p + ":\n" + getfacl(p) for p in carried)
    assert_modes(source, dest)


@pytest.mark.parametrize("old_kernel", [False, True])
def test_no_proc(base, old_kernel):
    """Without /proc, the FIFO (reached O_PATH) made in a DIR with a default ACL, root's
    and no one else's to write, loses what it inherited by its name (removexattrat, Linux
    6.13). Before 6.13 no safe way is left: the FIFO is named, stays 0600 with the entry
    masked off, and the status is 1; the rest comes out as the image has it."""
    source, image = image_of(base)
    dest = os.path.join(base, "out")
    os.mkdir(dest, 0o755)
    assert setfacl(dest, "-d", "-m", INHERIT).returncode == 0
    launch = [compile_c(OLD_KERNEL_C, os.path.join(base, "oldkernel"), "-lseccomp")
              ] if old_kernel else []
    r = run(no_proc(*launch, STIPPLE_READERS, "extract", image, dest), timeout=120)
    fifo = os.path.join(dest, "fifo")
    carried = acls_of(nodes(dest))
    if not old_kernel:
        assert r.returncode == 0, r.stderr
        assert carried == {}, "\n".join(p + ":\n" + getfacl(p) for p in carried)
        assert_modes(source, dest)
        return
    assert r.returncode == 1, r.stderr
    assert "cannot remove the ACL %s inherits from its directory's default ACL" % fifo in (
        r.stderr)
    assert set(carried) == {fifo}, "\n".join(p + ":\n" + getfacl(p) for p in carried)
    assert stat.S_IMODE(os.lstat(fifo).st_mode) == 0o600
    assert "user:nobody:rwx\t#effective:---" in getfacl(fifo)
    os.unlink(fifo)
    os.unlink(os.path.join(source, "fifo"))
    assert_modes(source, dest)
