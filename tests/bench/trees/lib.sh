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
	$2 == "lookup" { next }
	$2 == "" { f = tree "/" $1; "stat -c %s \"" f "\"" | getline n; close("stat -c %s \"" f "\""); s += n; next }
	{ n = split($2, r, ","); for (i = 1; i <= n; i++) { split(r[i], e, "-"); s += e[2] - e[1] } }
	END { printf "%.0f\n", s }' "$2"
}

# A small C file that includes the C library's headers: what the compiler recipes compile.
write_hello_c() { # FILE
	cat >"$1" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct word { const char *s; size_t n; };

static int cmp(const void *a, const void *b)
{
	const struct word *x = a, *y = b;
	return strcmp(x->s, y->s);
}

int main(int argc, char **argv)
{
	struct word *w = calloc((size_t)argc, sizeof(*w));
	for (int i = 0; i < argc; i++)
		w[i] = (struct word){ argv[i], strlen(argv[i]) };
	qsort(w, (size_t)argc, sizeof(*w), cmp);
	for (int i = 0; i < argc; i++)
		printf("%zu %s\n", w[i].n, w[i].s);
	free(w);
	return 0;
}
C
}

# Compiles DIR/src/hello.c with DIR/bin/CC and the libraries in DIR/native into a scratch
# object; fails unless the compiler exits 0 and leaves an ELF object (bash builtins only,
# so that the check adds no process to the timed launch).
cc_run() { # DIR CC [EXTRA...]
	local d=$1 cc=$2 o rc magic=
	shift 2
	o=$(mktemp /tmp/launch-cc.XXXXXX.o)
	LD_LIBRARY_PATH="$d/native" "$d/bin/$cc" "$@" -O2 -c "$d/src/hello.c" -o "$o"
	rc=$?
	[ $rc -ne 0 ] || { IFS= read -r -n4 magic <"$o" || true; }
	rm -f "$o"
	[ $rc -eq 0 ] && [ "$magic" = $'\x7fELF' ]
}

# A hello world in Java with a few collections and a string format: what the JVM recipes
# run; HELLO_JAVA_OUT is what it prints.
HELLO_JAVA_OUT="brown=1, dog=1, fox=1, jumps=1, lazy=1, over=1, quick=1, the=2"
write_hello_java() { # FILE
	cat >"$1" <<'J'
import java.util.*;
import java.util.stream.*;

public class Hello {
    public static void main(String[] args) {
        Map<String, Integer> m = new TreeMap<>();
        for (String w : "the quick brown fox jumps over the lazy dog".split(" "))
            m.merge(w, 1, Integer::sum);
        System.out.println(m.entrySet().stream()
            .map(e -> String.format("%s=%d", e.getKey(), e.getValue()))
            .collect(Collectors.joining(", ")));
    }
}
J
}
