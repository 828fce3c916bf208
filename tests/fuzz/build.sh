#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the fuzz targets for libFuzzer with clang, AddressSanitizer and UBSan:
#
#   tests/fuzz/build.sh [OUTDIR]            (default build-fuzz/)
#   build-fuzz/fuzz_image_open -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
#       work-corpus/ tests/fuzz/corpus/image_open/
#
# Not part of the test suite: the replay_* unit tests run the stored corpus without
# libFuzzer. New inputs worth keeping (crashes once fixed, new coverage) go into
# tests/fuzz/corpus/<target>/.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/build-fuzz}
cc=${CC:-clang}
mkdir -p "$out"

flags="-g -O1 -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DSTP_VERSION=\"fuzz\"
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-I$repo/common -I$repo/tests/fuzz"
libs="$(pkg-config --libs libzstd libxxhash) -lpthread"

for src in "$repo"/tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	echo "building $out/$name" >&2
	# shellcheck disable=SC2086 # flags and libs are word lists
	$cc $flags -o "$out/$name" "$src" "$repo"/common/*.c $libs
done
