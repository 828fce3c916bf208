# SPDX-License-Identifier: MIT
"""`stipple extract` run by root into a directory another local user can write (issue 28,
items 1 and 2), and run by a user (item 3). The attacker is a real other uid: a throwaway
system user, whose Python process swaps what extract just made for a symlink to a
root-owned victim, in a tight loop, while a real `stipple extract` runs as root. The
victim must come out as it went in: mode, owner, bytes and link count, and nothing
outside DIR may be created or linked."""

import contextlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from conftest import STIPPLE, STIPPLE_READERS, build_image, run
from imageutil import FAST

SECRET = b"root only\n"

pytestmark = pytest.mark.needs_root("the races run as a second user")


@pytest.fixture(scope="module")
def attacker():
    """A throwaway system user with a unique name, removed again: (uid, gid)."""
    if not shutil.which("useradd"):
        pytest.skip("needs useradd")
    name = "stp-x-%s" % uuid.uuid4().hex[:10]
    r = run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
             "/nonexistent", "--shell", "/usr/sbin/nologin", name], timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        run(["userdel", name], timeout=60)
        run(["groupdel", name], timeout=60)  # gone with the user on most systems


@pytest.fixture
def arena():
    """A 0755 directory the attacker can reach (the test's tmp_path is root's alone),
    holding the victim (root's, 0600) and the sources; removed afterwards."""
    base = tempfile.mkdtemp(prefix="stp-race-", dir="/tmp")
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def make_victim(base):
    """A root-owned 0600 file in a directory of its own (the link attack needs both)."""
    vdir = os.path.join(base, "victim")
    os.mkdir(vdir, 0o755)
    victim = os.path.join(vdir, "f")
    with open(victim, "wb") as f:
        f.write(SECRET)
    os.chmod(victim, 0o600)
    st = os.stat(victim)
    return vdir, victim, (st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_ino)


def assert_victim_intact(victim, before, dest):
    st = os.stat(victim)
    assert (st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_ino) == before, (
        "the victim changed: mode %o uid %d nlink %d" % (st.st_mode, st.st_uid, st.st_nlink))
    with open(victim, "rb") as f:
        assert f.read() == SECRET
    for root, dirs, files in os.walk(dest):
        for n in dirs + files:
            assert os.lstat(os.path.join(root, n)).st_ino != st.st_ino, (
                "%s is the victim" % os.path.join(root, n))


def spawn_attacker(uid_gid, script, *args):
    uid, gid = uid_gid
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)],
                            user=uid, group=gid, extra_groups=[], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def open_dirs(base, round_):
    """DIR: root's, 0777 and not sticky, so the attacker may rename anything in it; and
    a directory of the attacker's own beside it, to prepare symlinks in."""
    dirs = []
    for name in ("dest-%d" % round_, "own-%d" % round_):
        dirs.append(os.path.join(base, name))
        os.mkdir(dirs[-1])
        os.chmod(dirs[-1], 0o777)
    return dirs


def finish(proc):
    proc.kill()
    out, err = proc.communicate(timeout=30)
    return out, err


# Item 1: as each special file appears in DIR, swap it for a symlink to the victim. The
# old extract then chmods (by name, following) the victim to the fifo's 0666.
SWAP_NODES = r"""
import os, sys, time
dest, victim, count, own = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + 60
swapped = 0
for i in range(count):
    name = os.path.join(dest, "n%04d" % i)
    tmp = os.path.join(own, "a%04d" % i)
    os.symlink(victim, tmp)
    while not os.path.lexists(name):
        if time.monotonic() > deadline:
            sys.exit(0)
    try:
        os.rename(tmp, name)
        swapped += 1
    except OSError:
        pass
print(swapped)
"""

NODES = 1500


