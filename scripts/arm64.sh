#!/usr/bin/env bash
# The vehicle side (base, maps, codec, transport, agent) cross-built for arm64 with Debian's
# cross toolchain and multiarch arm64 library packages, and its unit tests run under
# qemu-user (ctest uses CMAKE_CROSSCOMPILING_EMULATOR). Not part of CI (time budget).
#   usage: bash scripts/arm64.sh            (installs what it needs with apt, sudo when not root)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
bash scripts/install-deps.sh  # the host side (headers of Eigen, nanoflann, cppzmq, json)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends g++-aarch64-linux-gnu qemu-user \
  libzmq3-dev:arm64 liblz4-dev:arm64 libzstd-dev:arm64 libyaml-cpp0.7:arm64 \
  libspdlog-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 liblzf-dev:arm64
# libyaml-cpp-dev is not Multi-Arch: same in Debian 12 (installing :arm64 removes the host's
# :amd64 one), so its arm64 files are unpacked into a private prefix instead.
sysroot=build-arm64/sysroot
if [ ! -f "$sysroot/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake" ]; then
  mkdir -p "$sysroot" build-arm64/debs
  (cd build-arm64/debs && apt-get download libyaml-cpp-dev:arm64 libyaml-cpp0.7:arm64)
  for deb in build-arm64/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
fi
cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEJAVIEW_WERROR=ON \
  -DDEJAVIEW_VEHICLE_ONLY=ON -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-toolchain.cmake \
  -DCMAKE_PREFIX_PATH="$PWD/$sysroot/usr" >/dev/null
cmake --build build-arm64 -j "$(nproc)"
file build-arm64/agent/dejaview-agent
# Two tests are excluded, both limits of qemu-user, not of arm64: gtest death tests fork a
# multithreaded emulated process (they hang), and eight threads contending on one atomic
# double run past ctest's 300 s under emulation. Both run natively on x86 in CI.
ctest --test-dir build-arm64 -j "$(nproc)" --output-on-failure \
  -E 'MetricsDeathTest|Metrics.ConcurrentUpdatesAreNotLost' 2>&1 | tail -n 15
