#!/usr/bin/env bash
# BENCHMARK.md "Python package and export": builds Release with the Python package, simulates a
# route (three days of FRAMES frames, HDL-64 preset), builds the route map from days 0 and 1,
# codes day 2 at T = 0.2 m into a store through the server's ingest (make_store), then runs
# python/bench/bench.py: export --threads 1 vs 2, Python decode vs the C++ CLI, DataLoader 1 vs
# 2 workers, store (disk tier; S3 tier cold, on s3rver) -> decode -> tensors beside the
# KITTI-layout export read from disk.
# Timings depend on what else runs on the machine: say which.
# A day is 150 frames, as in the multi-day protocol: a DataLoader pays a fixed cost at each epoch's
# start and end (each worker's first frame, the slower worker's last batch), and a much shorter
# epoch measures that cost more than the loader's rate.
#   usage: bash scripts/bench-python.sh   Environment: FRAMES (default 150), REPEATS (default 3),
#   DEJAVIEW_PY_BENCH (work folder, default out/bench/python)
set -euo pipefail
cd "$(dirname "$0")/.."
FRAMES=${FRAMES:-150}
WORK=${DEJAVIEW_PY_BENCH:-out/bench/python}
bash scripts/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target dejaview dejaview_python dejaview_make_test_store
CLI=build/tools/dejaview
rm -rf "$WORK"
mkdir -p "$WORK"
$CLI simulate --out "$WORK/days" --days 3 --frames "$FRAMES" --seed 1 --preset hdl64 --quiet >/dev/null
$CLI map build "$WORK/days/day_00" "$WORK/days/day_01" --out "$WORK/map" >/dev/null 2>&1
$CLI map publish "$WORK/map" --maps-root "$WORK/maps" >/dev/null
$CLI encode "$WORK/days/day_02" --map "$WORK/map" --out "$WORK/deltas" --tolerance 0.2 >/dev/null 2>&1
build/python/dejaview_make_test_store "$WORK/store" veh-sim day_02 "$WORK/deltas" 2>/dev/null
# The same frames in a store whose copier put them in an S3 bucket (s3rver, from npm, installed
# by scripts/install-deps.sh), for the cold remote-tier read.
node .deps/node_modules/s3rver/bin/s3rver.js -d "$WORK/s3" -a 127.0.0.1 -p 0 -s \
  --configure-bucket fleet >"$WORK/s3rver.log" 2>&1 &
S3PID=$!
trap 'kill $S3PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q 'listening on' "$WORK/s3rver.log" && break; sleep 0.1; done
PORT=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/s3rver.log" | cut -d: -f2)
printf 'remote: {endpoint: "http://127.0.0.1:%s", bucket: fleet, prefix: "bench/"}\ncopier: {idle_ms: 0}\n' \
  "$PORT" >"$WORK/tiers.yaml"
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
build/python/dejaview_make_test_store "$WORK/store-s3" veh-sim day_02 "$WORK/deltas" "$WORK/tiers.yaml" \
  2>/dev/null
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d), load average $(cut -d' ' -f1-3 /proc/loadavg)"
PYTHONPATH=build/python /usr/bin/python3 python/bench/bench.py --cli "$CLI" --work "$WORK" \
  --repeats "${REPEATS:-3}"
