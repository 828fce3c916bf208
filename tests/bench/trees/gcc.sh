# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): GCC 12's C compiler, relocated: the driver,
# /usr/lib/gcc/x86_64-linux-gnu/12 (cc1 and the other compilers, crt files, plugins),
# the assembler (beside cc1), and the libraries they link, in DEST/native. About 240 MiB.
# Packages: gcc-12 binutils. The C headers still come from /usr/include.
# Launch: DEST/bin/gcc -O2 -c DEST/src/hello.c (cc1 and as from the tree).

tree_describe() { echo "GCC 12 (gcc -O2 -c a small C file)"; }

tree_ready() { [ -x "$1/bin/gcc" ] && [ -x "$1/lib/gcc/x86_64-linux-gnu/12/cc1" ]; }

tree_assemble() {
	local d=$1 v
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/lib/gcc/x86_64-linux-gnu" "$d/src"
	cp /usr/bin/x86_64-linux-gnu-gcc-12 "$d/bin/gcc"
	cp -r /usr/lib/gcc/x86_64-linux-gnu/12 "$d/lib/gcc/x86_64-linux-gnu/"
	# in the driver's own program directory, which it searches before PATH
	cp /usr/bin/x86_64-linux-gnu-as "$d/lib/gcc/x86_64-linux-gnu/12/as"
	copy_libs "$d/native" "$d/bin/gcc" "$d/lib/gcc/x86_64-linux-gnu/12/as" \
		"$d/lib/gcc/x86_64-linux-gnu/12/cc1"
	write_hello_c "$d/src/hello.c"
	v=$(cc_run "$d" gcc -v 2>&1)
	expect_in_tree "$d" cc1 "$(echo "$v" | grep -m1 '/cc1 ')"
	expect_in_tree "$d" as "$(echo "$v" | grep -m1 -E '(^| )[^ ]*/as ')"
}

tree_launch() { cc_run "$1" gcc >/dev/null 2>&1; }
