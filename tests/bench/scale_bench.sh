#!/bin/sh
# SPDX-License-Identifier: MIT
# Growth benchmark (run by hand on a quiet machine, not part of the test suite):
#
#   SIZES="100000 1000000 4000000" WORK=/var/tmp/scale-bench tests/bench/scale_bench.sh
#
# For each size N (files) of the scale tree (tests/bench/trees/scale.py: folders of 1,000
# small text files), builds and mounts it with each tool present and measures:
#   build s, build MB   wall time and peak memory of the build (GNU time)
#   image MB            the image file
#   mount ms            from starting the mount command until it has returned and the
#                       mount is live (in /proc/self/mountinfo)
#   find s              `find MNT >/dev/null` on that fresh mount, caches dropped after
#                       the mount is live (sync; echo 3 > /proc/sys/vm/drop_caches)
#   daemon MB           the FUSE server's peak and current resident memory after find
#                       (VmHWM/VmRSS; a server of several processes: their sum)
# Tools: stipple (mkstipple $STIPPLE_ARGS, stipple mount), squashfs (mksquashfs -comp zstd
# $SQUASH_ARGS, squashfuse_ll), and DwarFS (/opt/dwarfs/bin/mkdwarfs, dwarfs) when
# installed. Then prints the table and, for each measure, the ratio from one size to the
# next (1.0: does not grow; 10.0 for a 10x step: grows linearly).
#
# Settings (environment): SIZES (default 100000), WORK (default /var/tmp/scale-bench: the
# trees, kept for later runs, and the images, removed unless KEEP=1), NICE (default 10:
# every build and walk runs at this niceness, the same for all tools), STIPPLE_ARGS
# (default: none, the defaults of mkstipple), SQUASH_ARGS (default
# "-Xcompression-level 19 -b 1M"), DWARFS_ARGS (default: none), TOOLS (default
# "stipple squashfs dwarfs"). Needs root (mounting, drop_caches), GNU time, python3, and
# $STIPPLE_BUILD (default <repo>/build) built. A 4 M-file tree takes about 16 GB of disk
# and long to write; the builds of it take long too.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${STIPPLE_BUILD:-$repo/build}
sizes=${SIZES:-100000}
work=${WORK:-/var/tmp/scale-bench}
nice_n=${NICE:-10}
stipple_args=${STIPPLE_ARGS:-}
squash_args=${SQUASH_ARGS:--Xcompression-level 19 -b 1M}
dwarfs_args=${DWARFS_ARGS:-}
tools=${TOOLS:-stipple squashfs dwarfs}
dwarfs_bin=${DWARFS_BIN:-/opt/dwarfs/bin}

die() { echo "scale_bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mounting, drop_caches)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing (apt-get install time)"
[ -x "$build/builder/mkstipple" ] || die "$build/builder/mkstipple: not built"

have() {
	case $1 in
	stipple) true ;;
	squashfs) command -v mksquashfs >/dev/null && command -v squashfuse_ll >/dev/null ;;
	dwarfs) [ -x "$dwarfs_bin/mkdwarfs" ] && [ -x "$dwarfs_bin/dwarfs" ] ;;
	*) die "unknown tool $1" ;;
	esac
}

mkdir -p "$work"
mnt=$(mktemp -d "$work/mnt.XXXXXX")
results=$work/results.$$
: >"$results"
cleanup() {
	if mountpoint -q "$mnt"; then umount "$mnt" 2>/dev/null || umount -l "$mnt"; fi
	rmdir "$mnt" 2>/dev/null || true
	rm -f "$results" "$work/time.$$"
}
trap cleanup EXIT INT TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Runs "$@" niced under GNU time; sets b_secs, b_mb.
measure_build() {
	nice -n "$nice_n" /usr/bin/time -f '%e %M' -o "$work/time.$$" "$@" >"$work/build.log" 2>&1 ||
		{ tail -20 "$work/build.log" >&2; die "failed: $*"; }
	read -r b_secs b_kb <"$work/time.$$"
	b_mb=$((b_kb / 1024))
}

# Pids of processes whose command line names the mount point.
server_pids() {
	for d in /proc/[0-9]*; do
		{ tr '\0' '\n' <"$d/cmdline"; } 2>/dev/null | grep -qxF "$mnt" && echo "${d#/proc/}"
	done
	true
}

