#!/usr/bin/env bash
# Reproduces BENCHMARK.md's scaling and sensor tables: builds Release, then
#   1. maps of 1, 2, 4 and 8 whole simulated days of one route (9 days simulated once into
#      out/days9), always the same day coded (day_08) against the K days before it
#      (`dejaview bench multiday --map-days K` on out/days9-last-K, whose day_00.. day_K-1 link
#      to days 8-K .. 7 and day_K to day_08), dejaview at T = 0.15 and 0.3 m -> out/bench/days/K/;
#   2. the simulator's 128-beam preset (os128, 3 days into out/days3-os128; map from two days,
#      the third coded) and the real Ouster OS-1-128 frames of ../shared/data/ouster
#      (pseudo-revisit: map from frames 0 and 2, frame 1 coded), dejaview and Draco
#      -> out/bench/os128/, out/bench/ouster/.
# DEJAVIEW_DAY_FRAMES frames of each coded day (default 8).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${DEJAVIEW_BENCH_OUT:-out/bench}
FRAMES=${DEJAVIEW_DAY_FRAMES:-8}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target dejaview
DV=build/tools/dejaview
if [ ! -d out/days9/day_08 ]; then
  $DV simulate --out out/days9 --days 9 --frames 150 --seed 11 --quiet
fi
mkdir -p "$OUT/days"
for k in 1 2 4 8; do
  days="out/days9-last-$k"
  rm -rf "$days"
  mkdir -p "$days"
  for i in $(seq 0 $((k - 1))); do
    ln -s "$PWD/out/days9/$(printf day_%02d $((8 - k + i)))" "$days/$(printf day_%02d "$i")"
  done
  ln -s "$PWD/out/days9/day_08" "$days/$(printf day_%02d "$k")"
  rm -rf "$OUT/days/$k"
  $DV bench multiday "$days" --map-days "$k" --frames "$FRAMES" --codecs dejaview \
    --knobs 0.15,0.3 --out "$OUT/days/$k" | tee "$OUT/days/$k.md"
done
if [ ! -d out/days3-os128/day_02 ]; then
  $DV simulate --out out/days3-os128 --days 3 --frames 40 --seed 11 --preset os128 --quiet
fi
rm -rf "$OUT/os128" "$OUT/ouster"
mkdir -p "$OUT"
$DV bench multiday out/days3-os128 --map-days 2 --frames "$FRAMES" --codecs dejaview,draco \
  --out "$OUT/os128" | tee "$OUT/os128.md"
$DV bench revisit ../shared/data/ouster/os1-128-3frames --codecs dejaview,draco \
  --out "$OUT/ouster" | tee "$OUT/ouster.md"
