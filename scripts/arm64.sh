#!/usr/bin/env bash
# The vehicle side (base, maps, codec, transport, agent) cross-built for arm64 with Debian's
# cross toolchain and multiarch arm64 library packages (scripts/install-deps.sh installs them),
# run under qemu-user.
#   bash scripts/arm64.sh          every vehicle unit test under qemu (ctest uses
#                                  CMAKE_CROSSCOMPILING_EMULATOR)
#   bash scripts/arm64.sh --smoke  the CI stage: only what the smoke needs is built; the codec
#                                  smoke (tests/vehicle/codec_smoke.cpp: a real KITTI frame's
#                                  map, delta and intra payloads) must write the same bytes under
#                                  qemu as the amd64 Release build (build/), the spool tests
#                                  pass under qemu, and the agent's arm64 .deb is made and its
#                                  program runs
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
bash scripts/install-deps.sh
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
data=../shared/data/kitti-odometry-mini/00
if [ "$mode" = --smoke ]; then
  cmake --build build-arm64 -j "$(nproc)" --target codec_smoke vehicle_transport_test \
    dejaview-agent
  if [ ! -f build/build.ninja ]; then
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEJAVIEW_WERROR=ON >/dev/null
  fi
  cmake --build build -j "$(nproc)" --target codec_smoke
  rm -rf build/codec_smoke_amd64 build-arm64/codec_smoke_arm64
  build/tests/vehicle/codec_smoke "$data" build/codec_smoke_amd64
  qemu-aarch64 -L /usr/aarch64-linux-gnu build-arm64/tests/vehicle/codec_smoke "$data" \
    build-arm64/codec_smoke_arm64
  diff -r build/codec_smoke_amd64 build-arm64/codec_smoke_arm64
  echo "arm64: codec smoke byte-identical to amd64 ($(find build/codec_smoke_amd64 -type f | wc -l) files)"
  qemu-aarch64 -L /usr/aarch64-linux-gnu build-arm64/tests/vehicle/vehicle_transport_test \
    --gtest_filter='Spool*' --gtest_brief=1
  # The agent's arm64 package: built by CPack from this build, unpacked, its program run.
  (cd build-arm64 && rm -f dejaview-agent_*.deb && cpack -G DEB >/dev/null)
  deb=$(ls build-arm64/dejaview-agent_*_arm64.deb)
  rm -rf build-arm64/package-root && dpkg-deb -x "$deb" build-arm64/package-root
  echo "arm64: $(basename "$deb"): $(dpkg-deb -f "$deb" Architecture), runs as" \
    "'$(qemu-aarch64 -L /usr/aarch64-linux-gnu build-arm64/package-root/usr/bin/dejaview-agent --version)'"
  exit 0
fi
cmake --build build-arm64 -j "$(nproc)"
file build-arm64/agent/dejaview-agent
# Two tests are excluded, both limits of qemu-user, not of arm64: gtest death tests fork a
# multithreaded emulated process (they hang), and eight threads contending on one atomic
# double run past ctest's 300 s under emulation. Both run natively on x86 in CI.
ctest --test-dir build-arm64 -j "$(nproc)" --output-on-failure \
  -E 'MetricsDeathTest|Metrics.ConcurrentUpdatesAreNotLost' 2>&1 | tail -n 15
