#!/usr/bin/env bash
# Reproduces BENCHMARK.md's pseudo-revisit tables: builds Release, then runs `dejaview bench
# revisit` on every sequence of the shared KITTI extract with every built-in codec (dejaview,
# when built, and every peer), writing tables, CSV, JSON and PNG plots to out/bench/.
# Extra arguments go to `dejaview bench revisit` (e.g. --frames 2, --codecs draco).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DEJAVIEW_KITTI:-../shared/data/kitti-odometry-mini}
OUT=${DEJAVIEW_BENCH_OUT:-out/bench}
start=$(date +%s)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# Two jobs at most: the machine is shared.
cmake --build build -j2 --target dejaview
built=$(date +%s)

seqs=()
for d in "$DATA"/*/; do
  if [ -d "$d/velodyne" ]; then seqs+=("${d%/}"); fi
done
if [ "${#seqs[@]}" -eq 0 ]; then
  echo "bench.sh: no sequence (DIR/velodyne) under $DATA" >&2
  exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT"
build/tools/dejaview bench revisit "${seqs[@]}" --out "$OUT" "$@" | tee "$OUT/stdout.md"
end=$(date +%s)
echo "bench.sh: build $((built - start)) s, bench $((end - built)) s, total $((end - start)) s;" \
  "results in $OUT/" >&2
