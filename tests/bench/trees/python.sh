# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): Python 3.11 with NumPy, self-contained: the
# interpreter, the standard library, NumPy from dist-packages, and every library they link
# (BLAS, LAPACK, gfortran, ...) but the C library, in DEST/native.
# Packages: python3.11 python3-numpy (apt-get install -y python3-numpy).
# Launch: PYTHONHOME=DEST DEST/bin/python3.11 -s -c "import numpy, email, json".

tree_describe() { echo "Python 3.11 + NumPy (import numpy, email, json)"; }

tree_ready() { [ -x "$1/bin/python3.11" ] && [ -d "$1/lib/python3/dist-packages/numpy" ]; }

tree_assemble() {
	local d=$1 sos
	[ -d /usr/lib/python3/dist-packages/numpy ] || apt-get install -y -qq python3-numpy >/dev/null
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/lib/python3/dist-packages"
	cp /usr/bin/python3.11 "$d/bin/"
	cp -r /usr/lib/python3.11 "$d/lib/"
	cp -r /usr/lib/python3/dist-packages/numpy "$d/lib/python3/dist-packages/"
	mapfile -t sos < <(find "$d/lib" -name '*.so')
	copy_libs "$d/native" "$d/bin/python3.11" "${sos[@]}"
	expect_in_tree "$d" numpy "$(PYTHONHOME=$d LD_LIBRARY_PATH=$d/native "$d/bin/python3.11" -s -c \
		'import numpy; print(numpy.__file__); print(open("/proc/self/maps").read())' |
		grep -E 'numpy/__init__|blas' | tr '\n' ' ')"
}

tree_launch() {
	PYTHONHOME=$1 LD_LIBRARY_PATH=$1/native "$1/bin/python3.11" -s \
		-c "import numpy, email, json" >/dev/null 2>&1
}
