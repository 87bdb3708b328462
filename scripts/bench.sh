#!/usr/bin/env bash
# Reproduces BENCHMARK.md's compression tables: builds Release, then runs, with every built-in
# codec (dejaview and every peer) in the same run,
#   1. the real revisit first: `dejaview bench multiday` on 3 simulated days (simulated once into
#      out/days3), the map from the first two whole days, the third coded -> out/bench/multiday/;
#   2. the pseudo-revisit: `dejaview bench revisit` on every sequence of the shared KITTI extract
#      (map from the even frames, odd frames coded) -> out/bench/revisit/.
# Each writes tables, CSV, JSON and PNG plots. Extra arguments go to both benches (e.g.
# --codecs draco); the multi-day bench codes DEJAVIEW_DAY_FRAMES frames of the third day (8).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DEJAVIEW_KITTI:-../shared/data/kitti-odometry-mini}
DAYS=${DEJAVIEW_DAYS:-out/days3}
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
if [ ! -d "$DAYS/day_02" ]; then
  build/tools/dejaview simulate --out "$DAYS" --days 3 --frames 150 --seed 11
fi
rm -rf "$OUT"
mkdir -p "$OUT"
build/tools/dejaview bench multiday "$DAYS" --map-days 2 --frames "${DEJAVIEW_DAY_FRAMES:-8}" \
  --out "$OUT/multiday" "$@" | tee "$OUT/multiday.md"
build/tools/dejaview bench revisit "${seqs[@]}" --out "$OUT/revisit" "$@" | tee "$OUT/revisit.md"
end=$(date +%s)
echo "bench.sh: build $((built - start)) s, bench $((end - built)) s, total $((end - start)) s;" \
  "results in $OUT/" >&2
