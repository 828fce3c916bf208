#!/bin/sh
# SPDX-License-Identifier: MIT
# Build benchmark (run by hand, not part of the test suite):
#
#   tests/bench/build_bench.sh [TREE [MKSTIPPLE_ARGS...]]     (TREE: Python's standard library)
#
# Builds TREE with mkstipple (default settings plus MKSTIPPLE_ARGS) and with
# `mksquashfs -comp zstd -Xcompression-level 19 -b 1M -noappend`, and prints image size,
# build time and peak memory side by side with the ratio stipple/squashfs. A solid
# `tar | zstd -19 --long=27` of the same tree is shown for reference (no random access).
# Needs: mksquashfs (squashfs-tools), GNU time (time), zstd, tar. Uses $STIPPLE_BUILD
# (default <repo>/build) for mkstipple, which must already be built.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${STIPPLE_BUILD:-$repo/build}
mkstipple=$build/builder/mkstipple
tree=${1:-$(/usr/bin/python3 -c "import sysconfig; print(sysconfig.get_path('stdlib'))")}
[ $# -gt 0 ] && shift

die() { echo "build_bench: $*" >&2; exit 1; }
[ -d "$tree" ] || die "$tree: not a directory"
[ -x "$mkstipple" ] || die "$mkstipple: not built (run tests/run or ninja -C $build)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing (apt-get install time)"
command -v mksquashfs >/dev/null || die "mksquashfs missing (apt-get install squashfs-tools)"
command -v zstd >/dev/null || die "zstd missing (apt-get install zstd)"

work=$(mktemp -d "${TMPDIR:-/tmp}/stipple-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# Runs "$@" under GNU time; prints "SECONDS KBYTES" (elapsed, peak resident).
measure() {
	/usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/out" 2>&1 ||
		{ cat "$work/out" >&2; die "failed: $*"; }
	cat "$work/time"
}

size_of() { stat -c %s "$1"; }

input=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
echo "tree: $tree ($input bytes)"
echo "mkstipple args: ${*:-(defaults)}"
echo

r=$(measure "$mkstipple" --quiet "$@" "$tree" "$work/image.stipple")
st_time=${r% *} st_mem=${r#* }
st_size=$(size_of "$work/image.stipple")

r=$(measure mksquashfs "$tree" "$work/image.sqfs" -comp zstd -Xcompression-level 19 \
	-b 1M -noappend -no-progress -quiet)
sq_time=${r% *} sq_mem=${r#* }
sq_size=$(size_of "$work/image.sqfs")

r=$(measure sh -c 'tar -C "$1" -cf - . | zstd -q -19 --long=27 -T1 -o "$2"' sh \
	"$tree" "$work/tree.tar.zst")
tz_time=${r% *} tz_mem=${r#* }
tz_size=$(size_of "$work/tree.tar.zst")

awk -v st_size="$st_size" -v st_time="$st_time" -v st_mem="$st_mem" \
    -v sq_size="$sq_size" -v sq_time="$sq_time" -v sq_mem="$sq_mem" \
    -v tz_size="$tz_size" -v tz_time="$tz_time" -v tz_mem="$tz_mem" -v input="$input" '
function mb(b) { return sprintf("%.2f MB", b / 1e6) }
function mib(k) { return sprintf("%.0f MiB", k / 1024) }
BEGIN {
	fmt = "%-26s %14s %10s %12s\n"
	printf fmt, "", "image", "time", "peak memory"
	printf fmt, "mkstipple", mb(st_size), st_time " s", mib(st_mem)
	printf fmt, "mksquashfs zstd-19 1M", mb(sq_size), sq_time " s", mib(sq_mem)
	printf fmt, "stipple / squashfs", sprintf("%.3f", st_size / sq_size),
		sprintf("%.2f", sq_time > 0 ? st_time / sq_time : 0), sprintf("%.2f", st_mem / sq_mem)
	printf fmt, "tar | zstd -19 --long=27", mb(tz_size), tz_time " s", mib(tz_mem)
	printf "\nstipple image: %.1f%% of the tree, %.3f x the solid tar.zst\n",
		100 * st_size / input, st_size / tz_size
}'
