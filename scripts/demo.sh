#!/usr/bin/env bash
# README command (1): install, build and run the whole loop on built-in defaults:
# simulate 3 days of a route, build the route map from the first two days, start dejaview-server and
# dejaview-agent as separate processes, replay the third day into the agent over ZeroMQ (with the
# localiser's prior poses), let it encode, spool and upload, reconstruct on the server, and
# print a summary with a picture. DEMO_DRIVE=<KITTI-style drive> runs it on real data instead
# (map from the even frames, the odd frames replayed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
D=build/tools/dejaview
OUT=out/demo
TOL=${DEMO_TOLERANCE:-0.2}
rm -rf "$OUT" && mkdir -p "$OUT"
start=$(date +%s)

if [ -n "${DEMO_DRIVE:-}" ]; then
  echo "== real drive $DEMO_DRIVE: map from the even frames, the odd frames replayed"
  mkdir -p "$OUT/days/map/velodyne" "$OUT/days/live/velodyne"
  [ -d "$DEMO_DRIVE/labels" ] && mkdir -p "$OUT/days/live/labels"
  # The live frames are renumbered 000000.. as the replayed sequence numbers, which is how the
  # server names the frames it reconstructs.
  i=0; n=0
  while read -r f; do
    name=$(basename "$f" .bin)
    if [ $((i % 2)) -eq 0 ]; then
      cp "$f" "$OUT/days/map/velodyne/"; dst=map
    else
      new=$(printf '%06d' "$n"); n=$((n + 1)); dst=live
      cp "$f" "$OUT/days/live/velodyne/$new.bin"
      [ -d "$DEMO_DRIVE/labels" ] && cp "$DEMO_DRIVE/labels/$name.label" "$OUT/days/live/labels/$new.label"
    fi
    sed -n "$((i + 1))p" "$DEMO_DRIVE/poses.txt" >> "$OUT/days/$dst/poses.txt"
    sed -n "$((i + 1))p" "$DEMO_DRIVE/timestamps.txt" >> "$OUT/days/$dst/timestamps.txt"
    i=$((i + 1))
  done < <(ls "$DEMO_DRIVE"/velodyne/*.bin)
  MAP_DRIVES=("$OUT/days/map"); LIVE="$OUT/days/live"; PRIOR=""
else
  echo "== simulate 3 days of the route"
  $D simulate --out "$OUT/days" --days 3 --frames "${DEMO_FRAMES:-60}" --seed 7 --quiet
  MAP_DRIVES=("$OUT/days/day_00" "$OUT/days/day_01"); LIVE="$OUT/days/day_02"; PRIOR="--prior"
fi

echo "== build the route map at $TOL m"
$D map build "${MAP_DRIVES[@]}" --out "$OUT/map.tmp" --resolution "$TOL"
version=$($D map info "$OUT/map.tmp" --json | sed -n 's/.*"version": "\([^"]*\)".*/\1/p')
mkdir -p "$OUT/maps" && mv "$OUT/map.tmp" "$OUT/maps/$version"

echo "== start the server and the agent"
build/server/dejaview-server --store "$OUT/server" --listen tcp://127.0.0.1:0 \
  --port-file "$OUT/server.port" > "$OUT/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid ${agent_pid:-} 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$OUT/server.port" ] && break; sleep 0.1; done
lidar_port=$((20000 + RANDOM % 20000))
cat > "$OUT/agent.yaml" <<YAML
vehicle: demo-001
drive: demo
lidar_endpoint: tcp://127.0.0.1:$lidar_port
map_dir: $OUT/maps/$version
tolerance_m: $TOL
intensity: true
queue_frames: 64
spool:
  dir: $OUT/spool
upload:
  endpoint: $(cat "$OUT/server.port")
metrics_listen: ""
YAML
build/agent/dejaview-agent --config "$OUT/agent.yaml" > "$OUT/agent.log" 2>&1 &
agent_pid=$!

echo "== replay the live drive into the agent over ZeroMQ"
frames=$(ls "$LIVE"/velodyne | wc -l)
$D replay "$LIVE" --endpoint "tcp://127.0.0.1:$lidar_port" $PRIOR --quiet
echo "== wait until the server has acknowledged all $frames frames"
stored=0
for _ in $(seq 600); do
  stored=$($D query --db "$OUT/server/index.sqlite" 2>/dev/null | sed -n 's/^\([0-9]*\) frames$/\1/p')
  [ "${stored:-0}" -ge "$frames" ] && break
  sleep 0.2
done
kill -TERM "$agent_pid" && wait "$agent_pid" || true
kill -TERM "$server_pid" && wait "$server_pid" || true
trap - EXIT

echo "== reconstruct on the server side and compare with the originals"
$D query --db "$OUT/server/index.sqlite" --export "$OUT/reconstructed" --maps "$OUT/maps" > /dev/null
raw=$(du -cb "$LIVE"/velodyne/*.bin | tail -1 | cut -f1)
stored_bytes=$(find "$OUT/server" -type f ! -name '*.sqlite*' -printf '%s\n' | awk '{s+=$1} END {print s}')
echo
echo "## dejaview demo summary"
echo "frames replayed / stored on the server: $frames / ${stored:-0}"
echo "raw frame bytes (KITTI float32 x,y,z,i): $raw; bytes stored by the server: $stored_bytes"
awk -v r="$raw" -v s="$stored_bytes" 'BEGIN { printf "xyz+intensity ratio: %.1f (map: separate, %s)\n", r / s, "'"$(du -sh "$OUT/maps/$version" | cut -f1)"'" }'
grep -ho "agent: stopped.*" "$OUT/agent.log" || true
$D compare "$LIVE" "$OUT/reconstructed" --png "$OUT/demo.png"
echo "guaranteed maximum error (tolerance): $TOL m; wall time $(( $(date +%s) - start )) s"
