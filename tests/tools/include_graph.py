#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The include graph of common/'s modules, and whether it has a cycle.

A module is a .c file and the header of the same name (sign.c and sign.h are "sign").
A file that includes NAME_internal.h is part of module NAME: the image reader's parts
(super.c, meta.c, ...) are "image". An edge A -> B says that a file of A includes B's
header. Prints the edges, one a line, then either "no cycle" or each cycle found (exit
1 if any). Headers from outside the folder (<zstd.h>, "fuse.h") are not nodes.

With --objects ODIR (the build's common/libstipple_common.a.p), the link graph too:
A -> B when an object of A refers to a symbol an object of B defines (nm).

usage: include_graph.py [--objects ODIR] [DIR]    (default: common/ beside tests/)
"""

import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)
INTERNAL = "_internal"


def module_of(name, text):
    """The module a file belongs to: NAME, or X when it includes X_internal.h."""
    for inc in INCLUDE.findall(text):
        if inc.endswith(INTERNAL) and inc != name:
            return inc[:-len(INTERNAL)]
    return name[:-len(INTERNAL)] if name.endswith(INTERNAL) else name


def graph(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith((".c", ".h")))
    headers = {f[:-2] for f in files if f.endswith(".h")}
    texts = {f: open(os.path.join(folder, f), encoding="utf-8").read() for f in files}
    mod = {f: module_of(f[:-2], texts[f]) for f in files}
    mod_of_header = {h: mod[h + ".h"] for h in headers}
    edges = set()
    for f in files:
        for inc in INCLUDE.findall(texts[f]):
            if inc in headers and mod_of_header[inc] != mod[f]:
                edges.add((mod[f], mod_of_header[inc]))
    return sorted(set(mod.values())), sorted(edges)


def cycles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan)."""
    succ = {n: [b for a, b in edges if a == n] for n in nodes}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(n):
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for m in succ[n]:
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            comp = []
            while True:
                m = stack.pop()
                on.discard(m)
                comp.append(m)
                if m == n:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for n in nodes:
        if n not in index:
            visit(n)
    return found


def symbols(obj, *flags):
    out = subprocess.run(["nm", "-g", *flags, obj], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def link_graph(folder, objdir):
    """Module edges by the symbols each object uses and defines."""
    mod = {}
    for f in os.listdir(folder):
        if f.endswith(".c"):
            mod[f] = module_of(f[:-2], open(os.path.join(folder, f), encoding="utf-8").read())
    defs, uses = {}, {}
    for o in os.listdir(objdir):
        src = o[:-2] if o.endswith(".o") else None
        if src in mod:
            path = os.path.join(objdir, o)
            for sym in symbols(path, "--defined-only"):
                defs[sym] = mod[src]
            uses.setdefault(mod[src], set()).update(symbols(path, "--undefined-only"))
    edges = {(m, defs[s]) for m, used in uses.items() for s in used
             if s in defs and defs[s] != m}
    return sorted(set(mod.values())), sorted(edges)


def report(what, nodes, edges):
    print("%s graph:" % what)
    for a, b in edges:
        print("  %s -> %s" % (a, b))
    found = cycles(nodes, edges)
    for comp in found:
        print("  cycle: " + " <-> ".join(comp))
    if not found:
        print("  no cycle (%d modules, %d edges)" % (len(nodes), len(edges)))
    return bool(found)


def main():
    args = sys.argv[1:]
    objdir = None
    if args[:1] == ["--objects"]:
        objdir, args = args[1], args[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    folder = args[0] if args else os.path.join(here, "..", "..", "common")
    bad = report("include", *graph(folder))
    if objdir:
        bad = report("link", *link_graph(folder, objdir)) or bad
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
