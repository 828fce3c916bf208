#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Walk benchmark: metadata-only work over a fresh mount, stipple beside squashfuse_ll.

  find      find MNT >/dev/null
  findsize  find MNT -type f -size +1k (every file stat'ed)
  lslr      ls -lR MNT >/dev/null
  imports   a Python import storm: sys.path holds every top folder of the tree, the storm
            imports namespace packages found in many of them (each probe for an
            __init__ file that is not there is a negative lookup), then modules that exist
            (a loader for .txt files) and modules that do not, twice, with the import
            system's own caches invalidated between the two passes (the second pass is
            what a runtime that stats its way through a path costs: names known to the
            kernel or not)

Each run mounts the image afresh, drops the page, dentry and inode caches after the mount
is live (so both servers start from the disk), and times the command under the same nice
level for both; the CPU time of the walker (its children included) and of the server
are printed under each wall time, being less disturbed by a busy machine. Kinds alternate (A B A B) for --rounds rounds; the medians are printed.
With --count, one more run of each (untimed) counts the FUSE requests by opcode from the
kernel's fuse:fuse_request_send tracepoint, filtered on the mount's connection.

The images are built beforehand (this script does not build): for the scale tree
    mkstipple --level 3 TREE scale.stp
    mksquashfs TREE scale.sqfs -comp zstd -b 1M
Needs root (mounting, drop_caches, tracefs).

Kinds: stipple (this build), before (the stipple of --before-build, say the commit
before a change), squashfuse_ll.

usage: walk_bench.py --stipple-image IMG --squash-image IMG [--build DIR] [--rounds N]
                     [--only find,lslr,...] [--kinds stipple,squashfuse_ll] [--count]
                     [--before-build DIR]
                     [--nice N] [--mount-args "-o ..."]