@pytest.fixture(scope="module")
def fifo_image(tmp_path_factory):
    """NODES fifos, mode 0666, each with trusted.* attributes that widen the window
    between mknod and chmod as the old code had it."""
    base = tmp_path_factory.mktemp("fifos")
    src = base / "src"
    src.mkdir()
    for i in range(NODES):
        p = src / ("n%04d" % i)
        os.mkfifo(p)
        os.chmod(p, 0o666)
        for k in range(4):
            os.setxattr(p, "trusted.pad%d" % k, b"x" * 64)
    return build_image(src, base / "fifos.stipple", *FAST)


def test_root_extract_never_changes_a_node_swapped_for_a_symlink(attacker, arena,
                                                                  fifo_image):
    vdir, victim, before = make_victim(arena)
    swaps = 0
    for round_ in range(3):
        dest, own = open_dirs(arena, round_)
        proc = spawn_attacker(attacker, SWAP_NODES, dest, victim, NODES, own)
        time.sleep(0.3)  # the attacker is up and spinning
        r = run([STIPPLE, "extract", fifo_image, dest], timeout=300)
        out, err = finish(proc)
        assert not err, err
        assert_victim_intact(victim, before, dest)
        swaps += sum(os.path.islink(os.path.join(dest, n)) for n in os.listdir(dest))
        if r.returncode:  # a node swapped before it was pinned is named
            assert "replaced while extracting" in r.stderr, r.stderr[-2000:]
        for n in os.listdir(dest):
            p = os.path.join(dest, n)
            if not os.path.islink(p):
                assert stat.S_ISFIFO(os.lstat(p).st_mode), n
    assert swaps, "the attacker never swapped a node: the test proves nothing"


# Item 2: once "z" appears (the walk has left D), swap D for a symlink to the victim's
# directory. The old extract then links z/link to "D/f" by name: the victim. D is "d" in
# DIR, or "a/d" where "a" is 0777 in the image, which the old extract gave "a" as soon as
# its contents were done.
SWAP_DIR = r"""
import os, sys, time
dest, vdir, own, swap = sys.argv[1:5]
deadline = time.monotonic() + 60
os.symlink(vdir, os.path.join(own, "sym"))
while not os.path.lexists(os.path.join(dest, "z")):
    if time.monotonic() > deadline:
        sys.exit(0)
try:
    os.rename(os.path.join(dest, swap), os.path.join(dest, swap + ".moved"))
    os.rename(os.path.join(own, "sym"), os.path.join(dest, swap))
    print("swapped")
except OSError as e:
    print("refused: %s" % e)
"""


@pytest.fixture(scope="module")
def link_image(tmp_path_factory):
    """d/f, a/d/f (a: 0777) and z/link, z/link2 naming them; between them in z, files
    enough to hold the window open whatever the machine's speed."""
    base = tmp_path_factory.mktemp("links")
    src = base / "src"
    for d in ("d", "a/d", "z"):
        (src / d).mkdir(parents=True)
    for f in ("d/f", "a/d/f"):
        (src / f).write_bytes(b"the image's file\n")
    for i in range(3000):
        (src / "z" / ("a%04d" % i)).write_bytes(b"%d\n" % i)
    os.link(src / "d" / "f", src / "z" / "link")
    os.link(src / "a" / "d" / "f", src / "z" / "link2")
    os.chmod(src / "a", 0o777)
    return build_image(src, base / "links.stipple", *FAST)


@pytest.mark.parametrize("swap", ["d", "a/d"])
def test_root_extract_never_links_through_a_swapped_directory(attacker, arena, link_image,
                                                               swap):
    vdir, victim, before = make_victim(arena)
    for round_ in range(3):
        dest, own = open_dirs(arena, round_)
        proc = spawn_attacker(attacker, SWAP_DIR, dest, vdir, own, swap)
        time.sleep(0.3)
        r = run([STIPPLE, "extract", link_image, dest], timeout=300)
        out, err = finish(proc)
        assert not err, err
        assert_victim_intact(victim, before, dest)
        assert sorted(os.listdir(vdir)) == ["f"]
        if out.strip() == "swapped":  # "d" only: "a" stays 0700 and root's till the end
            assert r.returncode != 0
            assert "a symlink now lies on the way to its first name" in r.stderr, r.stderr
        else:
            assert r.returncode == 0, r.stderr
            assert "Permission denied" in out, out


