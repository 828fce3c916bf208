#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Which file and bytes each READ a command sends a stipple mount is for (run by hand, as root).

fuse_requests.py counts requests by kind; this names them. It traces the daemon's reads
of /dev/fuse with strace (their bytes: each request's header and arguments), runs
COMMAND, and prints every READ request as the file's path, offset and length, in order;
the paths come from the inode numbers, which stipple gives as st_ino. Reads served from
the page cache (warming's and the filler's pushes) never reach the daemon, so after
warming this lists exactly the reads that missed the hot region.

    tests/bench/fuse_reads.py [--image IMAGE [--warm-wait] [--no-fill]] [--list OUT] [--lookups]
                              MOUNT -- COMMAND...

--image mounts IMAGE at MOUNT first (with $STIPPLE, default `stipple`) and unmounts it at
the end; --warm-wait waits for warming to finish before COMMAND; --no-fill mounts without
the filler. --list OUT writes the reads as a hot list, one line per file in the order of
its first read: on a mount of an image without a hot list and with --no-fill, that is what
a launch asks of the file system with readahead on, the ASKED list of hot_margin.py.
--lookups lists the LOOKUP requests too, as the directory's path and the name asked for,
in order among the reads: after name priming, the names the kernel still had to ask.
strace slows the daemon: count and place reads with it, time nothing.
"""

import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

from benchlib import mount_status, regular_files

FUSE_LOOKUP = 1
FUSE_READ = 15
HEADER = struct.Struct("<IIQQIIII")    # fuse_in_header: len, opcode, unique, nodeid, ...
READ_IN = struct.Struct("<QQI")        # fuse_read_in: fh, offset, size, ...
DUMP = re.compile(r"\s*\| [0-9a-f]{5}  (.{48})")


def requests(trace):
    """The bytes of each read of /dev/fuse in an strace -e read=all dump, in order."""
    buf = bytearray()
    with open(trace) as f:
        for line in f:
            m = DUMP.match(line)
            if m:
                buf += bytes.fromhex(m.group(1).replace(" ", ""))
            elif buf:
                yield bytes(buf)
                buf = bytearray()
    if buf:
        yield bytes(buf)


def reads(trace, lookups=False):
    """[(nodeid, offset, size)] of the READ requests in TRACE; with LOOKUPS also
    (parent nodeid, name bytes, None) of the LOOKUP requests, in order."""
    out = []
    for req in requests(trace):
        if len(req) < HEADER.size:
            continue
        _, opcode, _, node, *_ = HEADER.unpack_from(req)
        if opcode == FUSE_READ and len(req) >= HEADER.size + READ_IN.size:
            _, off, size = READ_IN.unpack_from(req, HEADER.size)
            out.append((node, off, size))
        elif opcode == FUSE_LOOKUP and lookups:
            out.append((node, req[HEADER.size:].split(b"\0", 1)[0], None))
    return out


def dirs_by_inode(mount):
    """The path of each directory under MOUNT by inode number ('.' for the root; FUSE
    names the root 1 in requests)."""
    out = {1: "."}
    for d, _, _ in os.walk(mount):
        out.setdefault(os.lstat(d).st_ino, os.path.relpath(d, mount))
    return out


def paths_by_inode(mount):
    out = {}
    for rel, path in regular_files(mount):
        out.setdefault(os.lstat(path).st_ino, rel)
    return out


def write_list(path, found, names):
    ranges = collections.OrderedDict()
    for node, off, size in found:
        ranges.setdefault(node, []).append("%d-%d" % (off, off + size))
    with open(path, "w") as f:
        for node, spans in ranges.items():
            name = names.get(node, "?%d" % node)
            f.write("%s\t%s\n" % (name.replace("\\", "\\\\").replace("\t", "\\t")
                                  .replace("\n", "\\n"), ",".join(spans)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image")
    ap.add_argument("--warm-wait", action="store_true")
    ap.add_argument("--no-fill", action="store_true")
    ap.add_argument("--list", metavar="OUT")
    ap.add_argument("--lookups", action="store_true")
    ap.add_argument("mount")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no COMMAND")
    stipple = os.environ.get("STIPPLE", "stipple")
    if a.image:
        subprocess.run([stipple, "mount", *(["--no-fill"] if a.no_fill else []), a.image,
                        a.mount], check=True)
    trace = tempfile.NamedTemporaryFile(prefix="fuse-reads-", suffix=".strace", delete=False)
    try:
        while a.warm_wait and mount_status(a.mount).get("warm_done") != "1":
            time.sleep(0.02)
        tracer = subprocess.Popen(["strace", "-f", "-p", mount_status(a.mount)["pid"], "-e",
                                   "trace=read", "-e", "read=all", "-o", trace.name],
                                  stderr=subprocess.DEVNULL)
        time.sleep(1)  # strace attaches to every thread
        rc = subprocess.run(cmd).returncode
        time.sleep(0.2)
        tracer.terminate()
        tracer.wait()
        names = paths_by_inode(a.mount)
        dirs = dirs_by_inode(a.mount) if a.lookups else {}
    finally:
        if a.image:
            subprocess.run(["umount", a.mount], check=False)
    found = reads(trace.name, a.lookups)
    os.unlink(trace.name)
    for node, off, size in found:
        if size is None:
            print("LOOKUP %s/%s" % (dirs.get(node, "?%d" % node), off.decode(errors="replace")))
        else:
            print("READ %s off %d len %d" % (names.get(node, "?%d" % node), off, size))
    found = [r for r in found if r[2] is not None]
    print("%d READ requests; command exited %d" % (len(found), rc))
    if a.list:
        write_list(a.list, found, names)
    return rc


if __name__ == "__main__":
    sys.exit(main())
