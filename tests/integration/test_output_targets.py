# SPDX-License-Identifier: MIT
"""Where mkstipple and `stipple sign` write an image: a symlink is written through (the
file it leads to is replaced, the link stays), anything but a regular file or a new name
is refused and left as it was, IMAGE - is standard output (never a terminal), and an
archive is never replaced by its own image."""

import contextlib
import os
import pty
import re
import socket
import stat
import subprocess

import pytest

from conftest import MKSTIPPLE, STIPPLE, read_file, run
from imageutil import FAST


def make_tree(root, tag):
    """A small tree whose contents say TAG."""
    os.makedirs(root / "d")
    (root / "a.txt").write_text("a file of %s\n" % tag * 50)
    (root / "d" / "b.bin").write_bytes(bytes(range(256)) * 40 + tag.encode())
    return {"a.txt": read_file(root / "a.txt"), "d/b.bin": read_file(root / "d" / "b.bin")}


@pytest.fixture
def trees(tmp_path):
    """Two trees with different contents: an old image is built from "old"."""
    old, new = tmp_path / "old", tmp_path / "new"
    return {"old": (old, make_tree(old, "old")), "new": (new, make_tree(new, "new"))}


def build(src, image, *extra, **kw):
    return run([MKSTIPPLE, "-q", *FAST, *extra, src, image], **kw)