# Sum of FIELD (VmHWM or VmRSS) over the server's processes, in MB.
server_mem() {
	total=0
	for p in $(server_pids); do
		kb=$(awk -v f="$1:" '$1 == f { print $2 }' "/proc/$p/status" 2>/dev/null)
		total=$((total + ${kb:-0}))
	done
	echo $((total / 1024))
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# Mounts IMAGE with TOOL, times the mount, find and memory; sets m_ms, f_secs, hwm, rss.
measure_mount() {
	tool=$1 image=$2
	t0=$(now_ms)
	case $tool in
	stipple) "$build/mounthelper/stipple" mount "$image" "$mnt" 2>/dev/null ;;
	squashfs) squashfuse_ll "$image" "$mnt" ;;
	dwarfs) "$dwarfs_bin/dwarfs" "$image" "$mnt" >/dev/null 2>&1 ;;
	esac
	while ! mountpoint -q "$mnt"; do sleep 0.001; done
	m_ms=$(($(now_ms) - t0))
	drop_caches
	t0=$(now_ms)
	nice -n "$nice_n" find "$mnt" >/dev/null
	f_ms=$(($(now_ms) - t0))
	f_secs=$(awk -v m="$f_ms" 'BEGIN { printf "%.2f", m / 1000 }')
	hwm=$(server_mem VmHWM)
	rss=$(server_mem VmRSS)
	umount "$mnt"
	while mountpoint -q "$mnt"; do sleep 0.01; done
}

for n in $sizes; do
	tree=$work/tree-$n
	if [ ! -d "$tree" ]; then
		echo "scale_bench: writing the $n-file tree to $tree" >&2
		nice -n "$nice_n" python3 "$repo/tests/bench/trees/scale.py" "$n" "$tree.part"
		mv "$tree.part" "$tree"
	fi
	for tool in $tools; do
		have "$tool" || { echo "scale_bench: $tool not installed, skipped" >&2; continue; }
		echo "scale_bench: $tool, $n files" >&2
		case $tool in
		stipple)
			image=$work/scale-$n.stp
			# shellcheck disable=SC2086
			measure_build "$build/builder/mkstipple" -q $stipple_args "$tree" "$image" ;;
		squashfs)
			image=$work/scale-$n.sqfs
			rm -f "$image"
			# shellcheck disable=SC2086
			measure_build mksquashfs "$tree" "$image" -comp zstd $squash_args -noappend -no-progress ;;
		dwarfs)
			image=$work/scale-$n.dwarfs
			rm -f "$image"
			# shellcheck disable=SC2086
			measure_build "$dwarfs_bin/mkdwarfs" -i "$tree" -o "$image" $dwarfs_args ;;
		esac
		size_mb=$(awk -v s="$(stat -c %s "$image")" 'BEGIN { printf "%.1f", s / 1048576 }')
		drop_caches
		measure_mount "$tool" "$image"
		echo "$tool $n $b_secs $b_mb $size_mb $m_ms $f_secs $hwm $rss" >>"$results"
		[ "${KEEP:-0}" = 1 ] || rm -f "$image"
	done
done

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at the end; niceness $nice_n"
printf '%-9s %9s %9s %9s %9s %9s %8s %10s %10s\n' tool files "build s" "build MB" "image MB" \
	"mount ms" "find s" "daemon MB" "(now MB)"
sort -k1,1 -k2,2n "$results" | while read -r tool n bs bm im mm fs hwm rss; do
	printf '%-9s %9s %9s %9s %9s %9s %8s %10s %10s\n' "$tool" "$n" "$bs" "$bm" "$im" "$mm" "$fs" \
		"$hwm" "$rss"
done
echo
echo "growth per size step (value at the larger size / value at the smaller):"
sort -k1,1 -k2,2n "$results" | awk '
	$1 == tool {
		steps++
		printf "%-9s %8s -> %-8s x%-6.1f build s %-6s build MB %-6s image %-6s mount %-6s find %-6s daemon %s\n",
			tool, n, $2, $2 / n, r($3, bs), r($4, bm), r($5, im), r($6, mm), r($7, fs), r($8, hwm)
	}
	{ tool = $1; n = $2; bs = $3; bm = $4; im = $5; mm = $6; fs = $7; hwm = $8 }
	END { if (!steps) print "  none: one size only (SIZES=\"100000 1000000 4000000\" for all three)" }
	function r(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }'
