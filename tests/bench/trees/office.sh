# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): LibreOffice 7.4 Writer, headless, relocated:
# /usr/lib/libreoffice with its links into /usr/share and /etc followed (program: the
# UNO libraries, Writer, the PDF export; share: the registry, the configuration, fonts'
# metrics), and every library they link but the C library (ICU, Boost, libxml2, NSS,
# ...) in DEST/native. About 300 MiB.
# Packages: libreoffice-writer-nogui (apt-get install --no-install-recommends).
# Launch: soffice --headless --convert-to pdf of a short text document, with a user
# profile of its own per tree (made at its first launch, kept as a user's is); the PDF
# must be there and start with %PDF.

tree_describe() { echo "LibreOffice 7.4 Writer (soffice --headless --convert-to pdf)"; }

tree_ready() { [ -x "$1/lib/libreoffice/program/soffice.bin" ] && [ -f "$1/doc/letter.txt" ]; }

tree_assemble() {
	local d=$1 sos
	[ -x /usr/lib/libreoffice/program/soffice.bin ] ||
		apt-get install -y -qq --no-install-recommends libreoffice-writer-nogui >/dev/null
	rm -rf "$d"
	mkdir -p "$d/lib" "$d/doc"
	cp -rL /usr/lib/libreoffice "$d/lib/"
	# Debian's fundamentalrc names /usr/lib/libreoffice and /etc/libreoffice: point it
	# at the tree itself, as upstream's does
	sed -i -e 's|file:///usr/lib/libreoffice|${ORIGIN}/..|' \
		-e 's|file:///etc/libreoffice/registry|${BRAND_BASE_DIR}/share/registry|g' \
		"$d/lib/libreoffice/program/fundamentalrc"
	mapfile -t sos < <(find "$d/lib/libreoffice/program" -name '*.so*' -o -name '*.bin')
	copy_libs "$d/native" "${sos[@]}"
	# LibreOffice's own libraries stay in program/: they find unorc and the rest at $ORIGIN
	for f in "$d"/native/*; do [ ! -e "$d/lib/libreoffice/program/${f##*/}" ] || rm "$f"; done
	{
		echo "A short letter"
		echo
		for i in $(seq 40); do echo "Line $i of a letter converted to PDF at every launch."; done
	} >"$d/doc/letter.txt"
	office_run "$d" || { echo "tree recipe: soffice failed in $d" >&2; return 1; }
	# nothing of the system's LibreOffice may be opened (strace, as the loader reads its
	# paths from rc files and not from the command line)
	local log
	log=$(mktemp /tmp/launch-office.XXXXXX.strace)
	OFFICE_WRAP="strace -f -e trace=openat -o $log" office_run "$d"
	if grep -E '"(/usr/lib/libreoffice|/usr/share/libreoffice|/etc/libreoffice/registry)[^"]*".*= [0-9]' "$log"; then
		echo "tree recipe: soffice in $d opened the system's LibreOffice" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

office_run() { # DIR: converts DIR/doc/letter.txt into a scratch folder; checks the PDF
	local d=$1 out magic= rc
	out=$(mktemp -d /tmp/launch-office.XXXXXX)
	# one profile per tree path, as one user's: its first launch makes it
	LD_LIBRARY_PATH=$d/native ${OFFICE_WRAP:-} "$d/lib/libreoffice/program/soffice" --headless --norestore \
		"-env:UserInstallation=file:///tmp/launch-office-profile${d//\//_}" \
		--convert-to pdf --outdir "$out" "$d/doc/letter.txt" >/dev/null 2>&1
	rc=$?
	[ $rc -ne 0 ] || { IFS= read -r -n4 magic <"$out/letter.pdf" || true; }
	rm -rf "$out"
	[ $rc -eq 0 ] && [ "$magic" = %PDF ]
}

tree_launch() { office_run "$1"; }
