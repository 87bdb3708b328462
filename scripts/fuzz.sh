#!/usr/bin/env bash
# Fuzzes every libFuzzer target of a build made with clang and -DDEJAVIEW_FUZZERS=ON for a
# bounded time each, as many at once as there are cores, starting from the seeds in
# tests/fuzz/corpus/NAME (copied: the repository's corpus does not grow). Prints one line per
# target (executions, seconds, corpus size); a crash, leak, timeout or out-of-memory fails the
# run and its input is kept under BUILD/fuzz-out/NAME/ for replay (`BUILD/tests/fuzz/NAME FILE`).
#   usage: scripts/fuzz.sh BUILD_DIR [SECONDS_PER_TARGET=20]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS]}
seconds=${2:-20}
out="$build/fuzz-out"
rm -rf "$out"
mkdir -p "$out"

fuzz_one() {
  local bin=$1 seconds=$2 out=$3 name dir
  name=$(basename "$bin")
  dir="$out/$name"
  mkdir -p "$dir/corpus"
  cp tests/fuzz/corpus/"$name"/* "$dir/corpus/" 2>/dev/null || true
  # 2 GiB of RSS and of any single allocation: "never allocates without bound" is checked too.
  if "$bin" "$dir/corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$dir/" -print_final_stats=1 >"$dir/log" 2>&1; then
    local runs
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    printf '%-22s ok    %10s execs %4s s  corpus %s\n' "$name" "${runs:-?}" "$seconds" \
      "$(find "$dir/corpus" -type f | wc -l)"
  else
    printf '%-22s FAILED (log: %s)\n' "$name" "$dir/log"
    grep -E 'ERROR|SUMMARY|Test unit written' "$dir/log" | head -n 5
    return 1
  fi
}
export -f fuzz_one

targets=$(find "$build/tests/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | sort)
[ -n "$targets" ] || { echo "fuzz.sh: no fuzz_* targets in $build/tests/fuzz"; exit 1; }
echo "$targets" | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one "$@"' _ {} "$seconds" "$out"