# Item 3: as a user, the image decides nothing beyond the user's own user.* attributes,
# unless asked: its ACLs (default ones included) would choose who can read and write
# what the user later creates in that tree, whatever the umask.
from treeutil import ACL_ACCESS, ACL_DEFAULT  # noqa: E402

ACL_NAMES = ("system.posix_acl_access", "system.posix_acl_default")
OTHERS = {"trusted.t": b"trusted", "security.s": b"security"}
OVERLAY = {"trusted.overlay.redirect": b"/etc", "trusted.overlay.opaque": b"y"}


@pytest.fixture
def attr_image(arena):
    """A file with an ACL, user.*, trusted.* and security.* attributes; a directory with
    an ACL and a default ACL. Readable by everyone, in the arena."""
    src = os.path.join(arena, "attr-src")
    os.mkdir(src)
    f, d = os.path.join(src, "file"), os.path.join(src, "dir")
    with open(f, "wb") as out:
        out.write(b"data\n")
    os.mkdir(d)
    for path in (f, d):
        os.setxattr(path, "system.posix_acl_access", ACL_ACCESS)
        os.setxattr(path, "user.u", b"mine")
        for name, value in {**OTHERS, **OVERLAY}.items():
            os.setxattr(path, name, value)
    os.setxattr(d, "system.posix_acl_default", ACL_DEFAULT)
    image = build_image(src, os.path.join(arena, "attrs.stipple"), *FAST)
    os.chmod(image, 0o644)
    return image


