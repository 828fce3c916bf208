#!/bin/sh
# SPDX-License-Identifier: MIT
# The size and time table (run by hand, not part of the test suite):
#
#   tests/bench/compress_table.sh [TREE]                  (TREE: Python's standard library)
#   tests/bench/compress_table.sh --table RAW [TREE]      (the table from a kept RAW file)
#
# Builds TREE with mkstipple at every block size of $BLOCKS and level of $LEVELS, with and
# without BCJ (--no-bcj), and beside it with mksquashfs zstd-19 1M, mksquashfs xz 1M with
# the x86 BCJ, mkfs.erofs lz4hc, a solid `tar | zstd -19 --long=27` and `tar | xz -9e`.
# Each build runs $REPEAT times, all builds taking turns within a round so that a change
# in the machine's load falls on every row alike; the table shows image size, the median
# build time and the median peak memory (GNU time's %e and %M). Then two checks: --level 3
# against --level 19 (the target is >= 10x faster) and --threads 1 against the default
# (one thread per online CPU).
#
# Environment: REPEAT (3), BLOCKS ("1M 4M 32M 64M"), LEVELS ("3 9 19"), CODE_APART (1: also
# build every block size and level with --code-apart), OTHERS (1: also build with the
# other tools, 0: not, or some of "sqzstd sqxz erofs tarzst tarxz"), THREADS (1: also
# build with --threads 1), RAW (a file to keep every measurement in; --table summarises
# one, even of an unfinished run), ONLY (run only these build ids, e.g.
# "st:32M:19:nobcj sqxz", to finish a run that was cut short), STIPPLE_BUILD (default
# <repo>/build; mkstipple must already be built), MKSTIPPLE (the program itself, to run
# a copy under another name), TMPDIR.
# Needs: /usr/bin/time (time), mksquashfs (squashfs-tools), mkfs.erofs (erofs-utils),
# zstd, xz, tar.
set -eu

die() { echo "compress_table: $*" >&2; exit 1; }

# Builds job ID of TREE into OUT.
build() {
	id=$1 out=$2 tree=$3
	case $id in
	st:*)
		set -- $(echo "$id" | tr ':' ' ')
		args="--quiet --block-size $2 --level $3"
		[ "$4" = nobcj ] && args="$args --no-bcj"
		[ "${5:-}" = t1 ] && args="$args --threads 1"
		[ "${5:-}" = ca ] && args="$args --code-apart"
		"$mkstipple" $args "$tree" "$out" ;;
	sqzstd) mksquashfs "$tree" "$out" -comp zstd -Xcompression-level 19 -b 1M \
			-noappend -no-progress -quiet ;;
	sqxz) mksquashfs "$tree" "$out" -comp xz -b 1M -Xbcj x86 -noappend -no-progress -quiet ;;
	erofs) mkfs.erofs -zlz4hc -d0 "$out" "$tree" ;;
	tarzst) tar -C "$tree" -cf - . | zstd -q -19 --long=27 -T1 -o "$out" ;;
	tarxz) tar -C "$tree" -cf - . | xz -9e -T1 >"$out" ;;
	*) die "unknown build $id" ;;
	esac
}

# One build, run under GNU time by measure below.
if [ "${1:-}" = --build-one ]; then
	mkstipple=$2
	build "$3" "$4" "$5"
	exit
fi

table_only=
if [ "${1:-}" = --table ]; then
	table_only=${2:?usage: compress_table.sh --table RAW [TREE]}
	shift 2
fi

repo=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${STIPPLE_BUILD:-$repo/build}
builddir=$(cd "$builddir" 2>/dev/null && pwd || echo "$builddir")
mkstipple=${MKSTIPPLE:-$builddir/builder/mkstipple}
tree=${1:-$(/usr/bin/python3 -c "import sysconfig; print(sysconfig.get_path('stdlib'))")}
repeat=${REPEAT:-3}
blocks=${BLOCKS:-1M 4M 32M 64M}
levels=${LEVELS:-3 9 19}
others=${OTHERS:-1}
[ "$others" = 1 ] && others="sqzstd sqxz erofs tarzst tarxz"
[ "$others" = 0 ] && others=
threads=${THREADS:-1}

[ -d "$tree" ] || die "$tree: not a directory"
[ -n "$table_only" ] || [ -x "$mkstipple" ] || die "$mkstipple: not built (ninja -C $builddir)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing (apt-get install time)"
if [ -n "$others" ] && [ -z "$table_only" ]; then
	for tool in mksquashfs mkfs.erofs zstd xz tar; do
		command -v $tool >/dev/null || die "$tool missing"
	done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/stipple-table.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
raw=${RAW:-$work/raw}
: >"$raw"

# The builds: one line each, "ID<TAB>LABEL". Ids say how to build (see build below).
jobs=$work/jobs
: >"$jobs"
for b in $blocks; do
	for l in $levels; do
		printf 'st:%s:%s:bcj\tmkstipple %s level %s\n' "$b" "$l" "$b" "$l" >>"$jobs"
		printf 'st:%s:%s:nobcj\tmkstipple %s level %s --no-bcj\n' "$b" "$l" "$b" "$l" >>"$jobs"
	done
done
# --code-apart beside each default-filter build
[ "${CODE_APART:-0}" = 1 ] && for b in $blocks; do
	for l in $levels; do
		printf 'st:%s:%s:bcj:ca\tmkstipple %s level %s --code-apart\n' "$b" "$l" "$b" "$l"
	done
