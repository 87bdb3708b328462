#!/usr/bin/env bash
# CI stage: the .deb packages of the Release build (build/) unpacked into a fresh directory root
# and run from there. Both systemd units must pass `systemd-analyze verify` (against the
# installed programs) and `systemd-analyze security` at exposure 3 or less; then the installed
# dejaview-server and dejaview-agent carry a real KITTI drive end to end, counted by the
# installed `dejaview query`.
#   usage: bash scripts/install-check.sh   (after the Release build of scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
root=$work/root
(cd build && rm -f dejaview-*.deb && cpack -G DEB >/dev/null)
for deb in build/dejaview-agent_*.deb build/dejaview-server_*.deb; do
  echo "install-check: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends | cut -c1-100)..."
  dpkg-deb -x "$deb" "$root"
done
for f in usr/bin/dejaview-agent usr/bin/dejaview-server usr/bin/dejaview etc/dejaview/agent.yaml \
  lib/systemd/system/dejaview-agent.service lib/systemd/system/dejaview-server.service; do
  [ -e "$root/$f" ] || { echo "install-check: $f is not in the packages"; exit 1; }
done
# verify resolves ExecStart= on this machine's root, so each unit is checked with its /usr/bin
# pointing into the fresh root; security reads the unit as installed.
for unit in dejaview-agent dejaview-server; do
  sed "s|/usr/bin/|$root/usr/bin/|g" "$root/lib/systemd/system/$unit.service" >"$work/$unit.service"
  systemd-analyze verify "$work/$unit.service"
  systemd-analyze security --offline=yes --threshold=30 "$root/lib/systemd/system/$unit.service" |
    tail -n 1
done

drive=../shared/data/kitti-odometry-mini/00
"$root/usr/bin/dejaview-server" --store "$work/store" --listen tcp://127.0.0.1:0 \
  --port-file "$work/server.port" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 300); do [ -s "$work/server.port" ] && break; sleep 0.1; done
[ -s "$work/server.port" ] || { cat "$work/server.log"; exit 1; }
cat >"$work/agent.yaml" <<YAML
vehicle: veh-install
source_drive: "$(realpath "$drive")"
lidar_endpoint: ""
spool: {dir: "$work/spool"}
upload: {endpoint: "$(cat "$work/server.port")"}
metrics_listen: ""
log: {format: json}
YAML
"$root/usr/bin/dejaview-agent" --config "$work/agent.yaml" --check-config
"$root/usr/bin/dejaview-agent" --config "$work/agent.yaml" --exit-when-drained 2>"$work/agent.log"
kill "$server_pid"
wait "$server_pid" || true
server_pid=""
frames=$("$root/usr/bin/dejaview" query --store "$work/store" | tail -n 1)
want="$(find "$drive/velodyne" -name '*.bin' | wc -l) frames"
if [ "$frames" != "$want" ]; then
  echo "install-check: the installed programs stored '$frames', expected '$want'"
  cat "$work/agent.log" "$work/server.log"
  exit 1
fi
# The agent's config asked for JSON logs: every line of its stderr is one object, in UTC.
/usr/bin/python3 - "$work/agent.log" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "the agent logged nothing"
for line in lines:
    record = json.loads(line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["ts"]), line
    assert record["logger"] == "dejaview-agent", line
PY
echo "install-check: packages install, units verify, installed agent -> server stored $frames," \
  "agent logged $(wc -l <"$work/agent.log") JSON lines in UTC"
