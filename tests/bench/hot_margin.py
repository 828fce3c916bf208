#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How wide should mkstipple widen a hot list's ranges? Compares two lists recorded from
the same launch of a tree:

  TOUCHED  recorded with the kernel's readahead down (`stipple mount --record`, this
           build): the pages the application read or faulted in
  ASKED    what a launch asks the file system for at run time, readahead on: a list
           recorded by a build from before readahead was turned down, or any list of the
           reads a normal mount serves

For each margin, TOUCHED's ranges are widened as builder/order.c does it (by the margin
on each side, the start rounded down to a page, both clamped to the file; a file left
covered whole is whole) and merged; printed: the hot region's bytes, and the bytes and
ranges of ASKED left outside it, each of which costs a cold block's decode at run time.

usage: hot_margin.py TREE TOUCHED ASKED [--margins 0,16K,...]
"""

import argparse
import os

PAGE = 4096


def unescape(path):
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and i + 1 < len(path):
            out.append({"t": "\t", "n": "\n", "\\": "\\"}.get(path[i + 1], path[i + 1]))
            i += 2
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def read_list(tree, path):
    """{path: (size, [(start, end)])}, a file listed without ranges as one range over all
    of it, the ranges of every line of a file together."""
    out = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, _, ranges = line.partition("\t")
            if ranges == "lookup":  # a name looked up, nothing read
                continue
            name = unescape(name)
            full = os.path.join(tree, name)
            if not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            # clamped to the file: a recorded range ends on a page, past a file's last byte
            spans = ([tuple(min(int(x), size) for x in r.split("-")) for r in ranges.split(",")]
                     if ranges else [(0, size)])
            out.setdefault(name, (size, []))[1].extend(spans)  # a file listed again adds
    return out


def widen(spans, size, margin):
    w = []
    for a, b in spans:
        if a >= size or b <= a:
            continue
        b = min(b, size)
        a = (a - margin) & ~(PAGE - 1) if a > margin else 0
        b = b + margin if size - b > margin else size
        w.append((a, b))
    return merge(w)


def merge(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def outside(asked, hot):
    """Bytes and count of the pieces of ASKED's ranges not inside HOT's (both merged)."""
    nbytes = pieces = 0
    for a, b in asked:
        pos = a
        for c, d in hot:
            if d <= pos or c >= b:
                continue
            if c > pos:
                nbytes += c - pos
                pieces += 1
            pos = max(pos, d)
            if pos >= b:
                break
        if pos < b:
            nbytes += b - pos
            pieces += 1
    return nbytes, pieces


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20}.get(s[-1:].upper(), 1)
    return int(s[:-1] if mult > 1 else s) * mult


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tree")
    p.add_argument("touched")
    p.add_argument("asked")
    p.add_argument("--margins", default="0,16K,32K,64K,128K,256K")
    a = p.parse_args()
    touched = read_list(a.tree, a.touched)
    asked = read_list(a.tree, a.asked)
    t_bytes = sum(sum(b - a_ for a_, b in merge(s)) for _, s in touched.values())
    a_bytes = sum(sum(b - a_ for a_, b in merge(s)) for _, s in asked.values())
    print("touched: %d files, %.1f MiB; asked: %d files, %.1f MiB (%d files asked for "
          "but never touched)" % (len(touched), t_bytes / 2**20, len(asked), a_bytes / 2**20,
                                  len(set(asked) - set(touched))))
    print("%10s %14s %18s %14s" % ("margin", "hot MiB", "asked outside MiB", "pieces"))
    for m in (size_arg(x) for x in a.margins.split(",")):
        hot_total = out_bytes = out_pieces = 0
        for name, (size, spans) in asked.items():
            hot = widen(touched[name][1], size, m) if name in touched else []
            b, n = outside(merge(spans), hot)
            out_bytes += b
            out_pieces += n
        for name, (size, spans) in touched.items():
            hot_total += sum(d - c for c, d in widen(spans, size, m))
        print("%9dK %14.1f %18.2f %14d" % (m >> 10, hot_total / 2**20, out_bytes / 2**20,
                                           out_pieces))


if __name__ == "__main__":
    main()
