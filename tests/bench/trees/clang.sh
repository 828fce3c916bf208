# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): Clang 14, relocated: the clang binary, its
# resource folder (lib/clang/14.0.6: builtin headers, sanitizer runtimes) found beside it,
# and the libraries it links in DEST/native: libLLVM-14 (105 MiB), libclang-cpp (56 MiB),
# libz3, ICU... About 330 MiB. A short start-up that maps large libraries: the floor case.
# Packages: clang-14. The C headers still come from /usr/include.
# Launch: DEST/bin/clang -O2 -c DEST/src/hello.c (one process: the front end runs in the
# driver, the integrated assembler writes the object).

tree_describe() { echo "Clang 14 (clang -O2 -c a small C file)"; }

tree_ready() { [ -x "$1/bin/clang" ] && [ -f "$1/native/libLLVM-14.so.1" ]; }

tree_assemble() {
	local d=$1 llvm=/usr/lib/llvm-14 v
	[ -x $llvm/bin/clang ] || apt-get install -y -qq clang-14 >/dev/null
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/lib" "$d/src"
	cp $llvm/bin/clang "$d/bin/clang"
	cp -rL $llvm/lib/clang "$d/lib/"
	copy_libs "$d/native" "$d/bin/clang"
	write_hello_c "$d/src/hello.c"
	# the driver must find its resource folder in the tree, and the loader its libraries
	v=$(cc_run "$d" clang -v 2>&1)
	expect_in_tree "$d" "clang's resource folder" "$(echo "$v" | grep -m1 -- '-resource-dir')"
	expect_in_tree "$d" libLLVM "$(LD_LIBRARY_PATH=$d/native ldd "$d/bin/clang" | grep libLLVM)"
}

tree_launch() { cc_run "$1" clang >/dev/null 2>&1; }