def extract_as(user, image, dest, *options):
    uid, gid = user
    return subprocess.run([STIPPLE, "extract", *options, image, dest], user=uid, group=gid,
                          extra_groups=[], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


def xattr_names(path):
    return set(os.listxattr(path, follow_symlinks=False))


@pytest.mark.parametrize("options, want", [
    ((), {"user.u"}),
    (("--acls",), {"user.u", *ACL_NAMES}),
    (("--no-xattrs",), set()),
    (("--no-xattrs", "--acls"), set(ACL_NAMES)),
])
def test_user_extract_restores_user_xattrs_and_acls_only_when_asked(attacker, arena,
                                                                    attr_image, options,
                                                                    want):
    dest, _ = open_dirs(arena, 0)
    out = os.path.join(dest, "tree")
    r = extract_as(attacker, attr_image, out, *options)
    assert r.returncode == 0, r.stderr
    assert "trusted" not in r.stderr and "security" not in r.stderr, r.stderr
    assert xattr_names(os.path.join(out, "file")) == want - {"system.posix_acl_default"}
    assert xattr_names(os.path.join(out, "dir")) == want
    if "system.posix_acl_default" in want:  # the access ACL's mask has the umask's cut
        assert os.getxattr(os.path.join(out, "dir"), "system.posix_acl_default") == ACL_DEFAULT


def test_user_extract_with_xattrs_tries_every_namespace(attacker, arena, attr_image):
    """--xattrs asks for all: the kernel refuses trusted.* and security.* to a user, and
    each refusal is a warning, not a failure."""
    dest, _ = open_dirs(arena, 0)
    out = os.path.join(dest, "tree")
    r = extract_as(attacker, attr_image, out, "--xattrs")
    assert r.returncode == 0, r.stderr
    assert "extended attribute trusted.t not restored" in r.stderr
    assert xattr_names(os.path.join(out, "file")) == {"user.u"}


def test_root_extract_restores_everything_by_default(arena, attr_image):
    out = os.path.join(arena, "root-tree")
    r = run([STIPPLE, "extract", attr_image, out], timeout=120)
    assert r.returncode == 0, r.stderr
    assert xattr_names(os.path.join(out, "dir")) == {"user.u", *OTHERS, *ACL_NAMES}
    # overlayfs's links between layers are not the file's (review 7, finding 12)
    assert "4 trusted.overlay.* attributes not restored" in r.stderr, r.stderr
    r = run([STIPPLE, "extract", "--xattrs", attr_image, out + "3"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert xattr_names(os.path.join(out + "3", "dir")) == \
        {"user.u", *OTHERS, *OVERLAY, *ACL_NAMES}
    assert os.getxattr(os.path.join(out + "3", "file"), "trusted.overlay.redirect") == b"/etc"
    r = run([STIPPLE, "extract", "--no-acls", "--no-xattrs", attr_image, out + "2"],
            timeout=120)
    assert r.returncode == 0, r.stderr
    assert xattr_names(os.path.join(out + "2", "dir")) == set()


# DIR itself: a symlink is followed only when root, the caller or the owner of what it
# leads to owns it (and not another's in a sticky world-writable directory). The owner of
# the directory holding the link must not send root (and its chown of DIR) into a
# directory of someone else's: review 7, finding 8.
@pytest.mark.parametrize("link_owner, holder_owner, target_owner, followed", [
    ("attacker", "root", "root", False),         # planted in root's shared directory
    ("root", "root", "root", True),
    ("attacker", "attacker", "root", False),     # her own directory, root's target
    ("attacker", "attacker", "attacker", True),  # her directory and her target
])
def test_root_extract_follows_dir_only_through_a_trusted_symlink(attacker, arena, fifo_image,
                                                                 link_owner, holder_owner,
                                                                 target_owner, followed):
    ids = {"root": (0, 0), "attacker": attacker}
    holder, target = os.path.join(arena, "holder"), os.path.join(arena, "target")
    os.mkdir(holder, 0o777)
    os.mkdir(target, 0o755)
    os.chmod(holder, 0o777 if holder_owner == "root" else 0o755)
    os.chown(holder, *ids[holder_owner])
    os.chown(target, *ids[target_owner])
    link = os.path.join(holder, "dest")
    os.symlink(target, link)
    os.lchown(link, *ids[link_owner])
    before = os.stat(target)
    r = run([STIPPLE, "extract", fifo_image, link], timeout=300)
    if followed:
        assert r.returncode == 0, r.stderr
        assert len(os.listdir(target)) == NODES
    else:
        assert r.returncode == 1
        assert "a symlink owned by uid %d" % attacker[0] in r.stderr, r.stderr
        assert os.listdir(target) == [] and os.path.islink(link)
        after = os.stat(target)
        assert (after.st_mode, after.st_uid, after.st_gid) == \
            (before.st_mode, before.st_uid, before.st_gid), "the target was settled"


def test_root_extract_follows_no_planted_link_above_dir(attacker, arena, fifo_image):
    """A directory on the way to DIR, a link of the attacker's in her own directory to a
    directory of root's: not followed, and nothing is made there."""
    holder, target = os.path.join(arena, "holder"), os.path.join(arena, "target")
    os.mkdir(holder, 0o755)
    os.mkdir(target, 0o755)
    os.chown(holder, *attacker)
    os.symlink(target, os.path.join(holder, "sub"))
    os.lchown(os.path.join(holder, "sub"), *attacker)
    r = run([STIPPLE, "extract", fifo_image, os.path.join(holder, "sub", "new")], timeout=300)
    assert r.returncode == 1
    assert "%s: a symlink owned by uid %d" % (os.path.join(holder, "sub"), attacker[0]) \
        in r.stderr, r.stderr
    assert os.listdir(target) == []


# A sibling swapped in: between mkdirat and open, the attacker exchanges (renameat2
# RENAME_EXCHANGE) the directory extract just made with one it made and filled before.
# The old extract then took the filled one for the new one: a%04d (0700, holding a
# secret) got b%04d's final 0755.
EXCHANGE_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <fcntl.h>
#include <linux/fs.h>
int main(int argc, char **argv)
{
	int pairs = atoi(argv[2]), done = 0;
	time_t end = time(NULL) + 60;
	char a[4200], b[4200];

	for (int i = 0; i < pairs && time(NULL) < end; i++) {
		snprintf(a, sizeof(a), "%s/a%04d", argv[1], i);
		snprintf(b, sizeof(b), "%s/b%04d", argv[1], i);
		while (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE))
			if (time(NULL) >= end)
				break;
		done++;
	}
	printf("%d\n", done);
	return 0;
}
"""

PAIRS = 300
HIDDEN = re.compile(r'\.\.\. and (\d+) more messages like "[^"\n]*replaced while extracting')


def replaced_count(stderr):
    """Nodes named as replaced: the lines shown, and those a kind's limit left out of
    them (cli.c: "... and N more messages like ...")."""
    return stderr.count("replaced while extracting") - len(HIDDEN.findall(stderr)) + sum(
        int(n) for n in HIDDEN.findall(stderr))


def extract_racing(attacker, helper, image, dest):
    """Root's extract of IMAGE into DEST while the attacker runs HELPER on DEST: the
    extract's result and what the helper printed. A failed extract must say why."""
    proc = subprocess.Popen([helper, dest, str(PAIRS)], user=attacker[0],
                            group=attacker[1], extra_groups=[], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = run([STIPPLE, "extract", image, dest], timeout=300)
    out, err = proc.communicate(timeout=120)
    assert not err, err
    if r.returncode:
        assert "replaced while extracting" in r.stderr, r.stderr[-2000:]
    return r, out


def compile_c(src, out, *libs):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    with open(out + ".c", "w") as f:
        f.write(src)
    r = run(["gcc", "-O2", "-o", out, out + ".c", *libs], timeout=120)
    assert r.returncode == 0, r.stderr
    os.chmod(out, 0o755)
    return out


@pytest.fixture(scope="module")
def sibling_image(tmp_path_factory):
    """a%04d/ (0700, holding a 0644 secret), then b%04d/ (0755, empty), PAIRS of each."""
    base = tmp_path_factory.mktemp("siblings")
    src = base / "src"
    src.mkdir()
    for i in range(PAIRS):
        (src / ("a%04d" % i)).mkdir(mode=0o700)
        (src / ("a%04d" % i) / "data").write_bytes(SECRET)
        os.chmod(src / ("a%04d" % i) / "data", 0o644)
        os.chmod(src / ("a%04d" % i), 0o700)
        (src / ("b%04d" % i)).mkdir()
        os.chmod(src / ("b%04d" % i), 0o755)
    return build_image(src, base / "siblings.stipple", *FAST)


READ_ALL = r"""
import os, sys
got = 0
for root, dirs, files in os.walk(sys.argv[1]):
    for n in files:
        try:
            with open(os.path.join(root, n), "rb") as f:
                got += f.read() == sys.argv[2].encode()
        except OSError:
            pass
print(got)
"""


def test_root_extract_never_takes_a_swapped_sibling_for_a_new_directory(attacker, arena,
                                                                        sibling_image):
    helper = compile_c(EXCHANGE_C, os.path.join(arena, "exchange"))
    exchanged = 0
    for round_ in range(3):
        dest, _ = open_dirs(arena, round_)
        r, out = extract_racing(attacker, helper, sibling_image, dest)
        exchanged += int(out or 0)
        print("round %d: %s pairs exchanged, %d caught" % (
            round_, out.strip(), replaced_count(r.stderr)))
        for root, dirs, files in os.walk(dest):
            for n in files:
                st = os.lstat(os.path.join(root, n))
                parent = os.lstat(root)
                assert parent.st_mode & 0o7777 == 0o700 and parent.st_uid == 0, (
                    "%s holds a secret and is %o" % (root, parent.st_mode))
        got = spawn_attacker(attacker, READ_ALL, dest, SECRET.decode()).communicate(
            timeout=120)[0]
        assert got.strip() == "0", "the attacker read %s secrets" % got.strip()
    assert exchanged, "the attacker never exchanged a pair: the test proves nothing"


# Without /proc (a chroot, a container) and on kernels without openat2 (ENOSYS before
# 5.6, EPERM under some seccomp profiles), fchmodat2 (6.6) or setxattrat and
# removexattrat (6.13): hard links, modes of FIFOs and directories must come out right
# all the same.
@pytest.fixture(scope="module")
def plain_image(tmp_path_factory):
    """d1/ 0750 and d2/ 0711; f with hard links d1/g and d2/sub/h; FIFOs 0644 at the top
    and in d2/sub, this one with a trusted.* attribute; a symlink."""
    base = tmp_path_factory.mktemp("plain")
    src = base / "src"
    (src / "d2" / "sub").mkdir(parents=True)
    (src / "d1").mkdir()
    (src / "f").write_bytes(b"linked\n")
    os.link(src / "f", src / "d1" / "g")
    os.link(src / "f", src / "d2" / "sub" / "h")
    for p in (src / "fifo", src / "d2" / "sub" / "fifo"):
        os.mkfifo(p)
        os.chmod(p, 0o644)
    os.setxattr(src / "d2" / "sub" / "fifo", "trusted.t", b"kept")
    os.symlink("f", src / "link")
    os.chmod(src / "d1", 0o750)
    os.chmod(src / "d2", 0o711)
    return build_image(src, base / "plain.stipple", *FAST)


def assert_plain_tree(out):
    ino = os.lstat(os.path.join(out, "f")).st_ino
    for p in ("d1/g", "d2/sub/h"):
        assert os.lstat(os.path.join(out, p)).st_ino == ino, p
    assert os.lstat(os.path.join(out, "f")).st_nlink == 3
    for p, mode in (("d1", 0o750), ("d2", 0o711), ("fifo", 0o644), ("d2/sub/fifo", 0o644)):
        st = os.lstat(os.path.join(out, p))
        assert stat.S_IMODE(st.st_mode) == mode, "%s is %o" % (p, st.st_mode)
    assert stat.S_ISFIFO(os.lstat(os.path.join(out, "fifo")).st_mode)
    assert os.readlink(os.path.join(out, "link")) == "f"


# Makes openat2, fchmodat2, setxattrat and removexattrat fail as an older kernel or a
# container's filter has them, then runs the rest of the command line.
OLD_KERNEL_C = r"""
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int nrs[] = { 437, 452, 463, 466 }; /* openat2, fchmodat2, setxattrat, removexattrat */

	for (int i = 0; i < 4; i++)
		if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nrs[i], 0))
			return 125;
	if (seccomp_load(ctx))
		return 125;
	execv(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
"""


def no_proc(*cmd):
    """CMD in a mount namespace of its own where /proc is an empty tmpfs."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs none /proc && exec "$@"', "sh", *cmd]


@pytest.mark.parametrize("old_kernel", [False, True])
def test_root_extract_needs_no_proc(arena, plain_image, old_kernel):
    launch = []
    if old_kernel:
        launch = [compile_c(OLD_KERNEL_C, os.path.join(arena, "oldkernel"), "-lseccomp")]
    out = os.path.join(arena, "out")
    r = run(no_proc(*launch, STIPPLE_READERS, "extract", plain_image, out), timeout=120)
    assert r.returncode == 0, r.stderr
    assert_plain_tree(out)
    fifo = os.path.join(out, "d2/sub/fifo")
    if old_kernel:  # neither setxattrat nor /proc: no safe way, a warning
        assert "%s: extended attribute trusted.t not restored" % fifo in r.stderr, r.stderr
    else:
        assert os.getxattr(fifo, "trusted.t", follow_symlinks=False) == b"kept"


def test_root_extract_without_openat2_walks_beneath_dir(arena, plain_image):
    """With /proc, openat2 alone missing: the walk one name at a time."""
    launch = compile_c(OLD_KERNEL_C, os.path.join(arena, "oldkernel"), "-lseccomp")
    out = os.path.join(arena, "out")
    r = run([launch, STIPPLE, "extract", plain_image, out], timeout=120)
    assert r.returncode == 0, r.stderr
    assert_plain_tree(out)


def test_root_extract_names_a_mode_it_cannot_set_safely(arena, plain_image):
    """No fchmodat2, no /proc, and a FIFO in a DIR others can write: no safe call is left
    for its mode; it is named, the rest comes out right, and the status is 1."""
    launch = compile_c(OLD_KERNEL_C, os.path.join(arena, "oldkernel"), "-lseccomp")
    dest, _ = open_dirs(arena, 0)
    r = run(no_proc(launch, STIPPLE_READERS, "extract", plain_image, dest), timeout=120)
    assert r.returncode == 1, r.stderr
    assert "cannot set the mode of %s/fifo: this kernel has no fchmodat2" % dest in r.stderr
    assert stat.S_IMODE(os.lstat(os.path.join(dest, "fifo")).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(os.path.join(dest, "d2/sub/fifo")).st_mode) == 0o644


# overlayfs (a container's root): its symlinks and FIFOs report the st_dev of the layer
# below, not DIR's, and the old extract refused them as replaced.
def test_root_extract_into_overlayfs(arena, plain_image):
    base = os.path.join(arena, "ovl")
    lower, upper_fs, merged = (os.path.join(base, n) for n in ("lower", "tmpfs", "merged"))
    for d in (lower, upper_fs, merged):
        os.makedirs(d)
    mounted = []
    try:
        r = run(["mount", "-t", "tmpfs", "stp-ovl-upper", upper_fs], timeout=30)
        if r.returncode:
            pytest.skip("cannot mount tmpfs: %s" % r.stderr)
        mounted.append(upper_fs)
        upper, work = os.path.join(upper_fs, "upper"), os.path.join(upper_fs, "work")
        os.mkdir(upper)
        os.mkdir(work)
        r = run(["mount", "-t", "overlay", "stp-ovl", "-o", "lowerdir=%s,upperdir=%s,"
                 "workdir=%s" % (lower, upper, work), merged], timeout=30)
        if r.returncode:
            pytest.skip("cannot mount overlayfs: %s" % r.stderr)
        mounted.append(merged)
        out = os.path.join(merged, "out")
        r = run([STIPPLE, "extract", plain_image, out], timeout=120)
        assert r.returncode == 0, r.stderr
        assert_plain_tree(out)
    finally:
        for m in reversed(mounted):
            run(["umount", m], timeout=30)


@pytest.fixture(scope="module")
def fifo_pairs_image(tmp_path_factory):
    """a%04d and b%04d, PAIRS of each: FIFOs, 0600 with mtime 1,000,000,000 and 0644 with
    mtime 2,000,000,000."""
    base = tmp_path_factory.mktemp("fifo-pairs")
    src = base / "src"
    src.mkdir()
    for i in range(PAIRS):
        for name, mode, mtime in (("a", 0o600, 1_000_000_000), ("b", 0o644, 2_000_000_000)):
            p = src / ("%s%04d" % (name, i))
            os.mkfifo(p)
            os.chmod(p, mode)
            os.utime(p, (mtime, mtime))
    return build_image(src, base / "fifo-pairs.stipple", *FAST)


def test_root_extract_never_takes_an_earlier_fifo_for_a_new_one(attacker, arena,
                                                              fifo_pairs_image):
    """Between mknodat and the open that pins it, the attacker exchanges the FIFO just
    made (b%04d) with the one extract made and finished before (a%04d): the same type,
    root's, one link. The old extract took the finished one for the new one and gave it
    b's attributes, leaving the new one as mknodat made it, unreported. Every node must
    now come out with its image's time, or be named as replaced."""
    helper = compile_c(EXCHANGE_C, os.path.join(arena, "exchange"))
    exchanged = caught = unset = 0
    for round_ in range(3):
        dest, _ = open_dirs(arena, round_)
        r, out = extract_racing(attacker, helper, fifo_pairs_image, dest)
        exchanged += int(out or 0)
        caught += replaced_count(r.stderr)
        for name in os.listdir(dest):
            st = os.lstat(os.path.join(dest, name))
            assert stat.S_ISFIFO(st.st_mode), name
            unset += st.st_mtime not in (1_000_000_000, 2_000_000_000)
        print("round %d: %s pairs exchanged, %d caught" % (round_, out.strip(), caught))
    assert exchanged, "the attacker never exchanged a pair: the test proves nothing"
    assert unset <= caught, "%d nodes never got their attributes, %d reported" % (unset,
                                                                                 caught)


@pytest.fixture(scope="module")
def relink_image(tmp_path_factory):
    """f, then m, 256 MiB (the time the attacker has: extract makes no inode while it
    writes it, so none takes f's freed number first), then z/g, a second name of f:
    root's, 0644."""
    base = tmp_path_factory.mktemp("relink")
    src = base / "src"
    (src / "z").mkdir(parents=True)
    (src / "f").write_bytes(b"the image's\n")
    os.chmod(src / "f", 0o644)
    with open(src / "m", "wb") as m:
        for i in range(4096):
            m.write(bytes([i % 251 + 1]) * 65536)
    os.link(src / "f", src / "z" / "g")
    return build_image(src, base / "relink.stipple", *FAST)


# The attacker: once extract made DIR/f, unlink it and make files in DIR until one gets
# f's freed inode number (ext4 gives it back at once), then put that one in f's place.
REUSE = r"""
import os, sys, time
dest = sys.argv[1]
f = os.path.join(dest, "f")
end = time.time() + 60
while not os.path.exists(f) and time.time() < end:
    pass
ino = os.lstat(f).st_ino
os.unlink(f)
try:
    for i in range(5000):
        p = os.path.join(dest, ".t%d" % i)
        with open(p, "w") as out:
            out.write("the attacker's\n")
        if os.lstat(p).st_ino == ino:
            os.rename(p, f)
            print("reused")
            break
except PermissionError:  # DIR settled: too late
    pass
"""


def test_root_extract_never_links_to_a_node_that_took_a_freed_inode_number(attacker, arena,
                                                                           relink_image):
    """A user who can write DIR unlinks f, the first name of an inode with two, and gets
    its inode number back for a file of their own: the old extract, which knew f by its
    device and inode number alone, linked z/g to the user's file inside the tree. The
    owner tells them apart: z/g is refused as replaced, never the attacker's file."""
    reused = 0
    for round_ in range(3):
        dest, _ = open_dirs(arena, round_)
        proc = spawn_attacker(attacker, REUSE, dest)
        r = run([STIPPLE, "extract", relink_image, dest], timeout=300)
        out, err = proc.communicate(timeout=120)
        assert not err, err
        g = os.path.join(dest, "z", "g")
        if os.path.exists(g):
            with open(g, "rb") as f:
                assert f.read() == b"the image's\n", "z/g is the attacker's file"
            assert os.lstat(g).st_uid == 0
        if "reused" in out:
            reused += 1
            assert r.returncode == 1 and "replaced while extracting" in r.stderr, (
                r.returncode, r.stderr[-2000:])
    assert reused, "the attacker never got the inode number back: the test proves nothing"
