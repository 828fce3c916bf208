# SPDX-License-Identifier: MIT
"""`stipple extract` of trees deeper than the descriptors it may hold: a chain of 300
directories under an open file limit of 64 (soft and hard), and one of 1,100, whose paths
still fit PATH_MAX, under a hard limit of 1,024, where extract used to stop with "Too
many open files" (GNU tar extracts both). Files sit at several levels, some in shallow
directories that the walk reaches only after the deep subtree returns (so a directory
closed on the way down is used again), a directory is made there too, and two files each
have a shallow and a deep name. The result is compared with the source tree the image
was built from, walked with os.listdir and os.lstat (treeutil.compare_trees), not with
stipple's own listing: names, types, modes, owners, times, bytes and link counts. Run by
root and by nobody; the exit status must be 0 and stderr empty."""

import os
import pwd
import resource
import shutil
import subprocess
import tempfile

import pytest

import treeutil
from conftest import STIPPLE, STIPPLE_READERS, build_image, run
from imageutil import FAST

NAME = "d"  # each level's subdirectory: "a-..." sorts before it, "z-..." after


def deep_path(root, level):
    """The directory LEVEL levels below ROOT."""
    return os.path.join(root, *[NAME] * level)


def write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def make_deep(root, levels):
    """A chain of LEVELS directories below ROOT, with files before and after the
    subdirectory at several levels, a directory after it near the top, modes other than
    the default, and two files named both near the top and near the bottom (one met
    first deep down, one first near the top)."""
    for level in range(levels + 1):  # os.makedirs recurses: 1,100 levels are too many
        os.mkdir(deep_path(root, level))
        os.chmod(deep_path(root, level), 0o755)  # whatever the tests' umask
    marks = sorted({0, 1, 2, 3, 10, 50, levels // 2, levels - 20, levels - 1, levels})
    for level in marks:
        d = deep_path(root, level)
        write(os.path.join(d, "a-before"), b"before at %d\n" % level)
        write(os.path.join(d, "z-after"), b"after at %d\n" % level, 0o600)
    write(os.path.join(deep_path(root, levels - 10), "z-deep-first"), b"deep first\n", 0o755)
    os.link(os.path.join(deep_path(root, levels - 10), "z-deep-first"),
            os.path.join(root, "z-shallow-second"))
    write(os.path.join(deep_path(root, 2), "a-shallow-first"), b"shallow first\n")
    os.link(os.path.join(deep_path(root, 2), "a-shallow-first"),
            os.path.join(deep_path(root, levels - 5), "z-deep-second"))
    late = os.path.join(deep_path(root, 3), "z-dir-after")
    os.mkdir(late)
    os.chmod(late, 0o755)
    write(os.path.join(late, "inside"), b"made after the deep subtree returned\n")
    os.chmod(deep_path(root, 7), 0o711)
    os.chmod(deep_path(root, levels // 2), 0o555)  # read-only, as the image says
    os.chmod(deep_path(root, levels - 3), 0o750)
    return root


@pytest.fixture(scope="module")
def arena():
    """A directory under /tmp the user nobody can reach (pytest's tmp_path is not), for
    the trees and images of the module and each extract's DEST; removed by rm, since
    shutil.rmtree recurses too deep for 1,100 levels (and the tests' own user needs
    write permission back in the read-only directories)."""
    base = tempfile.mkdtemp(prefix="stp-deep-", dir="/tmp")
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        run(["chmod", "-R", "u+rwx", base])
        run(["rm", "-rf", base])


@pytest.fixture(scope="module")
def deep_image(arena):
    """deep_image(levels): (source tree, image readable by nobody), built once each."""
    built = {}

    def get(levels):
        if levels not in built:
            src = make_deep(os.path.join(arena, "src-%d" % levels), levels)
            image = build_image(src, os.path.join(arena, "deep-%d.stipple" % levels), *FAST)
            os.chmod(image, 0o644)
            built[levels] = (src, image)
        return built[levels]

    return get


def extract_limited(image, dest, nofile, user):
    """`stipple extract IMAGE DEST` with RLIMIT_NOFILE at NOFILE (soft and hard) and a
    umask of 022, run by USER (a pwd entry) or by the tests' own user (None)."""
    def limit():
        os.umask(0o022)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    ids = {} if user is None else dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    return subprocess.run([STIPPLE, "extract", image, dest], preexec_fn=limit, **ids,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                          errors="replace")


def where_to(arena, user):
    """DEST for USER (None: the tests' own): below a directory of its own in ARENA."""
    area = tempfile.mkdtemp(prefix="area-", dir=arena)
    if user is not None:
        os.chmod(area, 0o755)
        os.chown(area, user.pw_uid, user.pw_gid)
    return os.path.join(area, "out")


USERS = ["self", pytest.param("nobody", marks=pytest.mark.needs_root("extracts as nobody"))]


@pytest.mark.parametrize("levels, nofile", [(300, 64), (1100, 1024)])
@pytest.mark.parametrize("who", USERS)
def test_extract_deeper_than_the_descriptor_limit(deep_image, arena, levels, nofile, who):
    src, image = deep_image(levels)
    user = pwd.getpwnam("nobody") if who == "nobody" else None
    dest = where_to(arena, user)
    r = extract_limited(image, dest, nofile, user)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr[-4000:]
    # the umask takes nothing from these modes; a user's extract owns what it makes
    treeutil.assert_same_tree(src, dest, **(treeutil.NON_ROOT_IGNORE if user else {}))


def test_a_level_that_cannot_be_opened_again_is_said_once(deep_image, arena):
    """The reopen of a closed level fails (strace makes the openat2 that reopens it say
    ENOENT, as a directory renamed meanwhile would): that entry is named once, with what
    it means, everything else of the tree still comes, and the exit status is 1. The
    first version named every later entry of that directory, each as a new failure."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    src, image = deep_image(300)
    dest = where_to(arena, None)
    # openat2 calls: DIR, then reopens; the 4th is a reopen on the way back up
    cmd = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=openat2",
           "-e", "inject=openat2:error=ENOENT:when=4", STIPPLE_READERS, "extract", image, dest]

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    r = subprocess.run(cmd, preexec_fn=limit, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=120, errors="replace")
    assert r.returncode == 1, r.stderr[-2000:]
    said = [line for line in r.stderr.splitlines() if "cannot be opened again" in line]
    assert len(said) == 1, r.stderr[-2000:]
    assert "1 entries not extracted or incomplete" in r.stderr, r.stderr[-2000:]
    lost = said[0].split(": ", 3)[2].lstrip("/")  # "stipple extract: IMAGE: /PATH: ..."
    # the tree's modes and times are the image's; what differs is that one entry alone
    diffs = treeutil.compare_trees(src, dest, ignore={"mtime"})
    assert diffs == ["%s: missing from %s" % (lost, dest)], diffs[:5]