"""

import argparse
import collections
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time

from benchlib import is_mounted, median, unmount, wait_mounted

TRACING = "/sys/kernel/tracing"

STORM = r'''
import importlib, importlib.abc, importlib.machinery, os, sys, time
mnt, nfiles = sys.argv[1], int(sys.argv[2])

class TextLoader(importlib.abc.Loader):
    """A .txt file is a module holding its text: real reads, no compile."""
    def __init__(self, name, path):
        self.path = path
    def create_module(self, spec):
        return None
    def exec_module(self, mod):
        with open(self.path, "rb") as f:
            mod.text = f.read()

sys.path_hooks.insert(0, importlib.machinery.FileFinder.path_hook(
    (TextLoader, [".txt"]),
    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)))
sys.path_importer_cache.clear()
sys.dont_write_bytecode = True
tops = sorted(os.listdir(mnt))
sys.path[:0] = [os.path.join(mnt, t) for t in tops]
subs = sorted({s for t in tops[:50] for s in os.listdir(os.path.join(mnt, t))})

def one_pass():
    found = missing = 0
    for s in subs:
        pkg = importlib.import_module(s)           # a namespace package over many tops
        for i in range(nfiles):
            for name in ("f%04d" % i, "g%04d" % i):   # f exists, g does not
                full = "%s.%s" % (s, name)
                try:
                    importlib.import_module(full)
                    found += 1
                except ModuleNotFoundError:
                    missing += 1
    return found, missing

a = one_pass()
for k in [k for k in sys.modules if k.split(".")[0] in subs]:
    del sys.modules[k]
importlib.invalidate_caches()
sys.path_importer_cache.clear()
b = one_pass()
assert a == b and a[0] > 0 and a[1] > 0, (a, b)
'''


def workload(name, mnt, storm_files):
    if name == "find":
        return "find %s >/dev/null" % shlex.quote(mnt)
    if name == "findsize":
        return "find %s -type f -size +1k >/dev/null" % shlex.quote(mnt)
    if name == "lslr":
        return "ls -lR %s >/dev/null" % shlex.quote(mnt)
    if name == "imports":
        return "python3 -I -c %s %s %d" % (shlex.quote(STORM), shlex.quote(mnt), storm_files)
    raise SystemExit("walk_bench: unknown workload %s" % name)


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def connection_of(mnt):
    """The mount's device as the fuse tracepoints name it (the kernel's dev_t)."""
    if not is_mounted(mnt):
        raise RuntimeError("%s is not mounted" % mnt)
    dev = os.stat(mnt).st_dev
    return (os.major(dev) << 20) | os.minor(dev)


class Tracer:
    """A tracefs instance of its own: fuse_request_send, one connection, counted."""

    def __init__(self, conn):
        self.dir = os.path.join(TRACING, "instances", "walk-bench-%d" % os.getpid())
        os.mkdir(self.dir)
        ev = os.path.join(self.dir, "events", "fuse", "fuse_request_send")
        self._write(os.path.join(self.dir, "buffer_size_kb"), "65536")
        self._write(os.path.join(ev, "filter"), "connection == %d" % conn)
        self._write(os.path.join(ev, "enable"), "1")

    @staticmethod
    def _write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def counts(self):
        self._write(os.path.join(self.dir, "tracing_on"), "0")
        c = collections.Counter()
        with open(os.path.join(self.dir, "trace")) as f:
            for line in f:
                if "opcode" in line:
                    c[line.split("(")[-1].split(")")[0].replace("FUSE_", "")] += 1
        with open(os.path.join(self.dir, "per_cpu", "cpu0", "stats")) as f:
            overrun = [l for l in f if l.startswith("overrun") and l.split()[1] != "0"]
        if overrun:
            c["LOST"] = int(overrun[0].split()[1])
        return c

    def close(self):
        os.rmdir(self.dir)


class Server:
    def __init__(self, kind, args):
        self.kind, self.args = kind, args

    def mount(self, mnt):
        if self.kind in ("stipple", "before"):
            build = self.args.build if self.kind == "stipple" else self.args.before_build
            cmd = [os.path.join(build, "mounthelper", "stipple"), "mount",
                   *shlex.split(self.args.mount_args), self.args.stipple_image, mnt]
        else:
            cmd = ["squashfuse_ll", self.args.squash_image, mnt]
        t = time.monotonic()
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL)
        wait_mounted(mnt)
        return time.monotonic() - t


def server_cpu(mnt):
    """CPU seconds (user + system) so far of the processes whose command line names MNT:
    the FUSE server."""
    want, total = os.fsencode(os.path.realpath(mnt)), 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


def run_one(server, name, args, count=False):
    mnt = tempfile.mkdtemp(prefix="walk-%s-" % server.kind)
    tracer = None
    try:
        server.mount(mnt)
        drop_caches()
        if count:
            tracer = Tracer(connection_of(mnt))
        cmd = "nice -n %d sh -c %s" % (args.nice, shlex.quote(workload(name, mnt, args.storm_files)))
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        served = server_cpu(mnt)
        t = time.monotonic()
        r = subprocess.run(cmd, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        took = time.monotonic() - t
        ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (ru2.ru_utime - ru.ru_utime) + (ru2.ru_stime - ru.ru_stime)
        served = server_cpu(mnt) - served
        if r.returncode:
            raise RuntimeError("%s on %s exited %d: %s" % (name, server.kind, r.returncode,
                                                           r.stderr[-2000:]))
        return tracer.counts() if count else (took, cpu, served)
    finally:
        if tracer:
            tracer.close()
        unmount(mnt)
        os.rmdir(mnt)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stipple-image", required=True)
    p.add_argument("--squash-image", required=True)
    p.add_argument("--build", default=os.environ.get("STIPPLE_BUILD", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build")))
    p.add_argument("--before-build", help="another build, for the kind 'before'")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="find,findsize,lslr,imports")
    p.add_argument("--kinds", default="stipple,squashfuse_ll")
    p.add_argument("--count", action="store_true")
    p.add_argument("--nice", type=int, default=5)
    p.add_argument("--storm-files", type=int, default=200,
                   help="names tried per namespace package, found and missing each")
    p.add_argument("--mount-args", default="", help="extra arguments to stipple mount")
    args = p.parse_args()
    servers = [Server(k, args) for k in args.kinds.split(",")]
    names = args.only.split(",")
    times = collections.defaultdict(list)
    cpus = collections.defaultdict(list)
    servers_cpu = collections.defaultdict(list)
    for rnd in range(args.rounds):
        for name in names:
            for s in servers:
                took, cpu, served = run_one(s, name, args)
                times[name, s.kind].append(took)
                cpus[name, s.kind].append(cpu)
                servers_cpu[name, s.kind].append(served)
                print("round %d %-8s %-13s %.3f s (cpu: walker %.2f s, server %.2f s)"
                      % (rnd + 1, name, s.kind, took, cpu, served), file=sys.stderr, flush=True)
    print("%-9s %s" % ("workload", "".join("%16s" % s.kind for s in servers)))
    for name in names if args.rounds else []:
        print("%-9s %s" % (name, "".join("%14.3f s" % median(times[name, s.kind]) for s in servers)))
        print("%-9s %s" % ("  walker", "".join("%14.3f s" % median(cpus[name, s.kind]) for s in servers)))
        print("%-9s %s" % ("  server", "".join("%14.3f s" % median(servers_cpu[name, s.kind])
                                                for s in servers)))
    if args.count:
        for name in names:
            for s in servers:
                c = run_one(s, name, args, count=True)
                print("requests %-8s %-13s total %7d: %s" % (name, s.kind, sum(c.values()), ", ".join(
                    "%s %d" % kv for kv in c.most_common())))


if __name__ == "__main__":
    main()
