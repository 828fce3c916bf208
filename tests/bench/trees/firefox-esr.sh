# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): a firefox-esr release as Debian ships it,
# unpacked (about 300 MiB: libxul.so 184 MiB, omni.ja, browser/omni.ja;
# /work/releases/firefox-esr-*). The libraries it links (GTK 3, libvpx7, ...: the
# package's Depends) are the system's: apt-get install them first.
# Launch: firefox-esr --headless --screenshot of a one-line local page, with a profile
# of its own for each launch directory (made from a template the first time), so that
# its startup cache, which names the install path, stays valid from launch to launch.
. "$(dirname "${BASH_SOURCE[0]}")/release.sh"

ff_bin() { echo "$1/usr/lib/firefox-esr/firefox-esr"; }

tree_describe() { echo "firefox-esr release (headless screenshot of a local page)"; }

tree_ready() { [ -x "$(ff_bin "$1")" ] && [ -f "$(release_scratch)/firefox/page.html" ]; }

tree_assemble() {
	local d=$1 s
	s=$(release_scratch)/firefox
	[ -x "$(ff_bin "$d")" ] || release_missing "$d" || return 1
	mkdir -p "$s/template"
	echo '<!doctype html><title>t</title><p>stipple launch</p>' >"$s/page.html"
}

# a screenshot must come out (a PNG)
tree_launch() {
	local s prof magic=
	s=$(release_scratch)/firefox
	prof=$s/profile-$(echo "$1" | md5sum | cut -c1-12)
	[ -d "$prof" ] || cp -a "$s/template" "$prof"
	rm -f "$s/shot.png"
	timeout 120 "$(ff_bin "$1")" --headless --no-remote --profile "$prof" \
		--screenshot "$s/shot.png" "file://$s/page.html" >/dev/null 2>&1 || return 1
	IFS= read -r -n4 magic <"$s/shot.png" || true
	[ "$magic" = $'\x89PNG' ]
}
