#!/usr/bin/env bash
# Reproduces BENCHMARK.md's timing tables (speed, store tiers, ingest, agent under live load):
# builds Release like scripts/bench.sh, then runs each timing program and prints its table.
# Everything goes to stdout and to out/bench-speed/ (one .txt per program run).
# Timings depend on what else runs on the machine: run it on a quiet one and say which.
#   usage: bash scripts/bench-speed.sh   (exit status 1 when a program failed; the others still run)
# Environment: DEJAVIEW_KITTI (default ../shared/data/kitti-odometry-mini),
# DEJAVIEW_SPEED_OUT (default out/bench-speed), REPEATS (cuda_timing repeats per frame, default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DEJAVIEW_KITTI:-../shared/data/kitti-odometry-mini}
OUT=${DEJAVIEW_SPEED_OUT:-out/bench-speed}
REPEATS=${REPEATS:-5}
start=$(date +%s)

# The store and ingest benches start a real s3rver (npm), which scripts/install-deps.sh installs.
if [ ! -f .deps/node_modules/s3rver/bin/s3rver.js ]; then bash scripts/install-deps.sh; fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# Two jobs at most: the machine is shared.
cmake --build build -j2 --target cuda_timing dejaview_store_bench dejaview_ingest_bench \
  dejaview_load_bench
built=$(date +%s)

rm -rf "$OUT"
mkdir -p "$OUT"
failed=()
run() {  # run NAME CMD...: prints the command, then its output, and keeps it in $OUT/NAME.txt
  local name=$1
  shift
  echo "== $* ($(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg))"
  # A failing program is reported at the end; the others still run.
  if ! "$@" 2>&1 | tee "$OUT/$name.txt"; then failed+=("$name"); fi
  echo
}

# (3) Codec speed, stage by stage: one thread, the fastest of REPEATS runs per frame, median of
# the coded (odd) frames, against a map of the even frames at resolution T.
for seq in 00 07; do
  for t in 0.1 0.2; do
    run "speed_${seq}_T${t}" build/tests/codec/cuda_timing "$DATA/$seq" "$t" 1 "$REPEATS"
  done
done

# (5) Store tiers: ack latency with the lazy remote copy off/on, read throughput per tier.
run store build/store/dejaview_store_bench --puts 400 --reads 32

# (6) Ingest through dejaview-server: ack latency and throughput per remote-copy mode.
run ingest build/server/dejaview_ingest_bench

# (7) Agent under live load: the design load (2 LiDARs at 10 Hz) on the real revisit first (a map
# of two whole simulated days, the third day live: out/days3, as scripts/bench.sh simulates it),
# then on KITTI 00's pseudo-revisit at 10 and 4 Hz.
DAYS=${DEJAVIEW_DAYS:-out/days3}
if [ ! -d "$DAYS/day_02" ]; then
  cmake --build build -j2 --target dejaview
  build/tools/dejaview simulate --out "$DAYS" --days 3 --frames 150 --seed 11 --quiet
fi
run load_2x10_multiday build/agent/dejaview_load_bench --drive "$DAYS/day_02" \
  --map-drives "$DAYS/day_00,$DAYS/day_01" --sensors 2 --hz 10 --seconds 20
# The same with the candidates bounded at 60 m (agent config selection_radius_m).
run load_2x10_multiday_r60 build/agent/dejaview_load_bench --drive "$DAYS/day_02" \
  --map-drives "$DAYS/day_00,$DAYS/day_01" --sensors 2 --hz 10 --seconds 20 --selection-radius 60
run load_2x10 build/agent/dejaview_load_bench --sensors 2 --hz 10 --seconds 20
run load_2x4 build/agent/dejaview_load_bench --sensors 2 --hz 4 --seconds 20

end=$(date +%s)
echo "bench-speed.sh: build $((built - start)) s, runs $((end - built)) s, total $((end - start)) s;" \
  "results in $OUT/" >&2
if [ "${#failed[@]}" -gt 0 ]; then
  echo "bench-speed.sh: FAILED: ${failed[*]} (output in $OUT/<name>.txt)" >&2
  exit 1
fi
