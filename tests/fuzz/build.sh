#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds fuzz targets for libFuzzer with clang, AddressSanitizer and UBSan:
#
#   tests/fuzz/build.sh OUTDIR [TARGET...]     (default: every tests/fuzz/fuzz_*.c)
#
# OUTDIR/fuzz_TARGET is the fuzzer. tests/bench/fuzz.sh builds and runs one; the
# replay_* unit tests (meson.build) run the stored corpus without libFuzzer.
# CC (default clang) and EXTRA_CFLAGS (e.g. -DFUZZ_STRICT_XATTR) are taken from the
# environment.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build.sh OUTDIR [TARGET...]}
shift
cc=${CC:-clang}
mount=$repo/mounthelper/mount

# The sources a target needs besides fuzz_TARGET.c, reseal.c and common/: the same
# lists as fuzz_targets in meson.build. A new target (the warming and priming plans
# come next) gets a line here and there.
sources_of() {
	case $1 in
	fuseops) echo "$repo/tests/fuzz/fuse_shim.c $mount/fuseops.c $mount/warm.c $mount/fill.c $mount/warmplan.c $mount/record.c $mount/status.c" ;;
	warm_plan) echo "$mount/warmplan.c" ;;
	prime_plan) echo "$mount/prime.c $mount/monproto.c" ;;
	monproto) echo "$mount/setup.c $mount/monproto.c" ;;
	archive) b=$repo/builder
		echo "$b/archive_in.c $b/tree.c $b/scan.c $b/source.c $b/exclude.c $b/attrs.c $b/elfcode.c" ;;
	*) ;;
	esac
}

if [ $# -eq 0 ]; then
	for src in "$repo"/tests/fuzz/fuzz_*.c; do
		name=$(basename "$src" .c)
		set -- "$@" "${name#fuzz_}"
	done
fi

flags="-g -O1 -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DSTP_VERSION=\"fuzz\"
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-I$repo/common -I$repo/tests/fuzz -I$mount -I$repo/builder $(pkg-config --cflags fuse3)
	${EXTRA_CFLAGS:-}"
libs="$(pkg-config --libs libzstd libxxhash libcrypto libarchive) -lpthread"
mkdir -p "$out"

for name; do
	src=$repo/tests/fuzz/fuzz_$name.c
	[ -f "$src" ] || { echo "build.sh: no target $name ($src)" >&2; exit 2; }
	echo "building $out/fuzz_$name" >&2
	# shellcheck disable=SC2046,SC2086 # word lists
	$cc $flags -o "$out/fuzz_$name" "$src" "$repo/tests/fuzz/reseal.c" $(sources_of "$name") \
		"$repo"/common/*.c $libs
done
