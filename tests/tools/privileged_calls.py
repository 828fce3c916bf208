#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Whether monitor.c is the one module of the monitor that makes privileged calls.

The monitor's modules: the objects of mounthelper/ (mount/, cli/) that mount.stipple,
mount.stipple-checked or stipple (which runs `stipple mount` itself) link (an object is
linked when the program defines one of its global symbols; the program's own objects,
those of the sources the build names for it), so that a new module is checked
without being named here. stipple-mountd, stipple-fetcher and stipple-readers are other
programs and are not looked at.

A privileged call: a libc (or libfuse) function that the object refers to (nm -u) and
whose effect the kernel checks against the caller's credentials at the call, made to act:
- open or make a file by name: open, openat, openat2, fopen, opendir, creat, mkdir,
  mkdirat, mknod, mkfifo, link, symlink;
- remove, rename or change a file: unlink, unlinkat, rmdir, remove, rename, renameat,
  truncate (by path), chown, fchown, fchownat, lchown, chmod, fchmod, fchmodat, utime,
  utimes, futimes, futimens, utimensat, setxattr, fsetxattr, lsetxattr, removexattr...;
- signal a process: kill, killpg, tgkill, sigqueue, pidfd_send_signal;
- change credentials or namespaces: the setuid family, setgroups, capset, prctl,
  setns, unshare, chroot, pivot_root;
- mount or unmount: mount, umount, umount2, fuse_session_mount, fuse_session_unmount;
- run a program: the exec family, posix_spawn, system, popen;
- reach another process through a socket, or a device: connect, bind (a socket's name
  is a file), ioctl;
- syscall(2), which may be any of those (open_tree, openat2, pidfd_send_signal, capset).
Not privileged: what only observes (fstat, statx, access, readlink, getxattr, readdir)
and what acts on a descriptor only as it was opened (read, write, ftruncate, flock):
those are bounded by the open that monitor.c made. fork is no privileged call either:
each child makes its calls through monitor.c or gives privilege up first.

Allowed outside monitor.c, by call site (the first argument, as written in the source):
open of "/dev/null" or "/proc/self/mountinfo", fopen of the latter (the same for every
caller);
prctl(PR_SET_NAME, ...) (a process naming itself); syscall(SYS_pidfd_open or SYS_gettid).
The confined children's code, by function: what sandbox.c's stp_sandbox_enter,
stp_sandbox_enter_empty_root and stp_sandbox_confine_lookups reach in that file (the
daemon, fetcher and priming child confine themselves: each of those calls gives privilege
up), and what prime.c's stp_prime_look_up reaches (the priming child's lookups, made once
it is confined). A call in another function of those files is the monitor's, and fails.
A function the monitor never calls, named in UNCALLED with the reason it is linked: its
own calls are allowed only while no object the programs link refers to it and its own
file names it nowhere else; an exception whose call is no longer found fails too, so
that a stale one is removed (and the check shows it still sees that call).