done >>"$jobs"
# --threads 1 against the default, where there are many blocks and where there are few
[ "$threads" = 1 ] && for b in 1M 32M; do
	printf 'st:%s:19:bcj:t1\tmkstipple %s level 19 --threads 1\n' "$b" "$b" >>"$jobs"
done
for other in $others; do
	case $other in
	sqzstd) printf 'sqzstd\tmksquashfs zstd-19 1M\n' ;;
	sqxz) printf 'sqxz\tmksquashfs xz 1M -Xbcj x86\n' ;;
	erofs) printf 'erofs\tmkfs.erofs -zlz4hc\n' ;;
	tarzst) printf 'tarzst\ttar | zstd -19 --long=27\n' ;;
	tarxz) printf 'tarxz\ttar | xz -9e\n' ;;
	*) die "OTHERS: unknown build $other" ;;
	esac >>"$jobs"
done

if [ -n "${ONLY:-}" ]; then
	for id in $ONLY; do
		grep "^$id	" "$jobs" || die "ONLY: no build $id"
	done >"$jobs.only"
	mv "$jobs.only" "$jobs"
fi

# Runs build ID once under GNU time; appends "ID SIZE SECONDS KBYTES" to $raw.
measure() {
	rm -f "$work/out"
	if ! /usr/bin/time -f '%e %M' -o "$work/time" sh "$0" --build-one "$mkstipple" "$1" \
		"$work/out" "$tree" >"$work/log" 2>&1; then
		cat "$work/log" >&2
		die "build $1 failed"
	fi
	echo "$1 $(stat -c %s "$work/out") $(cat "$work/time")" >>"$raw"
}

input=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
files=$(find "$tree" -type f | wc -l)
if [ -n "$table_only" ]; then
	raw=$table_only
	echo "tree: $tree ($input bytes in $files files); measurements from $raw"
else
echo "tree: $tree ($input bytes in $files files), $(nproc) online CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$repeat rounds of $(wc -l <"$jobs") builds; medians of time and peak memory"
for round in $(seq 1 "$repeat"); do
	while IFS="$(printf '\t')" read -r id label; do
		measure "$id"
		[ -t 2 ] && printf '\rround %s/%s: %-40s' "$round" "$repeat" "$label" >&2
	done <"$jobs"
done
[ -t 2 ] && printf '\r%60s\r' '' >&2
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
echo

awk -v input="$input" -v nproc="$(nproc)" -F '\t' '
function median(list,    v, n, i, j, t) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
FNR == NR { order[++njobs] = $1; label[$1] = $2; next }
{
	split($0, f, " ")
	id = f[1]
	if (!(id in label)) next
	if (id in size && size[id] != f[2]) varies[id] = 1
	size[id] = f[2]; secs[id] = secs[id] " " f[3]; kb[id] = kb[id] " " f[4]
}
END {
	for (i = 1; i <= njobs; i++) {
		id = order[i]
		if (!(id in size)) { delete label[id]; continue }
		t[id] = median(secs[id]); m[id] = median(kb[id]); runs[id] = split(secs[id], v, " ")
	}
	ref = ("tarzst" in size) ? size["tarzst"] : 0
	fmt = "%-32s %13s %7s %8s %9s %9s %4s\n"
	printf fmt, "build", "image bytes", "% tree", "x tarzst", "time s", "peak MiB", "runs"
	for (i = 1; i <= njobs; i++) {
		id = order[i]
		if (!(id in label)) continue
		printf fmt, label[id], size[id] (id in varies ? "*" : ""),
			sprintf("%.2f", 100 * size[id] / input),
			ref ? sprintf("%.3f", size[id] / ref) : "-", sprintf("%.2f", t[id]),
			sprintf("%.0f", m[id] / 1024), runs[id]
	}
	for (id in varies) { print "* the image size varied between runs (did the tree change?): the last run is shown"; break }
	print ""
	print "--level 3 against --level 19 (build time, target >= 10x):"
	for (i = 1; i <= njobs; i++) {
		id = order[i]
		if (split(id, p, ":") != 4 || p[1] != "st" || p[3] != 19 || !(id in t)) continue
		fast = "st:" p[2] ":3:" p[4]
		if (!(fast in t)) continue
		r = t[fast] > 0 ? t[id] / t[fast] : 0
		printf "  %-5s %-6s level 19 %7.2f s, level 3 %6.2f s: %6.1fx %s\n", p[2], p[4],
			t[id], t[fast], r, (r >= 10 ? "ok" : "BELOW 10x")
	}
	print ""
	printf "--threads 1 against the default (%d threads):\n", nproc
	for (i = 1; i <= njobs; i++) {
		id = order[i]
		if (id !~ /:t1$/ || !(id in t)) continue
		all = substr(id, 1, length(id) - 3)
		if (!(all in t)) continue
		printf "  %-5s level 19: 1 thread %7.2f s, %d threads %7.2f s: %.2fx faster, peak %s -> %s MiB\n",
			substr(all, 4, index(substr(all, 4), ":") - 1), t[id], nproc, t[all],
			(t[all] > 0 ? t[id] / t[all] : 0), sprintf("%.0f", m[id] / 1024), sprintf("%.0f", m[all] / 1024)
	}
}' "$jobs" "$raw"
