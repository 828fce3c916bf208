# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): Ruby 3.1 with RubyGems, relocated: the
# interpreter, its library (lib/ruby: the standard library, vendor_ruby, the bundled gems),
# its compiled extensions (lib/x86_64-linux-gnu/ruby), and the libraries they link
# (libruby, OpenSSL, libyaml, ...) in DEST/native. About 70 MiB.
# Packages: ruby (ruby3.1, libruby3.1, rubygems-integration).
# Launch: ruby, with RubyGems, loads YAML, JSON, OpenSSL and ERB, parses a YAML document,
# renders it through a template and prints its digest, which must match.

tree_describe() { echo "Ruby 3.1 (yaml, json, openssl, erb; a template)"; }

tree_ready() { [ -x "$1/bin/ruby" ] && [ -d "$1/lib/ruby/3.1.0" ]; }

ruby_script='require "yaml"; require "json"; require "openssl"; require "erb"; require "set"
doc = YAML.safe_load("words: [the, quick, brown, fox, jumps, over, the, lazy, dog]\n")
words = Set.new(doc["words"]).sort
text = ERB.new("<%= JSON.generate(words) %> <%= words.size %>\n").result(binding)
puts OpenSSL::Digest::SHA256.hexdigest(text)'
ruby_digest=$(printf '%s' '["brown","dog","fox","jumps","lazy","over","quick","the"] 8
' | sha256sum | cut -d' ' -f1)

ruby_run() { # DIR [ARGS...]: the tree's ruby, its own library ahead of the built-in paths
	local d=$1 a=lib/x86_64-linux-gnu/ruby
	shift
	RUBYLIB=$d/lib/ruby/vendor_ruby:$d/lib/ruby/3.1.0:$d/$a/3.1.0 LD_LIBRARY_PATH=$d/native \
		GEM_PATH=$d/lib/ruby/gems/3.1.0 "$d/bin/ruby" "$@"
}

tree_assemble() {
	local d=$1 sos
	[ -x /usr/bin/ruby3.1 ] || apt-get install -y -qq ruby >/dev/null
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/lib/x86_64-linux-gnu"
	cp /usr/bin/ruby3.1 "$d/bin/ruby"
	# links are followed; the rdoc template's fonts point at a package not installed
	cp -rL /usr/lib/ruby "$d/lib/" 2>/dev/null || true
	cp -rL /usr/lib/x86_64-linux-gnu/ruby "$d/lib/x86_64-linux-gnu/"
	mapfile -t sos < <(find "$d/lib" -name '*.so')
	copy_libs "$d/native" "$d/bin/ruby" "${sos[@]}"
	# every file the launch loads must come from the tree, not the system's copy
	local outside
	# (features built into the interpreter, such as enumerator.so, have no path)
	outside=$(ruby_run "$d" -e "$ruby_script"'
		puts ($LOADED_FEATURES.grep(%r{/}).grep_v(%r{^'"$d"'/}) + File.read("/proc/self/maps").scan(%r{ (/\S+\.so[.0-9]*)$}).flatten.uniq.grep(/ruby|ssl|crypto|yaml/).grep_v(%r{^'"$d"'/}))' | tail -n +2)
	[ -z "$outside" ] || { echo "tree recipe: ruby loaded from outside $d: $outside" >&2; return 1; }
}

tree_launch() {
	local out
	out=$(ruby_run "$1" -e "$ruby_script" 2>/dev/null) || return 1
	[ "$out" = "$ruby_digest" ]
}
