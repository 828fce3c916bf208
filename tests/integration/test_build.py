# SPDX-License-Identifier: MIT
"""mkstipple: round trips through `stipple extract`, reproducible images, and how bad
input, interruption and a changing tree are refused without leaving files behind."""

import contextlib
import os
import platform
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import (MKSTIPPLE, PYTHON, PYTHON_LIB, build_image, extract_image, read_file,
                      run)
from imageutil import FAST, CraftedImage
import treeutil


assert_same_tree = treeutil.assert_same_tree


def assert_empty_dir(path, what):
    left = sorted(os.listdir(path))
    assert not left, "%s left files in %s: %s" % (what, path, left)


# Round trips


def test_round_trip_generated_tree(gen_tree, image_of, tmp_path):
    image = image_of(gen_tree, *FAST)
    out = extract_image(image, tmp_path / "out")
    assert_same_tree(gen_tree, out)


def test_round_trip_generated_tree_large_blocks(gen_tree, image_of, tmp_path):
    """One block holds the whole stream; the default block size."""
    image = image_of(gen_tree, "--level", "1")
    out = extract_image(image, tmp_path / "out")
    assert_same_tree(gen_tree, out)


def test_round_trip_python_lib(image_of, tmp_path):
    image = image_of(PYTHON_LIB, "--level", "3", "--block-size", "4M")
    out = extract_image(image, tmp_path / "out")
    assert_same_tree(PYTHON_LIB, out)


def test_default_settings_python_lib(image_of, stipple, tmp_path):
    """The defaults (level 19, 32 MiB blocks) build, compress well and read back."""
    image = image_of(PYTHON_LIB)
    size = os.path.getsize(image)
    source = treeutil.tree_bytes(PYTHON_LIB)
    print("default image: %d bytes for %d bytes of files (%.3f)" % (size, source, size / source))
    assert size < source / 3, "image of %d bytes for %d bytes of files" % (size, source)
    r = run([stipple, "check", image])
    assert r.returncode == 0, r.stderr
    out = extract_image(image, tmp_path / "out")
    assert_same_tree(PYTHON_LIB, out)


