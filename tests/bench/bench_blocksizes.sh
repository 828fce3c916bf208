#!/bin/sh
# SPDX-License-Identifier: MIT
# Random-read benchmark by block size (run by hand, not part of the test suite):
#
#   tests/bench/bench_blocksizes.sh [TREE [MKSTIPPLE_ARGS...]]     (TREE: Python's standard library)
#
# Builds TREE with mkstipple at block sizes 64K, 1M, 4M and 32M (default level 19, so the
# 32M build takes a while), then times 4 KiB random reads with `stipple bench` on each:
# once with a cache budget of 8 blocks (the default at 32 MiB, starting empty), once with a
# budget covering the whole image, decoded before timing (--warm). Prints one table row
# per run: block size, image size, dictionary, budget, reads/s, MiB/s, p50 and p99
# latency, cache hit ratio and decode throughput.
#
# Environment: STIPPLE_BUILD (default <repo>/build, must be built), READS (default 20000),
# READ_SIZE (default 4K), THREADS (default 1), SEED (default 1), BLOCK_SIZES (default
# "64K 1M 4M 32M"). Needs jq.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${STIPPLE_BUILD:-$repo/build}
mkstipple=$build/builder/mkstipple
stipple=$build/mounthelper/stipple
tree=${1:-$(/usr/bin/python3 -c "import sysconfig; print(sysconfig.get_path('stdlib'))")}
[ $# -gt 0 ] && shift
reads=${READS:-20000}
read_size=${READ_SIZE:-4K}
threads=${THREADS:-1}
seed=${SEED:-1}
block_sizes=${BLOCK_SIZES:-64K 1M 4M 32M}

die() { echo "bench_blocksizes: $*" >&2; exit 1; }
[ -d "$tree" ] || die "$tree: not a directory"
[ -x "$mkstipple" ] && [ -x "$stipple" ] || die "$build: not built (run tests/run or ninja -C $build)"
command -v jq >/dev/null || die "jq missing (apt-get install jq)"

work=$(mktemp -d "${TMPDIR:-/tmp}/stipple-blocksizes.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

echo "tree: $tree; $reads random reads of $read_size, $threads thread(s), seed $seed"
echo "mkstipple args: ${*:-(defaults)}"
echo
printf '%-6s %10s %5s %7s %10s %9s %9s %9s %8s %11s\n' block image dict budget reads/s \
	MiB/s p50 p99 hits 'decode MiB/s'

# One table row from bench's JSON on stdin; $1 $2 $3: block size, image bytes, dictionary.
row() {
	jq -r --arg bs "$1" --arg size "$2" --arg dict "$3" '
		def us: (. / 1000 * 10 | round / 10 | tostring) + "us";
		[$bs, ($size | tonumber / 1048576 * 100 | round / 100 | tostring) + "M", $dict,
		 ((.cache_budget | tostring) + (if .warm then "w" else "" end)),
		 (.reads_per_second | round | tostring),
		 (.mib_per_second * 10 | round / 10 | tostring),
		 (.latency_ns.p50 | us), (.latency_ns.p99 | us),
		 ((.hit_ratio * 1000 | round / 10 | tostring) + "%"),
		 (if .blocks_decoded > 0 then (.decode_mib_per_second | round | tostring) else "-" end)]
		| @tsv' |
	awk -F '\t' '{ printf "%-6s %10s %5s %7s %10s %9s %9s %9s %8s %11s\n",
		$1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }'
}

for bs in $block_sizes; do
	image=$work/image-$bs.stipple
	"$mkstipple" --quiet --block-size "$bs" "$@" "$tree" "$image" || die "mkstipple --block-size $bs failed"
	size=$(stat -c %s "$image")
	blocks=$("$stipple" info "$image" | awk '$1 == "blocks:" { print $2 }')
	dict=no
	"$stipple" info "$image" | grep -q '^features:.*dictionary' && dict=yes
	for run in cold warm; do
		if [ $run = cold ]; then
			opts="--cache-budget 8"
		else
			opts="--cache-budget $blocks --warm"
		fi
		# shellcheck disable=SC2086 # opts holds several words on purpose
		"$stipple" bench --json --reads "$reads" --read-size "$read_size" \
			--threads "$threads" --seed "$seed" $opts "$image" >"$work/out.json" ||
			die "stipple bench failed on the $bs image"
		row "$bs" "$size" "$dict" <"$work/out.json"
	done
	rm -f "$image"
done
echo
echo "budget: blocks the cache keeps; w: decoded before timing (--warm)."
echo "hits: cache lookups served without decoding; p50/p99: latency of one read."
