# SPDX-License-Identifier: MIT
# Helpers for the tree recipes in this directory (sourced by launch_bench.sh).

# Copies into DEST every shared library FILES link (as ldd resolves them now), but the C
# library and the dynamic linker, which stay the system's.
copy_libs() { # DEST FILE...
	local dest=$1
	shift
	mkdir -p "$dest"
	for f in "$@"; do ldd "$f" 2>/dev/null || true; done | awk '/=> \// { print $3 }' |
		grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64)\.so' | sort -u |
		while read -r lib; do [ -e "$dest/${lib##*/}" ] || cp -L "$lib" "$dest/"; done
}

# Fails unless the launch maps files from the tree: it must not run the system's copy.
# Call with a command that prints /proc/self/maps of the launched program (or its paths).
expect_in_tree() { # TREE WHAT TEXT
	case $3 in
	*"$1"/*) ;;
	*) echo "tree recipe: $2 does not come from $1" >&2; return 1 ;;
	esac
}

# Bytes a hot list names: the sum of its ranges, a file listed without ranges at its size.
hot_list_bytes() { # TREE LIST
	awk -F'\t' -v tree="$1" '
	$2 == "" { f = tree "/" $1; "stat -c %s \"" f "\"" | getline n; close("stat -c %s \"" f "\""); s += n; next }
	{ n = split($2, r, ","); for (i = 1; i <= n; i++) { split(r[i], e, "-"); s += e[2] - e[1] } }
	END { printf "%.0f\n", s }' "$2"
}