def assert_image_holds(image, files):
    """`stipple info` reads IMAGE, and `stipple cat` gives back each of FILES' bytes."""
    run([STIPPLE, "info", image], check=True)
    for path, data in files.items():
        r = subprocess.run([STIPPLE, "cat", image, path], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        assert r.stdout == data, "%s in %s differs from the source" % (path, image)


def assert_refused(r, *names):
    assert 0 < r.returncode < 128, "exit %d\n%s" % (r.returncode, r.stderr)
    assert any(str(n) in r.stderr for n in names), "message does not name %s:\n%s" % (
        " or ".join(map(str, names)), r.stderr)


def leftovers(directory):
    return [n for n in os.listdir(directory) if ".tmp." in n]


# Symlinks are written through


def test_mkstipple_writes_through_a_symlink(trees, tmp_path):
    """The file the link leads to (in another directory, through a relative link) gets
    the new image, keeping its mode; the link stays a link."""
    (src_old, _), (src_new, files) = trees["old"], trees["new"]
    store, links = tmp_path / "store", tmp_path / "links"
    store.mkdir()
    links.mkdir()
    real = store / "app.stipple"
    build(src_old, real, check=True)
    os.chmod(real, 0o640)
    link = links / "current.stipple"
    os.symlink("../store/app.stipple", link)
    r = build(src_new, link)
    assert r.returncode == 0, r.stderr
    assert os.path.islink(link) and os.readlink(link) == "../store/app.stipple", \
        "the symlink was replaced"
    assert_image_holds(real, files)
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640, "the replaced image lost its mode"
    assert leftovers(store) == [] and leftovers(links) == []


def test_mkstipple_writes_through_a_chain_of_links(trees, tmp_path):
    (src_old, _), (src_new, files) = trees["old"], trees["new"]
    real = tmp_path / "real.stipple"
    build(src_old, real, check=True)
    os.symlink(real, tmp_path / "one")
    os.symlink("one", tmp_path / "two")
    build(src_new, tmp_path / "two", check=True)
    assert os.readlink(tmp_path / "two") == "one" and os.readlink(tmp_path / "one") == str(real)
    assert_image_holds(real, files)


def test_dangling_symlink_is_refused(trees, tmp_path):
    """Refused, as cp(1) refuses it: the link may name a file nobody meant to create."""
    link = tmp_path / "dangling.stipple"
    os.symlink("missing/or/not.stipple", link)
    os.symlink("nothing-here", tmp_path / "dangling2.stipple")
    for l in (link, tmp_path / "dangling2.stipple"):
        r = build(trees["new"][0], l)
        assert_refused(r, l)
        assert os.path.islink(l), "the dangling symlink was replaced"
    assert not os.path.exists(tmp_path / "nothing-here")
    assert leftovers(tmp_path) == []


def sticky_shared(tmp_path):
    """A sticky world-writable directory, as /tmp is (the tests that use it need root:
    they give what they plant there to another user)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    return shared


@pytest.mark.needs_root("gives a node to another user")
def test_symlink_protected_by_the_kernel_rule_is_not_followed(trees, tmp_path):
    """A link in a sticky world-writable directory, owned by another user, is not followed
    (the kernel's protected_symlinks rule), nor replaced."""
    shared = sticky_shared(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"root's file\n")
    link = shared / "x.stipple"
    os.symlink(victim, link)
    os.lchown(link, 65534, 65534)
    r = build(trees["new"][0], link)
    assert_refused(r, link)
    assert read_file(victim) == b"root's file\n", "root wrote through another user's link"
    assert os.path.islink(link)


@pytest.mark.needs_root("gives a node to another user")
def test_refused_link_is_named_as_the_path_spelled_it(trees, tmp_path):
    """A link refused on the way to the image's directory, reached through a trusted
    relative link, is named through that link (d/via leads to ../shared/sub: the refused
    link is d/../shared/sub), and nothing is written where it leads."""
    shared = sticky_shared(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", shared / "sub")
    os.lchown(shared / "sub", 65534, 65534)
    (tmp_path / "d").mkdir()
    os.symlink("../shared/sub", tmp_path / "d" / "via")
    r = build(trees["new"][0], "d/via/x.stipple", cwd=tmp_path)
    assert_refused(r, "d/../shared/sub: a symlink owned by uid 65534 in a sticky")
    assert os.listdir(tmp_path / "elsewhere") == []


@pytest.mark.needs_root("gives a node to another user")
def test_file_planted_in_a_sticky_directory_is_not_replaced(trees, tmp_path):
    """A file another user left in a sticky world-writable directory (mode 0666, so that
    they could write the image root puts there) is refused, as the kernel's
    protected_regular rule refuses root's O_CREAT on it, and left as it was."""
    shared = sticky_shared(tmp_path)
    planted = shared / "x.stipple"
    planted.write_bytes(b"theirs\n")
    os.chown(planted, 65534, 65534)
    os.chmod(planted, 0o666)
    r = build(trees["new"][0], planted)
    assert_refused(r, planted)
    assert read_file(planted) == b"theirs\n"
    assert os.stat(planted).st_uid == 65534 and not leftovers(shared)


@pytest.mark.needs_root("gives the file to another user")
def test_replaced_file_of_another_user_does_not_lend_its_mode(trees, tmp_path):
    """Where root may replace another user's file (a directory of root's), the image gets
    the mode of a new file, not the 0666 that would let that user write it."""
    image = tmp_path / "x.stipple"
    image.write_bytes(b"theirs\n")
    os.chown(image, 65534, 65534)
    os.chmod(image, 0o666)
    old = os.umask(0o022)
    try:
        r = build(trees["new"][0], image)
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    st = os.stat(image)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644), oct(st.st_mode)
    assert_image_holds(image, trees["new"][1])


def users_directory(tmp_path, name="home"):
    """A directory of another user's (uid 65534 standing for alice), as her home is."""
    home = tmp_path / name
    home.mkdir()
    os.chown(home, 65534, 65534)
    return home


def plant(link, target):
    os.symlink(target, link)
    os.lchown(link, 65534, 65534)


@pytest.mark.needs_root("gives a directory and a link to another user")
@pytest.mark.parametrize("writer", ["mkstipple", "extract-tar", "sign"])
def test_root_writes_through_no_link_of_a_directory_owner(trees, tmp_path, writer):
    """The owner of the directory root writes in plants IMAGE -> a file of root's: root's
    file is neither replaced nor touched (review 7, finding 9), and nothing is left."""
    home = users_directory(tmp_path)
    victim = tmp_path / "victim.stipple"
    build(trees["old"][0], victim, check=True)
    before = read_file(victim)
    link = home / "out"
    plant(link, victim)
    if writer == "mkstipple":
        r = build(trees["new"][0], link)
    elif writer == "extract-tar":
        r = run([STIPPLE, "extract", "--tar", "-q", victim, link], timeout=120)
    else:
        sec, pub = tmp_path / "k.sec", tmp_path / "k.pub"
        run([STIPPLE, "keygen", sec, pub], check=True)
        r = run([STIPPLE, "sign", link, sec], timeout=120)
    assert_refused(r, "a symlink owned by uid 65534")
    assert read_file(victim) == before, "root's file was replaced through her link"
    assert os.path.islink(link) and not leftovers(home) and not leftovers(tmp_path)


@pytest.mark.needs_root("gives a directory and a link to another user")
def test_root_follows_no_planted_link_on_the_way(trees, tmp_path):
    """A directory on the way, her link to a directory of root's: nothing is made there."""
    home = users_directory(tmp_path)
    rootdir = tmp_path / "rootdir"
    rootdir.mkdir()
    plant(home / "sub", rootdir)
    r = build(trees["new"][0], home / "sub" / "x.stipple")
    assert_refused(r, "%s: a symlink owned by uid 65534" % (home / "sub"))
    assert os.listdir(rootdir) == []


@pytest.mark.needs_root("gives a directory and a link to another user")
def test_root_writes_through_a_link_to_what_its_owner_owns(trees, tmp_path):
    """Her link to her own file is hers to point (Apache's SymLinksIfOwnerMatch): written
    through, the file keeps its place and the link stays."""
    home = users_directory(tmp_path)
    real = home / "real.stipple"
    real.write_bytes(b"hers\n")
    os.chown(real, 65534, 65534)
    plant(home / "out", "real.stipple")
    r = build(trees["new"][0], home / "out")
    assert r.returncode == 0, r.stderr
    assert os.readlink(home / "out") == "real.stipple"
    assert_image_holds(real, trees["new"][1])


def test_sign_writes_through_a_symlink(trees, tmp_path):
    real = tmp_path / "real.stipple"
    build(trees["old"][0], real, check=True)
    os.chmod(real, 0o604)
    link = tmp_path / "link.stipple"
    os.symlink("real.stipple", link)
    sec, pub = tmp_path / "k.sec", tmp_path / "k.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    run([STIPPLE, "sign", link, sec], check=True)
    assert os.path.islink(link) and os.readlink(link) == "real.stipple", "the link was replaced"
    r = run([STIPPLE, "verify", real, pub])
    assert r.returncode == 0, "the file the link leads to was not signed:\n" + r.stderr
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o604
    assert leftovers(tmp_path) == []


# Anything but a regular file or a new name is refused


def special_node(kind, path):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "chardev":
        null = os.stat("/dev/null").st_rdev
        os.mknod(path, 0o666 | stat.S_IFCHR, null)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.fspath(path))
        s.close()
    elif kind == "directory":
        os.mkdir(path)
        (path / "inside").write_bytes(b"kept\n")


@pytest.mark.parametrize("via_link", [False, True], ids=["named", "through-a-link"])
@pytest.mark.parametrize("kind", ["fifo", pytest.param("chardev", marks=pytest.mark.needs_root(
    "mknod")), "socket", "directory"])
def test_special_image_is_refused(trees, tmp_path, kind, via_link):
    node = tmp_path / ("node-" + kind)
    special_node(kind, node)
    before = os.lstat(node)
    image = node
    if via_link:
        image = tmp_path / "link"
        os.symlink(node.name, image)
    r = build(trees["new"][0], image)
    assert_refused(r, image)
    after = os.lstat(node)
    assert (after.st_ino, after.st_mode, after.st_rdev) == \
        (before.st_ino, before.st_mode, before.st_rdev), "%s was replaced" % kind
    if via_link:
        assert os.path.islink(image)
    if kind == "directory":
        assert os.listdir(node) == ["inside"]
    assert leftovers(tmp_path) == []


def test_special_image_is_refused_by_sign(tmp_path):
    """A FIFO, named or behind a link, is refused at once (not opened to wait for a
    writer) and left as it was."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.symlink("fifo", tmp_path / "link")
    sec, pub = tmp_path / "k.sec", tmp_path / "k.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    for image in (fifo, tmp_path / "link"):
        r = run([STIPPLE, "sign", image, sec], timeout=30)
        assert_refused(r, image)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.path.islink(tmp_path / "link")


def test_link_to_stdout_on_a_device_is_refused(trees, tmp_path):
    """What /dev/stdout is, a link to /proc/self/fd/1, with standard output on a device
    (/dev/null) or a terminal: refused, nothing replaced."""
    link = tmp_path / "stdout"
    os.symlink("/proc/self/fd/1", link)
    with open("/dev/null", "wb") as null:
        r = subprocess.run([MKSTIPPLE, "-q", *FAST, trees["new"][0], link],
                           stdin=subprocess.DEVNULL, stdout=null, stderr=subprocess.PIPE,
                           timeout=120, errors="replace")
    assert_refused(r, link)
    assert os.path.islink(link)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    master, slave = pty.openpty()
    try:
        p = subprocess.run([MKSTIPPLE, "-q", *FAST, trees["new"][0], link],
                           stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                           timeout=120, errors="replace")
    finally:
        os.close(slave)
        os.close(master)
    assert_refused(p, link)
    assert os.path.islink(link)


@pytest.mark.needs_root("a mount namespace")
def test_dev_stdout_is_never_replaced(trees):
    """The real /dev/stdout, as root, with standard output on /dev/null: in a private
    mount namespace whose /dev is a tmpfs, so that old code replaced only that copy."""
    script = ("set -e; mount -t tmpfs stipple-dev /dev; ln -s /proc/self/fd/1 /dev/stdout; "
              "mknod -m 666 /dev/null c 1 3; "
              "if \"$0\" -q --level 3 \"$1\" /dev/stdout >/dev/null; then echo EXIT0; fi; "
              "test -L /dev/stdout && echo LINK-KEPT; test -c /dev/null && echo NULL-KEPT")
    r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
             MKSTIPPLE, trees["new"][0]])
    if "mount" in r.stderr and "LINK-KEPT" not in r.stdout and "EXIT0" not in r.stdout:
        pytest.skip("cannot make a private /dev: " + r.stderr)
    assert "EXIT0" not in r.stdout, "mkstipple wrote over /dev/stdout and exited 0"
    assert "LINK-KEPT" in r.stdout and "NULL-KEPT" in r.stdout, r.stdout + r.stderr
    assert "/dev/stdout" in r.stderr, r.stderr


# IMAGE - is standard output


@pytest.mark.parametrize("sink", ["pipe", "file", "append"])
def test_image_to_standard_output(trees, tmp_path, sink):
    """The bytes on standard output are the image a named build gives; the summary goes
    to standard error; no file "-" appears."""
    src, files = trees["new"]
    named = tmp_path / "named.stipple"
    build(src, named, check=True)
    cmd = [MKSTIPPLE, *FAST, src, "-"]  # not quiet: the summary must stay off stdout
    got = tmp_path / "got.stipple"
    if sink == "pipe":
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                           cwd=tmp_path)
        got.write_bytes(r.stdout)
    else:
        with open(got, "ab" if sink == "append" else "wb") as f:
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.PIPE,
                               timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert b"files" in r.stderr, "no summary on standard error"
    assert read_file(got) == read_file(named), "the image on standard output differs"
    assert not os.path.lexists(tmp_path / "-"), "a file named - was written"
    assert_image_holds(got, files)


def test_signed_image_to_standard_output(trees, tmp_path):
    """--sign reads the unsigned image back from the spool, which has no name."""
    src, files = trees["new"]
    sec, pub = tmp_path / "k.sec", tmp_path / "k.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    named = tmp_path / "named.stipple"
    build(src, named, "--sign", sec, check=True)
    r = subprocess.run([MKSTIPPLE, "-q", *FAST, "--sign", sec, src, "-"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = tmp_path / "got.stipple"
    got.write_bytes(r.stdout)
    assert read_file(got) == read_file(named)
    run([STIPPLE, "verify", got, pub], check=True)


def test_archive_on_stdin_to_image_on_stdout(trees, tmp_path):
    """`mkstipple - -`: a tar on standard input, the image on standard output, the same
    bytes as from the tar file to a named image; the spools leave nothing in $TMPDIR."""
    src, files = trees["new"]
    tar = tmp_path / "t.tar"
    run(["tar", "--format=pax", "-cf", tar, "-C", src, "."], check=True)
    named = tmp_path / "named.stipple"
    build(tar, named, check=True)
    spool = tmp_path / "tmpdir"
    spool.mkdir()
    with open(tar, "rb") as f:
        r = subprocess.run([MKSTIPPLE, "-q", *FAST, "-", "-"], stdin=f, capture_output=True,
                           timeout=120, cwd=tmp_path, env=dict(os.environ, TMPDIR=str(spool)))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = tmp_path / "got.stipple"
    got.write_bytes(r.stdout)
    assert read_file(got) == read_file(named)
    assert_image_holds(got, files)
    assert os.listdir(spool) == [] and not os.path.lexists(tmp_path / "-")


def test_closed_pipe_is_an_error(trees, tmp_path):
    """A reader that went away: exit 1 with a message (SIGPIPE is ignored), no file."""
    rfd, wfd = os.pipe()
    os.close(rfd)
    try:
        r = subprocess.run([MKSTIPPLE, "-q", *FAST, trees["new"][0], "-"],
                           stdin=subprocess.DEVNULL, stdout=wfd, stderr=subprocess.PIPE,
                           timeout=120, cwd=tmp_path, errors="replace")
    finally:
        os.close(wfd)
    assert r.returncode == 1, "exit %d\n%s" % (r.returncode, r.stderr)
    assert "standard output" in r.stderr and "pipe" in r.stderr.lower(), r.stderr
    assert not os.path.lexists(tmp_path / "-")


def test_image_to_a_terminal_is_refused(trees, tmp_path):
    master, slave = pty.openpty()
    try:
        r = subprocess.run([MKSTIPPLE, *FAST, trees["new"][0], "-"], stdin=subprocess.DEVNULL,
                           stdout=slave, stderr=subprocess.PIPE, timeout=120, cwd=tmp_path,
                           errors="replace")
        os.set_blocking(master, False)
        with contextlib.suppress(BlockingIOError, OSError):
            written = os.read(master, 65536)
            assert b"STIPPLE" not in written, "an image was written to the terminal"
    finally:
        os.close(slave)
        os.close(master)
    assert 0 < r.returncode < 128, "exit %d\n%s" % (r.returncode, r.stderr)
    assert "terminal" in r.stderr, r.stderr
    assert not os.path.lexists(tmp_path / "-")


# An archive is never replaced by its own image


@pytest.mark.parametrize("how", ["same-name", "hard-link", "symlink", "other-path", "stdin"])
def test_own_archive_is_refused(trees, tmp_path, how):
    """By device and inode, whatever the path: tar's "file is the archive; not dumped"."""
    src, _ = trees["new"]
    tar = tmp_path / "x.tar"
    run(["tar", "-cf", tar, "-C", src, "."], check=True)
    before = read_file(tar)
    image, stdin = tar, subprocess.DEVNULL
    source = tar
    if how == "hard-link":
        image = tmp_path / "y.stipple"
        os.link(tar, image)
    elif how == "symlink":
        image = tmp_path / "y.stipple"
        os.symlink("x.tar", image)
    elif how == "other-path":
        (tmp_path / "sub").mkdir()
        image = tmp_path / "sub" / ".." / "x.tar"
    elif how == "stdin":
        source, stdin = "-", open(tar, "rb")
    try:
        r = subprocess.run([MKSTIPPLE, "-q", *FAST, source, image], stdin=stdin,
                           capture_output=True, timeout=120, errors="replace")
    finally:
        if how == "stdin":
            stdin.close()
    assert_refused(r, tar.name, image)
    assert read_file(tar) == before, "the source archive was overwritten"
    assert leftovers(tmp_path) == []


def test_image_inside_the_source_through_a_link(tmp_path):
    """IMAGE, a link outside SOURCE to a file inside it: the file it replaces and the
    temporary file beside it are never packed, build after build, and a warning says so,
    as tar's "file is the archive; not dumped" does."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a file\n")
    os.symlink("src/self.stipple", tmp_path / "link")
    (src / "self.stipple").write_bytes(b"an old image, not to be packed\n")
    for attempt in (1, 2):
        r = run([MKSTIPPLE, *FAST, src, tmp_path / "link"], check=True)
        assert "not packed" in r.stderr, "no warning like tar's:\n" + r.stderr
        r = run([STIPPLE, "ls", tmp_path / "link"], check=True)
        assert r.stdout.split() == ["a"], "build %d packed %s" % (attempt, r.stdout.split())
        assert os.path.islink(tmp_path / "link")


def test_failed_write_through_a_link_leaves_the_old_image(trees, tmp_path):
    """A write that fails (here past RLIMIT_FSIZE) leaves the file behind the link as it
    was and no temporary file in either directory."""
    import resource
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "x.stipple"
    build(trees["old"][0], real, check=True)
    before = read_file(real)
    big = tmp_path / "big"
    big.mkdir()
    (big / "noise").write_bytes(os.urandom(1 << 20))
    link = tmp_path / "link"
    os.symlink(real, link)
    limit = len(before) + 4096
    r = subprocess.run([MKSTIPPLE, "-q", *FAST, big, link], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120, errors="replace",
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                             (limit, limit)))
    assert_refused(r, link)
    assert re.search("too large", r.stderr, re.I), r.stderr
    assert read_file(real) == before and os.path.islink(link)
    assert leftovers(real_dir) == [] and leftovers(tmp_path) == []