usage: privileged_calls.py BUILD/mounthelper SOURCE_ROOT; prints what it checked, exit 1
when a call is found elsewhere.
"""

import json
import os
import re
import subprocess
import sys

PROGRAMS = ("mount.stipple", "mount.stipple-checked", "stipple")
MONITOR = "mount/monitor.c"
# file: the entry points a confined child runs; what they reach in the file is theirs
CONFINED = {
    "mount/sandbox.c": {"stp_sandbox_enter", "stp_sandbox_enter_empty_root",
                        "stp_sandbox_confine_lookups"},
    "mount/prime.c": {"stp_prime_look_up"},
}
# (file, function): why a function the monitor never calls is in its programs
UNCALLED = {
    ("mount/readfail.c", "stp_readfail_open"):
        "the daemon's connect to syslog's socket (/dev/log) for failed reads: readfail.o is "
        "linked into mount.stipple-checked for remote.c's stp_readfail_set_cause",
}
FUNC_START = re.compile(r"^[A-Za-z_][\w \t*]*?\b(\w+)\(")

PRIVILEGED = set("""
open openat openat2 fopen freopen opendir creat mkdir mkdirat mknod mknodat mkfifo mkfifoat
link linkat symlink symlinkat name_to_handle_at open_by_handle_at
unlink unlinkat rmdir remove rename renameat renameat2 truncate
chown fchown fchownat lchown chmod fchmod fchmodat utime utimes futimes lutimes futimens
utimensat setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr
kill killpg tgkill tkill sigqueue pidfd_send_signal
setuid seteuid setreuid setresuid setgid setegid setregid setresgid setfsuid setfsgid
setgroups initgroups capset prctl setns unshare chroot pivot_root
mount umount umount2 fuse_session_mount fuse_session_unmount
execve execveat execv execvp execvpe execl execlp execle fexecve posix_spawn posix_spawnp
system popen
connect bind ioctl
syscall
""".split())

ALLOWED = {
    "open": {'"/dev/null"', '"/proc/self/mountinfo"'},
    "fopen": {'"/proc/self/mountinfo"'},
    "prctl": {"PR_SET_NAME"},
    "syscall": {"SYS_pidfd_open", "SYS_gettid"},
}


def c_name(symbol):
    """The C function a libc symbol stands for: open64, __open_2 and __open64_2 are open."""
    name = re.sub(r"@.*", "", symbol)
    name = re.sub(r"^__(.*)_2$", r"\1", name)
    return re.sub(r"64$", "", name)


def nm_table(paths):
    """{object: (global symbols defined, symbols undefined)} of PATHS (objects or
    archives), in one nm run; a program is an object here."""
    out = subprocess.run(["nm", "-A", *paths], capture_output=True, text=True,
                         check=True).stdout
    table = {}
    for line in out.splitlines():  # "lib.a:member.o:ADDR T name", "prog.o:    U name"
        fields = line.split()
        if not (len(fields) == 3 or (len(fields) == 2 and fields[1] == "U")):
            continue
        where = fields[0].rsplit(":", 1)[0]
        obj = where.split(":", 1)[1] if ".a:" in where else where
        d, u = table.setdefault(obj, (set(), set()))
        if fields[1] == "U":
            u.add(fields[-1])
        elif fields[1].isupper():
            d.add(fields[-1])
    return table


def source_of(obj, srcdir):
    """mount_cachedir.c.o -> mount/cachedir.c (the folder is the name's first part)."""
    base = os.path.basename(obj)[:-len(".o")]
    folder, _, name = base.partition("_")
    path = os.path.join(folder, name)
    return path if os.path.exists(os.path.join(srcdir, path)) else None


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def functions(text):
    """[(name, first line, last line)] of the functions defined in TEXT: a definition
    starts at column 0 (return type and name on one line) and ends at a line "}"."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = FUNC_START.match(lines[i])
        if m and not lines[i].rstrip().endswith(";"):
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            out.append((m.group(1), i + 1, j + 1))
            i = j
        i += 1
    return out


def reached(text, entries):
    """The functions of TEXT that ENTRIES reach by calls (or pointers) within TEXT."""
    funcs = functions(text)
    lines = text.split("\n")
    body = {n: "\n".join(lines[a:b]) for n, a, b in funcs}
    seen, todo = set(), [e for e in entries if e in body]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo += [g for g in body if g not in seen and re.search(r"\b%s\b" % g, body[f])]
    return seen, funcs


def enclosing(funcs, line):
    """The function of FUNCS whose lines hold LINE, or None."""
    return next((n for n, a, b in funcs if a <= line <= b), None)


def first_args(text, name):
    """The first argument of each call of NAME in TEXT, as written (stripped)."""
    out = []
    for m in re.finditer(r"(?<![\w.>])%s\s*\(" % re.escape(name), text):
        depth, i, start = 0, m.end(), m.end()
        while i < len(text):
            c = text[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif c == "," and depth == 0:
                break
            i += 1
        out.append((text.count("\n", 0, m.start()) + 1, text[start:i].strip()))
    return out


LIBS = ("libstipple_mount.a", "libstipple_mount_core.a", "libstipple_cli.a")


def own_objects(bindir, prog):
    """The objects of PROG's own sources, as meson names them (PROG.p/SUB_DIR_NAME.c.o),
    from the build's introspection: a build folder may keep objects of sources the
    program no longer has."""
    with open(os.path.join(bindir, "..", "meson-info", "intro-targets.json")) as f:
        target = next(t for t in json.load(f)
                      if os.path.realpath(t["filename"][0]) ==
                      os.path.realpath(os.path.join(bindir, prog)))
    srcdir = os.path.dirname(target["defined_in"])
    return [os.path.join(bindir, prog + ".p",
                         os.path.relpath(src, srcdir).replace("/", "_") + ".o")
            for part in target["target_sources"] for src in part["sources"]]


def linked_objects(bindir):
    """{object name: undefined symbols} of the objects the programs link."""
    libs = nm_table([os.path.join(bindir, lib) for lib in LIBS])
    objs = {}
    for prog in PROGRAMS:
        syms = nm_table([os.path.join(bindir, prog)])[os.path.join(bindir, prog)][0]
        for path, (_, undef) in nm_table(own_objects(bindir, prog)).items():
            objs[path] = undef
        for name, (glob, undef) in libs.items():
            if glob & syms:
                objs[name] = undef
    return objs


def uncalled(src, text, funcs, referenced):
    """{function: its lines} of SRC's UNCALLED functions that nothing calls: no object
    the programs link refers to it (REFERENCED) and TEXT names it only where defined."""
    out = {}
    for (file, name), _ in UNCALLED.items():
        span = next(((a, b) for n, a, b in funcs if n == name), None)
        if file != src or span is None or name in referenced:
            continue
        named = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r"\b%s\b" % name, text)]
        if all(line == span[0] for line in named):
            out[name] = span
    return out


def check_object(obj, undef, srcdir, referenced=frozenset()):
    """The privileged calls OBJ's source makes, as (line, name, first argument, whether
    it is allowed, whether a confined child's, the UNCALLED function that holds it or
    None)."""
    src = source_of(obj, srcdir)
    calls = {c_name(s) for s in undef} & PRIVILEGED
    found = []
    if src is None:
        return None, [(0, c, "source not found", False) for c in sorted(calls)]
    text = strip_comments(open(os.path.join(srcdir, src), errors="replace").read())
    confined, funcs = reached(text, CONFINED.get(src, ()))
    unused = uncalled(src, text, funcs, referenced)
    for name in sorted(calls):
        sites = first_args(text, name)
        if not sites:  # called through a macro or a pointer taken here: said, not allowed
            found.append((0, name, "no call site in the source", False, False, None))
        for line, arg in sites:
            func = enclosing(funcs, line)
            child = func in confined
            ok = src == MONITOR or child or arg in ALLOWED.get(name, ())
            exempt = func if not ok and func in unused else None
            found.append((line, name, arg, ok or exempt is not None, child, exempt))
    return src, found


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    bindir, root = argv[1], argv[2]
    srcdir = os.path.join(root, "mounthelper")
    bad = checked = 0
    monitor_calls = confined = 0
    objects = linked_objects(bindir)
    referenced = set().union(*objects.values())
    met = set()
    for obj, undef in sorted(objects.items()):
        src, found = check_object(obj, undef, srcdir, referenced)
        checked += 1
        for line, name, arg, ok, child, exempt in found:
            if exempt:
                met.add((src, exempt))
            where = "%s:%d" % (src or os.path.basename(obj), line)
            if src == MONITOR:
                monitor_calls += 1
                continue
            if child:
                confined += 1
                continue
            print("%s %s %s(%s)%s" % ("ok  " if ok else "FAIL", where, name, arg,
                                      " in %s, never called: %s" % (exempt, UNCALLED[src, exempt])
                                      if exempt else ""))
            bad += not ok
    print("%d objects of %s checked; monitor.c: %d privileged call sites; the confined "
          "children's (%s): %d" % (checked, " and ".join(PROGRAMS), monitor_calls,
                                   ", ".join(sorted(f for e in CONFINED.values() for f in e)),
                                   confined))
    if confined == 0:
        print("FAIL: no call found in the confined children's functions: the check is blind")
        bad += 1
    for file, func in sorted(set(UNCALLED) - met):
        print("FAIL: %s: no allowed call found in %s (UNCALLED): called now, or stale" %
              (file, func))
        bad += 1
    if monitor_calls == 0:
        print("FAIL: no privileged call found in monitor.c: the check is blind")
        bad += 1
    print("%d privileged calls outside monitor.c" % bad if bad else
          "every privileged call of the monitor is monitor.c's")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
