#!/usr/bin/env python3
"""The longest C functions and files per folder: the house figures of the closing notes.

    tests/bench/funclen.py [--over N] [FOLDER...]   (default: common builder mounthelper/*)

A function is counted from the first line of its signature to its closing brace, as the
code is written here: the body opens with "{" and closes with "}" in column 0. Prints per
folder the mean lines per function, the three longest functions and the longest file;
with --over N, every function longer than N lines instead.
"""
import argparse
import glob
import os
import re
import sys

SIGNATURE = re.compile(r"^[A-Za-z_].*\(")
NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def functions(path):
    """(name, first line, lines) of each function definition in PATH."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out, start = [], None
    for i, line in enumerate(lines):
        if start is None and SIGNATURE.match(line) and not line.startswith(("#", "typedef")):
            start = None if line.rstrip().endswith("}") else i  # a one-line function
        elif start is not None and line.startswith("{"):
            name = NAME.search(lines[start])
            out.append([name.group(1) if name else "?", start + 1, None])
        elif line.startswith("}") and out and out[-1][2] is None:
            out[-1][2] = i - out[-1][1] + 2
            start = None
        if start is not None and line.rstrip().endswith(";") and not (out and out[-1][2] is None):
            start = None  # a declaration, not a definition
    return [tuple(f) for f in out if f[2]]


def folder_sources(folder):
    return sorted(p for p in glob.glob(os.path.join(folder, "*.c")) if os.path.isfile(p))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--over", type=int, help="list every function longer than this")
    ap.add_argument("folders", nargs="*")
    a = ap.parse_args()
    folders = a.folders or ["common", "builder"] + sorted(glob.glob("mounthelper/*/"))
    for folder in folders:
        files = folder_sources(folder)
        if not files:
            continue
        found = [(n, p, first, length) for p in files for n, first, length in functions(p)]
        if a.over is not None:
            for n, p, first, length in sorted(found, key=lambda f: -f[3]):
                if length > a.over:
                    print("%s:%d: %s, %d lines" % (p, first, n, length))
            continue
        sizes = {p: sum(1 for _ in open(p, encoding="utf-8", errors="replace")) for p in files}
        longest_file = max(sizes, key=sizes.get)
        mean = sum(f[3] for f in found) / max(len(found), 1)
        top = sorted(found, key=lambda f: -f[3])[:3]
        print("%-24s %5.1f lines/function (%d); longest %s; file %s, %d lines" % (
            folder.rstrip("/"), mean, len(found),
            ", ".join("%s:%s %d" % (os.path.basename(p), n, length) for n, p, _, length in top),
            os.path.basename(longest_file), sizes[longest_file]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
