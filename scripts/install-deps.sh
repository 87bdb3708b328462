#!/usr/bin/env bash
# Installs every Debian 12 package dejaview needs to build, test, bench and plot.
# Idempotent: apt-get skips what is already installed. Uses sudo when not root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(
  build-essential cmake pkg-config ninja-build clang-format clang-14 libclang-rt-14-dev
  libeigen3-dev libnanoflann-dev libzmq3-dev cppzmq-dev liblz4-dev libzstd-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev libsodium-dev libdraco-dev nlohmann-json3-dev gnuplot-nox
  libcurl4-openssl-dev libssl-dev nodejs postgresql libpq-dev python3-zmq
  python3-dev python3-pybind11 python3-numpy python3-pytest python3-torch
  zlib1g-dev liblzf-dev zstd lz4
  libpcap-dev  # Ouster captures (recorded/pcap.cpp)
  # The reference ROS 1 bag writer the recorded-drive tests run (tests/recorded/write_ros1_bag.py)
  python3-rosbag python3-roslz4 python3-sensor-msgs python3-geometry-msgs python3-nav-msgs
  python3-tf2-msgs
  prometheus  # promtool: the tests lint the agent's and server's /metrics with it
  systemd  # systemd-analyze: scripts/install-check.sh verifies the units with it
  # The arm64 cross build (scripts/arm64.sh, a CI stage): Debian's cross compiler, qemu-user and
  # the arm64 libraries (multiarch; libyaml-cpp-dev is unpacked by arm64.sh, see there).
  g++-aarch64-linux-gnu qemu-user
  libzmq3-dev:arm64 liblz4-dev:arm64 libzstd-dev:arm64 libyaml-cpp0.7:arm64
  libspdlog-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 liblzf-dev:arm64
)
# npm packages the tests run, installed into the project (.deps/): the store tests' S3-compatible
# server (s3rver) and, for the recorded-drive tests, the reference MCAP and CDR writers
# (@mcap/core, @foxglove/cdr) and Foxglove's schemas with the protobuf encoder they are written
# with (@foxglove/schemas, protobufjs).
install_npm_packages() {
  local dir; dir="$(cd "$(dirname "$0")/.." && pwd)/.deps"
  [ -f "$dir/node_modules/s3rver/bin/s3rver.js" ] &&
    [ -f "$dir/node_modules/@mcap/core/package.json" ] &&
    [ -f "$dir/node_modules/@foxglove/cdr/package.json" ] &&
    [ -f "$dir/node_modules/@foxglove/schemas/package.json" ] &&
    [ -f "$dir/node_modules/protobufjs/package.json" ] && return 0
  command -v npm >/dev/null || $SUDO apt-get install -y -q --no-install-recommends npm
  npm install --prefix "$dir" --no-audit --no-fund --silent s3rver@3.7.1 \
    @mcap/core@2.2.2 @foxglove/cdr@3.5.0 @foxglove/schemas@2.1.0 protobufjs@7.6.6
}
trap install_npm_packages EXIT
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
