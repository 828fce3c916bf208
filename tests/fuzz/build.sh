#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds fuzz targets for libFuzzer with clang, AddressSanitizer and UBSan:
#
#   tests/fuzz/build.sh OUTDIR [TARGET...]     (default: every tests/fuzz/fuzz_*.c)
#
# OUTDIR/fuzz_TARGET is the fuzzer. tests/bench/fuzz.sh builds and runs one; the
# replay_* unit tests (meson.build) run the stored corpus without libFuzzer.
# What each target links is tests/fuzz/meson.build's: this configures the project with
# clang and the sanitizers in OUTDIR/meson and builds the fuzz_TARGET executables there.
# CC (default clang) and EXTRA_CFLAGS (e.g. -DFUZZ_STRICT_XATTR) are taken from the
# environment.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build.sh OUTDIR [TARGET...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$out/meson

if [ $# -eq 0 ]; then
	for src in "$repo"/tests/fuzz/fuzz_*.c; do
		name=$(basename "$src" .c)
		set -- "$@" "${name#fuzz_}"
	done
fi

# Every object carries the fuzzer's coverage hooks; the targets link its main.
cflags="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined ${EXTRA_CFLAGS:-}"
setup=setup
[ -f "$build/build.ninja" ] && setup="setup --reconfigure"
# shellcheck disable=SC2086 # $setup is two words on a second run
CC=${CC:-clang} meson $setup "$build" "$repo" --buildtype=debug -Doptimization=1 \
	-Db_sanitize=address,undefined -Db_lundef=false -Dc_args="$cflags" >"$out/setup.log" 2>&1 ||
	{ tail -n 30 "$out/setup.log" >&2; exit 1; }

for name; do
	[ -f "$repo/tests/fuzz/fuzz_$name.c" ] || { echo "build.sh: no target $name" >&2; exit 2; }
	echo "building $out/fuzz_$name" >&2
	ninja -C "$build" "tests/fuzz/fuzz_$name" >&2
	cp "$build/tests/fuzz/fuzz_$name" "$out/fuzz_$name"
done
