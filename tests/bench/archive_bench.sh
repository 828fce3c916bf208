#!/bin/sh
# SPDX-License-Identifier: MIT
# Archive-input benchmark (run by hand, not part of the test suite):
#
#   tests/bench/archive_bench.sh [TREE [ROUNDS [MKSTIPPLE_ARGS...]]]
#
# TREE (default Python's standard library; the issue's tree is ../shared/corpora/blender-tree.sh)
# is packed into a pax tar once. Then, ROUNDS times (default 2), interleaved in this order:
#
#   stipple dir      mkstipple TREE
#   stipple tar      mkstipple T.tar            (a seekable tar, read in place)
#   stipple stdin    mkstipple - < T.tar        (a stream, spooled beside the image)
#   stipple zst      zstd -dc T.tar.zst | mkstipple -
#   sqfstar          sqfstar (squashfs-tools), zstd at its default level (4.5.1 refuses
#                    -Xcompression-level), 1M blocks, from the tar on stdin
#   tar2sqfs         tar2sqfs (squashfs-tools-ng), zstd LEVEL, 1M blocks, tar on stdin
#   erofs tar        mkfs.erofs --tar=f, when this mkfs.erofs has it (erofs-utils >= 1.6)
#
# OTHERS=0 (environment) leaves the squashfs and erofs tools out. LEVEL (default 19) is
# the zstd level of every tool; squashfs uses 1 MiB blocks, mkstipple its default. It
# prints per variant the median build time, median peak RSS (GNU time's maximum resident
# set; for a pipe, the builder's alone) and the image size, with time and memory as
# ratios to the folder build. It also checks that the folder and the tar give
# byte-identical images. Needs: GNU time, tar, zstd; sqfstar, tar2sqfs and mkfs.erofs
# are skipped when absent. Uses $STIPPLE_BUILD (default <repo>/build).
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${STIPPLE_BUILD:-$repo/build}
mkstipple=$build/builder/mkstipple
tree=${1:-$(/usr/bin/python3 -c "import sysconfig; print(sysconfig.get_path('stdlib'))")}
level=${LEVEL:-19}
rounds=${2:-2}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift

die() { echo "archive_bench: $*" >&2; exit 1; }
[ -d "$tree" ] || die "$tree: not a directory"
[ -x "$mkstipple" ] || die "$mkstipple: not built (ninja -C $build)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing (apt-get install time)"
command -v zstd >/dev/null || die "zstd missing (apt-get install zstd)"

work=$(mktemp -d "${TMPDIR:-/var/tmp}/stipple-abench.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

tar --format=pax -C "$tree" -cf "$work/t.tar" .
zstd -q -T0 -9 "$work/t.tar" -o "$work/t.tar.zst"

# run NAME OUT INPUT CMD...: one timed build reading INPUT ("-": none; a .zst file:
# decompressed by zstd into the pipe) on standard input; appends "NAME secs kib bytes"
# to results. GNU time measures CMD alone.
run() {
	name=$1 out=$2 input=$3
	shift 3
	rm -f "$out"
	sync
	case $input in
	-) /usr/bin/time -f '%e %M' -o "$work/time" "$@" </dev/null ;;
	*.zst) zstd -dc "$input" | /usr/bin/time -f '%e %M' -o "$work/time" "$@" ;;
	*) /usr/bin/time -f '%e %M' -o "$work/time" "$@" <"$input" ;;
	esac >/dev/null 2>"$work/err" || { cat "$work/err" >&2; die "$name failed"; }
	set -- $(cat "$work/time")
	echo "$name $1 $2 $(stat -c %s "$out")" >>"$work/results"
}

erofs_tar=0
mkfs.erofs --help 2>&1 | grep -q -- '--tar' && erofs_tar=1

i=0
while [ $i -lt "$rounds" ]; do
	i=$((i + 1))
	run stipple-dir "$work/dir.stp" - "$mkstipple" -q -l "$level" "$@" "$tree" "$work/dir.stp"
	run stipple-tar "$work/tar.stp" - "$mkstipple" -q -l "$level" "$@" "$work/t.tar" "$work/tar.stp"
	run stipple-stdin "$work/in.stp" "$work/t.tar" "$mkstipple" -q -l "$level" "$@" - "$work/in.stp"
	run stipple-zst "$work/zst.stp" "$work/t.tar.zst" "$mkstipple" -q -l "$level" "$@" - \
		"$work/zst.stp"
	if [ "${OTHERS:-1}" = 1 ] && command -v sqfstar >/dev/null; then
		# squashfs-tools 4.5.1's sqfstar refuses -Xcompression-level: its default, 15
		run sqfstar-zstd15 "$work/s.sqfs" "$work/t.tar" sqfstar -quiet -comp zstd -b 1M \
			"$work/s.sqfs"
	fi
	if [ "${OTHERS:-1}" = 1 ] && command -v tar2sqfs >/dev/null; then
		run tar2sqfs "$work/t.sqfs" "$work/t.tar" tar2sqfs -q -f -c zstd -X level="$level" \
			-b 1048576 "$work/t.sqfs"
	fi
	if [ "${OTHERS:-1}" = 1 ] && [ $erofs_tar = 1 ]; then
		run erofs-tar "$work/e.erofs" - mkfs.erofs -zlz4hc --tar=f "$work/e.erofs" "$work/t.tar"
	fi
done

cmp -s "$work/dir.stp" "$work/tar.stp" && same_tar=yes || same_tar=NO
cmp -s "$work/dir.stp" "$work/in.stp" && same_in=yes || same_in=NO
echo "tree: $tree ($(du -sh "$tree" | cut -f1)), tar $(stat -c %s "$work/t.tar") bytes, zstd level $level, $rounds rounds"
echo "image from tar == image from folder: $same_tar; from stdin: $same_in"
[ $erofs_tar = 1 ] || echo "mkfs.erofs here has no --tar (erofs-utils $(dpkg-query -W -f "\${Version}" erofs-utils 2>/dev/null); --tar came in 1.6)"
python3 - "$work/results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, secs, kib, size = line.split()
    rows.setdefault(name, []).append((float(secs), int(kib), int(size)))
base = rows["stipple-dir"]
bt = statistics.median(r[0] for r in base)
bm = statistics.median(r[1] for r in base)
print(f"{'variant':14} {'time s':>8} {'x dir':>6} {'peak MiB':>9} {'x dir':>6} {'image bytes':>12}")
for name, rs in rows.items():
    t = statistics.median(r[0] for r in rs)
    m = statistics.median(r[1] for r in rs)
    print(f"{name:14} {t:8.2f} {t / bt:6.2f} {m / 1024:9.1f} {m / bm:6.2f} {rs[-1][2]:12}")
EOF
