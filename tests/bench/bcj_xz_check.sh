#!/bin/sh
# SPDX-License-Identifier: MIT
# Checks that stipple's BCJ filters produce the same bytes as xz's: xz encodes a raw
# stream with BCJ + LZMA2, decoding that with LZMA2 alone gives the filtered bytes.
#   tests/bench/bcj_xz_check.sh BCJ_GAIN x86|arm64 START FILE...
# START: stream position (for arm64, a multiple of 4, as xz requires). Exits 1 on the
# first difference.
set -eu
[ $# -ge 4 ] || { echo "usage: $0 BCJ_GAIN x86|arm64 START FILE..." >&2; exit 2; }
tool=$1 arch=$2 start=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$@"; do
	xz --format=raw --"$arch"=start="$start" --lzma2=preset=0 -c -- "$f" |
		xz --format=raw --lzma2=preset=0 -dc > "$tmp/xz"
	"$tool" --emit --"$arch" --offset "$start" -- "$f" > "$tmp/stipple"
	if ! cmp -s "$tmp/xz" "$tmp/stipple"; then
		echo "$f: $arch at $start differs from xz" >&2
		exit 1
	fi
	echo "$f: $arch at $start: same as xz"
done