def make_deep_mixed_tree(root, depth, width):
    """DEPTH nested folders, each holding WIDTH files of assorted sizes (below and above
    an ELF header's 64 bytes, empty among them) with symlinks, FIFOs and a subfolder
    sorted in among them, and an ELF program: every kind of entry the scan opens ahead
    or leaves alone, at every depth."""
    d = root
    elf = open(os.path.realpath("/bin/true"), "rb").read()
    for level in range(depth):
        os.makedirs(d)
        for i in range(width):
            name = os.path.join(d, "e%04d" % i)
            if i % 17 == 5:
                os.symlink("e%04d" % (i - 1), name)
            elif i % 53 == 7:
                os.mkfifo(name)
            elif i % 61 == 9:
                os.mkdir(name)
            else:
                with open(name, "wb") as f:
                    f.write(b"%d/%d " % (level, i) * (i % 40))
        with open(os.path.join(d, "prog"), "wb") as f:
            f.write(elf)
        d = os.path.join(d, "e%04d-next" % (width // 2))


def test_round_trip_deep_tree_under_a_small_descriptor_limit(image_of, tmp_path):
    """The scan opens files a little ahead of itself; it must hold those descriptors for
    one directory at a time, not for every level it is inside (40 levels of 300 entries
    would need thousands), and store every entry as it is."""
    src = tmp_path / "src"
    make_deep_mixed_tree(str(src), depth=40, width=300)
    limit = 200  # well above 40 levels plus what one directory opens ahead (128)

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    image = tmp_path / "deep.stipple"
    r = subprocess.run([MKSTIPPLE, "--quiet", *FAST, str(src), str(image)], preexec_fn=low_limit,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "mkstipple failed with %d descriptors:\n%s" % (limit, r.stderr)
    assert_same_tree(src, extract_image(image, tmp_path / "out"))


def test_empty_source_directory(image_of, tmp_path):
    src = tmp_path / "empty"
    src.mkdir()
    os.utime(src, ns=(treeutil.T0, treeutil.T0))
    image = image_of(src, *FAST)
    out = extract_image(image, tmp_path / "out")
    assert_same_tree(src, out)


def stream_bytes(stipple, image):
    """The uncompressed data stream size `stipple info` reports."""
    r = run([stipple, "info", image], check=True)
    m = re.search(r"data size:\s+(\d+)", r.stdout)
    assert m, "no 'data size:' line in stipple info:\n" + r.stdout
    return int(m.group(1))


def test_zero_runs_take_no_space(stipple, image_of, tmp_path):
    """Runs of zeros, sparse or written, are not stored in the data stream."""
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "sparse", "wb") as f:
        f.write(b"head" * 1024)
        f.truncate(256 << 20)
        f.seek(-4096, os.SEEK_END)
        f.write(b"tail" * 1024)
    with open(src / "written", "wb") as f:
        f.write(b"x" * 10000 + bytes(16 << 20) + b"y" * 10000)
    # packed: the stable layout would start the 16 MiB file on a block, after zeros
    image = image_of(src, "--level", "3", "--block-size", "1M", "--no-stable-blocks")
    assert stream_bytes(stipple, image) < 1 << 20
    out = extract_image(image, tmp_path / "out")
    assert_same_tree(src, out)


def test_image_inside_source_is_not_packed(stipple, tmp_path):
    """Building into the source tree, twice: the image never holds itself (nor the
    temporary file it is written to)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a file\n")
    image = src / "self.stipple"
    for attempt in (1, 2):
        build_image(src, image, *FAST)
        r = run([stipple, "ls", image], check=True)
        assert r.stdout.split() == ["a"], "build %d packed %s" % (attempt, r.stdout.split())


def test_quiet_is_silent_and_default_prints_summary(mkstipple, gen_tree, tmp_path):
    r = run([mkstipple, "--quiet", *FAST, gen_tree, tmp_path / "q.stipple"], check=True)
    assert r.stdout == "" and r.stderr == "", "--quiet printed:\n%s%s" % (r.stdout, r.stderr)
    r = run([mkstipple, *FAST, gen_tree, tmp_path / "v.stipple"], check=True)
    text = (r.stdout + r.stderr).lower()
    assert "files" in text, "no summary (files, bytes, ratio, time) printed:\n" + text
    assert "\r" not in text, "progress display written to a pipe: %r" % text[:200]
    assert read_file(tmp_path / "q.stipple") == read_file(tmp_path / "v.stipple")


def test_progress_only_on_a_terminal(mkstipple, gen_tree, tmp_path):
    """A terminal on stderr gets a progress display, --quiet silences it, and the image
    does not change."""
    import pty

    outputs = {}
    for name, extra in [("tty", ()), ("quiet", ("--quiet",))]:
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen([mkstipple, *extra, *FAST, gen_tree, tmp_path / (name + ".stipple")],
                                 stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
            os.close(slave)
            chunks = []
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the last writer closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            assert p.wait(timeout=300) == 0, b"".join(chunks).decode(errors="replace")
        finally:
            os.close(master)
        outputs[name] = b"".join(chunks)
    progress = outputs["tty"].replace(b"\r\n", b"\n")
    assert b"\r" in progress, "no progress redrawn on a terminal: %r" % progress[:200]
    assert outputs["quiet"] == b"", "--quiet printed on a terminal: %r" % outputs["quiet"][:200]
    assert read_file(tmp_path / "tty.stipple") == read_file(tmp_path / "quiet.stipple")


def test_no_bcj(stipple, image_of, tmp_path):
    """--no-bcj: no filtered block and no feature bit; the files read back either way."""
    src = tmp_path / "src"
    src.mkdir()
    for prog in ("/usr/bin/true", "/usr/bin/ls", "/usr/bin/sleep"):
        shutil.copy2(prog, src)
    for args in [(), ("--no-bcj",)]:
        image = image_of(src, *FAST, *args)
        info = run([stipple, "info", image], check=True).stdout
        if args:
            assert re.search(r"features:\s+meta-pages\n", info), info
        out = extract_image(image, tmp_path / ("out%d" % len(args)))
        assert_same_tree(src, out)


def elf_code_span(path):
    """[start, end) of the sections of a little-endian ELF64 file that hold instructions,
    read here with struct, apart from mkstipple's own reader."""
    data = read_file(path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count = struct.unpack_from("<HH", data, 0x3a)
    spans = []
    for i in range(count):
        _, kind, flags, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * entsize)
        if kind != 8 and flags & 4 and size:  # not SHT_NOBITS, SHF_EXECINSTR
            spans.append((off, off + size))
    return min(a for a, _ in spans), max(b for _, b in spans)


def stream_runs(meta, name, inside=None):
    """Stream [start, end) of file NAME's extents; with INSIDE = (a, b), only those of file
    bytes within it, and a check that no extent straddles its edges."""
    runs = []
    for file_off, stream_off, length in meta.extents(meta.lookup(name)):
        if inside:
            a, b = inside
            within = a <= file_off and file_off + length <= b
            assert within or file_off + length <= a or file_off >= b, \
                "%s: extent %d+%d straddles its code %d-%d" % (name, file_off, length, a, b)
            if not within:
                continue
        runs.append((stream_off, stream_off + length))
    return runs


def program_tree(tmp_path, progs):
    """tmp_path/src holding copies of the programs PROGS of /usr/bin; skips the test where
    they are not of a kind mkstipple filters, or are one multi-call binary."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("needs programs of a kind mkstipple filters")
    if len({read_file("/usr/bin/" + p) for p in progs}) < len(progs):
        pytest.skip("these programs are one multi-call binary here")
    src = tmp_path / "src"
    src.mkdir()
    for prog in progs:
        shutil.copy2("/usr/bin/" + prog, src)
    return src


def test_bcj_chosen_by_trial_on_large_blocks(stipple, mkstipple, tmp_path):
    """Blocks of 1 MiB and more that hold machine code weigh BCJ by a fast trial and are
    compressed once in the chosen form: on programs the filter is chosen and pays (the
    image is smaller than with --no-bcj), the files read back, and the choice, like the
    rest of the image, does not depend on --threads or --memory."""
    src = program_tree(tmp_path, [os.path.basename(PYTHON), "ls", "cp", "sort"])
    args = ("--level", "3", "--block-size", "1M")
    plain = build_image(src, tmp_path / "plain.stipple", *args, "--no-bcj")
    images = [build_image(src, tmp_path / ("t%s.stipple" % t), *args, "--threads", t, *extra)
              for t, extra in [("1", ()), ("2", ()), ("2", ("--memory", "8M"))]]
    info = run([stipple, "info", images[0]], check=True).stdout
    assert re.search(r"features:.*\bbcj-(x86|arm64)\b", info), info
    assert os.path.getsize(images[0]) < os.path.getsize(plain), \
        "BCJ chosen by the trial made the image no smaller than --no-bcj"
    for image in images[1:]:
        assert read_file(image) == read_file(images[0]), "%s differs from --threads 1" % image
    assert_same_tree(src, extract_image(images[0], tmp_path / "out"))


def test_code_apart(image_of, tmp_path):
    """--code-apart: after plain files come the other bytes of programs (headers, symbols,
    data), then their code, and only blocks of code are filtered; a program whose section table
    cannot be read counts as code whole; a hot program stays whole in the hot region, the
    rest of a program hot in part comes right after it, in file order, before every other
    file; a copy of a program takes its extents. Every file reads back as it was."""
    if platform.machine() != "x86_64":
        pytest.skip("its bait for the filter is x86 calls")
    progs = ("ls", "true", "sleep", "cp", "bash")
    src = program_tree(tmp_path, progs)
    shutil.copy2("/usr/bin/ls", src / "ls-copy")
    # a program whose data, past its code, is x86 calls to one place: the filter would
    # shrink it, so a block of it filtered means the data was counted as code
    calls = bytearray(read_file("/usr/bin/true"))
    for _ in range(40000):
        calls += b"\xe8" + struct.pack("<i", (1 << 20) - len(calls) - 5)
    (src / "calls").write_bytes(bytes(calls))
    damaged = bytearray(read_file("/usr/bin/true"))
    struct.pack_into("<Q", damaged, 0x28, len(damaged) + 4096)  # section table past the end
    (src / "damaged").write_bytes(bytes(damaged))
    (src / "notes.txt").write_bytes(b"plain text, not machine code\n" * 4000)
    (src / "empty").write_bytes(b"")
    (tmp_path / "hot.txt").write_text("cp\nbash\t0-100\n")
    image = image_of(src, "--hot-list", str(tmp_path / "hot.txt"), "--code-apart", *FAST)
    meta = CraftedImage(image)
    cut = ("ls", "true", "sleep", "calls")
    spans = {p: elf_code_span(src / p) for p in progs + cut}

    code = [r for p in cut for r in stream_runs(meta, p, spans[p])]
    code += stream_runs(meta, "damaged")
    near = [r for p in cut for r in stream_runs(meta, p)
            if r not in stream_runs(meta, p, spans[p])]
    plain = stream_runs(meta, "notes.txt")
    hot = stream_runs(meta, "cp")
    assert len(hot) == 1 and hot[0][0] == 0, "the hot program was cut or moved: %r" % hot
    assert all(stream_runs(meta, p, spans[p]) for p in cut)
    bash = meta.extents(meta.lookup("bash"))  # (file_off, stream_off, length), by file_off
    last_code = next(x for x in bash if x[0] < spans["bash"][1] <= x[0] + x[2])
    assert bash[0][0] == 0 and bash[0][1] < plain[0][0], "bash's hot range not in the hot region"
    rest = [x for x in bash if x[0] >= bash[0][2]]  # past its hot range: the rest
    assert rest and all(b[1] + b[2] <= a[1] for b, a in zip(rest, rest[1:])), "rest not in file order"
    assert rest[-1][1] + rest[-1][2] <= plain[0][0], "bash's rest not right after the hot region"
    assert last_code in rest
    assert max(e for _, e in hot) <= min(s for s, _ in plain)
    assert max(e for _, e in plain) <= min(s for s, _ in near)
    assert max(e for _, e in near) <= min(s for s, _ in code)
    assert meta.extents(meta.lookup("ls-copy")) == meta.extents(meta.lookup("ls"))
    assert meta.extents(meta.lookup("empty")) == []

    block = 64 << 10
    filters = meta.block_filters()
    hot_end = max(hot[0][1], rest[-1][1] + rest[-1][2])  # the hot region and bash's rest
    near_end = max(e for _, e in near)
    assert near_end // block > hot_end // block + 1, "no block of tables alone to check"
    assert not any(filters[hot_end // block + 1:near_end // block]), \
        "a block of plain files or program tables was filtered: %r" % filters
    assert any(filters[near_end // block + 1:]), "no block of code was filtered: %r" % filters
    assert_same_tree(src, extract_image(image, tmp_path / "out"))


def test_programs_stay_whole_by_default(image_of, tmp_path):
    """Without --code-apart each program is stored whole, after the files that are not
    machine code, so that a cold read of one program decodes one place."""
    progs = ("ls", "true", "sleep")
    src = program_tree(tmp_path, progs)
    (src / "notes.txt").write_bytes(b"plain text, not machine code\n" * 4000)
    image = image_of(src, *FAST)
    meta = CraftedImage(image)
    plain = stream_runs(meta, "notes.txt")
    for prog in progs:
        runs = stream_runs(meta, prog)
        assert len(runs) == 1, "%s was cut: %r" % (prog, runs)
        assert runs[0][1] - runs[0][0] == os.path.getsize(src / prog)
        assert runs[0][0] >= max(e for _, e in plain)
    assert_same_tree(src, extract_image(image, tmp_path / "out"))


def arm64_program(code_off, zeros, code_len, seed=5):
    """A little-endian ELF64 AArch64 shared object whose one code section starts at
    CODE_OFF with ZEROS zero bytes, then CODE_LEN - ZEROS random ones."""
    rnd = random.Random(seed)
    shoff = (code_off + code_len + 7) & ~7
    head = bytearray(64)
    head[0:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<HHI", head, 16, 3, 183, 1)  # ET_DYN, EM_AARCH64, EV_CURRENT
    struct.pack_into("<QHHHHHH", head, 40, shoff, 64, 0, 0, 64, 2, 0)
    body = bytearray(head + rnd.randbytes(code_off - 64))
    body += bytes(zeros) + rnd.randbytes(code_len - zeros)
    body += bytes(shoff - len(body)) + bytes(64)  # section 0: SHT_NULL
    body += struct.pack("<IIQQQQIIQQ", 0, 1, 6, 0, code_off, code_len, 0, 0, 4, 0)
    return bytes(body)


@pytest.mark.parametrize("layout", [(), ("--code-apart",)])
def test_arm64_code_keeps_its_alignment(image_of, tmp_path, layout):
    """AArch64 code lands at stream offsets equal to its file offsets mod 4, whatever
    precedes it in the stream, even after a run of zeros left out as a hole."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"odd length\n" * 3)
    code_off, code_len = 4097, 90_000
    (src / "lib.so").write_bytes(arm64_program(code_off, 70_000, code_len))
    (src / "lib2.so").write_bytes(arm64_program(8190, 0, 20_001, seed=6))
    image = image_of(src, *layout, *FAST)
    meta = CraftedImage(image)
    for name, start, end in (("lib.so", code_off, code_off + code_len),
                             ("lib2.so", 8190, 8190 + 20_001)):
        ext = meta.extents(meta.lookup(name))
        code = [x for x in ext if x[0] < end and x[0] + x[2] > start]
        assert code, "%s: no extent holds its code: %r" % (name, ext)
        assert all(f % 4 == s % 4 for f, s, _ in code), "%s: code out of step: %r" % (name, ext)
    assert_same_tree(src, extract_image(image, tmp_path / "out"))


@pytest.mark.parametrize("arg", ["--help", "--version"])
def test_help_and_version(mkstipple, arg):
    r = run([mkstipple, arg])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), "%s printed nothing on stdout" % arg


# Reproducible images


def test_same_image_whatever_threads_and_memory(mkstipple, tmp_path):
    common = ("--level", "3", "--block-size", "1M")
    images = {}
    for name, extra in [("t1", ("--threads", "1")), ("t2", ("--threads", "2")),
                        ("t2-again", ("--threads", "2")),
                        ("small-memory", ("--threads", "2", "--memory", "8M")),
                        ("t4-mem", ("--threads", "4", "--memory", "64M"))]:
        images[name] = build_image(PYTHON_LIB, tmp_path / (name + ".stipple"), *common, *extra)
    want = read_file(images["t1"])
    for name, path in images.items():
        assert read_file(path) == want, "%s differs from the --threads 1 image" % name


def test_same_image_whatever_threads_generated(gen_tree, tmp_path):
    a = build_image(gen_tree, tmp_path / "a.stipple", *FAST, "--threads", "1")
    b = build_image(gen_tree, tmp_path / "b.stipple", *FAST, "--threads", "2", "--memory", "2M")
    assert read_file(a) == read_file(b)


def test_same_image_from_a_copy(gen_tree, tmp_path):
    """The image depends on the tree's contents and attributes only, not on inode
    numbers, directory order on disk or where the tree lies."""
    copy = tmp_path / "copy"
    r = run(["cp", "-a", gen_tree, copy])
    assert r.returncode == 0, r.stderr
    assert not treeutil.compare_trees(gen_tree, copy), "cp -a did not copy faithfully"
    a = build_image(gen_tree, tmp_path / "a.stipple", *FAST)
    b = build_image(copy, tmp_path / "b.stipple", *FAST)
    assert read_file(a) == read_file(b)


def test_memory_smaller_than_one_block(mkstipple, gen_tree, tmp_path):
    """--memory below what one block needs (two 32 MiB buffers): either the same image as
    without it, or a clear refusal naming --memory and no file left behind."""
    ref = build_image(gen_tree, tmp_path / "ref.stipple", "--level", "1", "--block-size", "32M")
    out = tmp_path / "out"
    out.mkdir()
    image = out / "small.stipple"
    r = run([mkstipple, "--quiet", "--level", "1", "--block-size", "32M", "--memory", "16M",
             gen_tree, image])
    if r.returncode == 0:
        assert read_file(image) == read_file(ref)
    else:
        assert "memory" in r.stderr, "refusal does not name --memory: " + r.stderr
        assert_empty_dir(out, "refused build")


# Bad input


def expect_failure(mkstipple, args, out, *names):
    """Runs mkstipple ARGS, expecting a non-zero exit, a message that names one of NAMES,
    and nothing left in OUT (where IMAGE was to be written)."""
    r = run([mkstipple, *args], timeout=300)
    assert r.returncode != 0, "mkstipple %s succeeded" % " ".join(map(str, args))
    assert r.returncode < 128 and r.returncode > 0, "crashed: exit %d\n%s" % (r.returncode, r.stderr)
    assert r.stderr.strip(), "no message on stderr"
    assert any(str(n) in r.stderr for n in names), "message does not name %s:\n%s" % (
        " or ".join(map(str, names)), r.stderr)
    assert_empty_dir(out, "failed build")
    return r


@pytest.fixture
def out(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


def test_missing_source(mkstipple, out, tmp_path):
    src = tmp_path / "no-such-dir"
    expect_failure(mkstipple, [src, out / "x.stipple"], out, src)


def test_source_not_a_directory(mkstipple, out, tmp_path):
    src = tmp_path / "file"
    src.write_bytes(b"not a directory")
    expect_failure(mkstipple, [src, out / "x.stipple"], out, src)


def test_image_in_missing_directory(mkstipple, gen_tree, out):
    image = out / "missing" / "x.stipple"
    expect_failure(mkstipple, [*FAST, gen_tree, image], out, image, out / "missing")


@pytest.mark.parametrize("value", ["100K", "32K", "0", "2G", "abc", "64Q", "-64K"])
def test_bad_block_size(mkstipple, gen_tree, out, value):
    expect_failure(mkstipple, ["--block-size", value, gen_tree, out / "x.stipple"], out,
                   "block-size", value)


@pytest.mark.parametrize("value", ["23", "100", "abc", "3x", ""])
def test_bad_level(mkstipple, gen_tree, out, value):
    expect_failure(mkstipple, ["--level", value, gen_tree, out / "x.stipple"], out, "level")


@pytest.mark.parametrize("option,value", [("--threads", "0"), ("--threads", "x"),
                                          ("--memory", "lots"), ("--memory", "0")])
def test_bad_threads_or_memory(mkstipple, gen_tree, out, option, value):
    expect_failure(mkstipple, [option, value, gen_tree, out / "x.stipple"], out, option[2:])


@pytest.mark.parametrize("args", [[], ["only-one"], ["a", "b", "c"], ["--bogus", "a", "b"]])
def test_usage_errors(mkstipple, out, args):
    r = run([mkstipple, *args])
    assert r.returncode != 0 and r.returncode < 128
    assert r.stderr.strip(), "no usage message"
    assert_empty_dir(out, "usage error")


@contextlib.contextmanager
def world_dir():
    """A directory under /tmp that the user nobody can enter (pytest's tmp_path cannot)."""
    d = tempfile.mkdtemp(prefix="stipple-nobody-")
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        run(["chmod", "-R", "u+rwx", d])
        shutil.rmtree(d, ignore_errors=True)


def as_nobody(cmd):
    """CMD run as nobody, by setpriv; the tests that use it need root."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv to run mkstipple as an unprivileged user")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *map(str, cmd)]


@pytest.mark.needs_root("runs mkstipple as nobody")
@pytest.mark.parametrize("kind", ["file", "directory"])
def test_unreadable_entry(mkstipple, kind):
    with world_dir() as d:
        src = os.path.join(d, "src")
        os.makedirs(os.path.join(src, "sub"))
        with open(os.path.join(src, "ok.txt"), "w") as f:
            f.write("readable\n")
        bad = os.path.join(src, "sub", "secret")
        if kind == "file":
            with open(bad, "w") as f:
                f.write("root only\n")
            os.chmod(bad, 0o000)
        else:
            os.mkdir(bad)
            with open(os.path.join(bad, "inside"), "w") as f:
                f.write("hidden\n")
            os.chmod(bad, 0o000)
        out = os.path.join(d, "out")
        os.mkdir(out)
        os.chown(out, 65534, 65534)
        r = run(as_nobody([MKSTIPPLE, *FAST, src, os.path.join(out, "x.stipple")]))
        if r.returncode == 0:
            pytest.fail("mkstipple as nobody read an unreadable %s" % kind)
        assert r.returncode < 128, "crashed: exit %d\n%s" % (r.returncode, r.stderr)
        assert "sub/secret" in r.stderr, "message does not name %s:\n%s" % (bad, r.stderr)
        assert_empty_dir(out, "failed build")


@pytest.mark.needs_root("runs mkstipple as nobody")
def test_image_directory_not_writable(mkstipple):
    with world_dir() as d:
        src = os.path.join(d, "src")
        os.mkdir(src)
        with open(os.path.join(src, "f"), "w") as f:
            f.write("x\n")
        out = os.path.join(d, "out")
        os.mkdir(out)  # owned by root: nobody cannot create the image or a temp file
        image = os.path.join(out, "x.stipple")
        r = run(as_nobody([MKSTIPPLE, *FAST, src, image]))
        assert 0 < r.returncode < 128, "exit %d\n%s" % (r.returncode, r.stderr)
        assert out in r.stderr, "message does not name %s:\n%s" % (image, r.stderr)
        assert_empty_dir(out, "failed build")


@pytest.mark.needs_root("mounts a small tmpfs")
def test_full_disk(mkstipple, tmp_path):
    """An image that does not fit: an error naming the image, nothing left behind."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "noise").write_bytes(os.urandom(4 << 20))
    out = tmp_path / "small-fs"
    out.mkdir()
    r = run(["mount", "-t", "tmpfs", "-o", "size=1m", "stipple-test", out])
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: " + r.stderr)
    try:
        image = out / "x.stipple"
        r = run([mkstipple, *FAST, src, image])
        assert 0 < r.returncode < 128, "exit %d\n%s" % (r.returncode, r.stderr)
        assert str(out) in r.stderr, "message does not name %s:\n%s" % (image, r.stderr)
        assert_empty_dir(out, "build on a full disk")
    finally:
        run(["umount", "-l", out])


# Interruption and a changing tree


def wait_for_file(directory, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.listdir(directory):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_build_leaves_nothing(mkstipple, out, sig):
    image = out / "x.stipple"
    p = subprocess.Popen([mkstipple, "--quiet", "--level", "19", "--block-size", "1M",
                          "--threads", "1", PYTHON_LIB, image], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_file(out, 10)  # the temporary file exists: the build is under way
        time.sleep(0.5)
        assert p.poll() is None, "the build ended before it could be interrupted"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0, "interrupted build exited 0"
    assert_empty_dir(out, "interrupted build (%s)" % sig.name)


def test_file_growing_while_read(mkstipple, tmp_path, out):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(20):
        (src / ("before-%02d" % i)).write_bytes(os.urandom(256 << 10))
    growing = src / "growing.log"
    growing.write_bytes(os.urandom(8 << 20))
    writer = subprocess.Popen(
        ["/usr/bin/python3", "-c",
         "import sys, time, os\n"
         "f = open(sys.argv[1], 'ab', buffering=0)\n"
         "for _ in range(20000):\n"
         "    f.write(os.urandom(4096)); time.sleep(0.002)\n", growing],
        stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        r = run([mkstipple, "--level", "19", "--block-size", "1M", src, out / "x.stipple"])
    finally:
        writer.kill()
        writer.wait()
    # read again while it changes, then kept as it last read, with tar's warning and
    # exit 1: an image whose copy of the file is whole (of the size it records)
    assert r.returncode == 1, "exit %d\n%s" % (r.returncode, r.stderr)
    assert "growing.log: file changed as we read it" in r.stderr, r.stderr
    got = extract_image(out / "x.stipple", tmp_path / "x") / "growing.log"
    assert growing.read_bytes().startswith(got.read_bytes())
    assert os.path.getsize(got) >= 8 << 20


def test_interrupted_rebuild_keeps_previous_image(mkstipple, gen_tree, out):
    """A rebuild over an existing IMAGE that is interrupted leaves the old image whole."""
    image = build_image(gen_tree, out / "x.stipple", *FAST)
    before = read_file(image)
    p = subprocess.Popen([mkstipple, "--quiet", "--level", "19", "--block-size", "1M",
                          "--threads", "1", PYTHON_LIB, image], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while len(os.listdir(out)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # until the temporary file appears beside the image
        time.sleep(0.5)
        assert p.poll() is None, "the build ended before it could be interrupted"
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0
    assert sorted(os.listdir(out)) == ["x.stipple"], "left: %s" % sorted(os.listdir(out))
    assert read_file(image) == before, "the previous image was changed"
