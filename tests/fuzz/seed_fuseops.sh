#!/bin/sh
# SPDX-License-Identifier: MIT
# Makes the seed images of corpus/fuseops/ with mkstipple from tiny trees:
#
#   tests/fuzz/seed_fuseops.sh BUILDDIR
#
# Each seed stays under 64 KiB so that the fuzzer's -max_len keeps all of it. Run again
# only when the format changes; the seeds are committed.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
mk=${1:-$repo/build}/builder/mkstipple
out=$repo/tests/fuzz/corpus/fuseops
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

xattr() { python3 -c 'import os,sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())' "$@"; }

# basic: a file, a hole, a symlink, a hard link, xattrs, a subdirectory, an empty file,
# a file across a 64 KiB block edge, a FIFO.
t=$tmp/basic
mkdir -p "$t/sub/deeper"
printf 'hello, world\n' >"$t/hello.txt"
ln "$t/hello.txt" "$t/sub/hardlink"
ln -s ../hello.txt "$t/sub/link"
ln -s "$(printf 'x%.0s' $(seq 1 200))" "$t/longlink"
: >"$t/empty"
python3 -c 'import sys; f=open(sys.argv[1],"wb"); f.write(b"head"); f.seek(200000); f.write(b"tail")' "$t/sparse"
python3 -c 'import sys; open(sys.argv[1],"wb").write(bytes(i*7%251 for i in range(70000)))' "$t/sub/deeper/edge"
mkfifo "$t/fifo"
xattr "$t/hello.txt" user.greeting "hi"
xattr "$t/hello.txt" user.empty ""
xattr "$t/sub" user.dir "a directory"
xattr "$t/sub/deeper/edge" user.big "$(printf 'v%.0s' $(seq 1 3000))"
"$mk" -q -b 64K "$t" "$out/basic.stipple"

# dict: 64 KiB blocks of many small files sharing a long head, which get the trained
# dictionary (and a small one, since there is little to learn).
t=$tmp/dict
mkdir -p "$t"
python3 - "$t" <<'PY'
import random, sys
random.seed(2)
head = "".join(random.choice("abcdefghij klmnop\n") for _ in range(3000))
for i in range(400):
    with open("%s/f%04d.txt" % (sys.argv[1], i), "w") as f:
        f.write(head + "".join(random.choice("0123456789abcdef") for _ in range(64)))
PY
"$mk" -q -b 64K "$t" "$out/dict.stipple"

# bcj: an x86-64 program, filtered before compression.
t=$tmp/bcj
mkdir -p "$t/bin"
cp /usr/bin/true "$t/bin/true"
"$mk" -q -b 64K "$t" "$out/bcj.stipple"

# raw: incompressible bytes, stored raw; and a wide directory of long names.
t=$tmp/raw
mkdir -p "$t/wide"
head -c 20000 /dev/urandom >"$t/random"
for i in $(seq 1 120); do : >"$t/wide/$(printf 'n%03d' "$i")$(printf 'y%.0s' $(seq 1 $((i * 2))))"; done
"$mk" -q -b 64K "$t" "$out/raw.stipple"

# hot: a hot list, so the image has a hot region first.
t=$tmp/hot
mkdir -p "$t/lib"
python3 -c 'import sys; open(sys.argv[1],"wb").write(b"".join(b"line %d\n" % i for i in range(30000)))' "$t/lib/data"
printf 'start\n' >"$t/start"
printf 'start\nlib/data\n' >"$tmp/hot.list"
"$mk" -q -b 64K --hot-list "$tmp/hot.list" "$t" "$out/hot.stipple"

ls -l "$out"
