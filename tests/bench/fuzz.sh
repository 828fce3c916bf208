#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one fuzz target under libFuzzer, AddressSanitizer and UBSan for a while:
#
#   tests/bench/fuzz.sh TARGET SECONDS        (TARGET: fuseops for tests/fuzz/fuzz_fuseops.c)
#
# Builds into build-fuzz/ (tests/fuzz/build.sh), copies tests/fuzz/corpus/TARGET into
# the work corpus build-fuzz/work/TARGET (new inputs go there, the committed corpus is
# left alone), runs a single worker, and prints executions, coverage and findings. Crash,
# leak, timeout and out-of-memory inputs land in build-fuzz/findings/TARGET/; minimize one
# (fuzz_TARGET -minimize_crash=1 FILE), fix the bug, and commit it into
# tests/fuzz/corpus/TARGET/ so that the replay test covers it.
#
# The run goes on after a finding (fork mode, one job) so that a campaign reports them
# all. Limits: one allocation over MALLOC_MB (256), RSS over RSS_MB (2048), an input
# taking over TIMEOUT seconds (10), inputs over MAX_LEN bytes (65536) are findings or cut.
set -eu

target=${1:?usage: fuzz.sh TARGET SECONDS}
seconds=${2:?usage: fuzz.sh TARGET SECONDS}
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_BUILD:-$repo/build-fuzz}
work=$out/work/$target
findings=$out/findings/$target
log=$out/$target.log

"$repo/tests/fuzz/build.sh" "$out" "$target"
mkdir -p "$work" "$findings"
if [ -d "$repo/tests/fuzz/corpus/$target" ]; then
	cp -n "$repo/tests/fuzz/corpus/$target"/* "$work/" 2>/dev/null || true
fi

# Findings do not end the run: fork mode with one job restarts the worker after each.
set +e
"$out/fuzz_$target" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
	-max_total_time="$seconds" -max_len="${MAX_LEN:-65536}" \
	-malloc_limit_mb="${MALLOC_MB:-256}" -rss_limit_mb="${RSS_MB:-2048}" \
	-timeout="${TIMEOUT:-10}" -artifact_prefix="$findings/" -print_final_stats=1 \
	"$work" >"$log" 2>&1
rc=$?
set -e

# Fork mode reports "#N: cov: C ft: F corp: ... exec/s: ... oom/timeout/crash: O/T/C";
# the last such line is the run's total.
last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1)
echo "target:     $target ($seconds s, exit $rc, log $log)"
echo "executions: $(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')"
echo "coverage:   $(echo "$last" | sed -n 's/.*\(cov: [0-9]*\) \(ft: [0-9]*\).*/\1 \2/p')"
echo "corpus:     $(ls "$work" | wc -l) inputs in $work"
echo "findings:   $(echo "$last" | sed -n 's/.*oom\/timeout\/crash: \([0-9\/]*\).*/oom\/timeout\/crash \1/p')"
ls "$findings" 2>/dev/null | sed 's/^/  /'
# the causes, most frequent first
grep -E "ERROR: libFuzzer|ERROR: AddressSanitizer|does not hold|runtime error:" "$log" |
	sort | uniq -c | sort -rn | head -n 20 | sed 's/^/  /'
