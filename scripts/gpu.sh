#!/usr/bin/env bash
# Issue 8's device check, for a machine with an NVIDIA GPU (under 5 minutes on 16 cores): builds
# the codec and its tests with CUDA for the local GPU, runs the byte-for-byte CUDA tests (which fail
# here, not skip, when no device is usable) and prints the CPU vs CUDA timing table of the
# encoder's hot paths. Results also go to $OUT (default out/gpu/).
#   usage: bash scripts/gpu.sh [SEQDIR]     (default ../shared/data/kitti-odometry-mini/00)
# Needs the Debian packages of scripts/install-deps.sh (installed when apt-get can reach them)
# and a CUDA toolkit (nvcc on PATH or under /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
SEQ=${1:-../shared/data/kitti-odometry-mini/00}
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
start=$(date +%s)
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || { echo "gpu.sh: no nvcc (PATH or /usr/local/cuda/bin)" >&2; exit 1; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if command -v apt-get >/dev/null; then bash scripts/install-deps.sh || true; fi

# native: the GPU of this machine (CMake asks the driver); the CI build compiles sm_87 + sm_90.
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEJAVIEW_WERROR=ON \
  -DDEJAVIEW_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" >/dev/null
cmake --build build-gpu -j "$(nproc)" --target cuda_test cuda_timing codec_test
built=$(date +%s)

# The CPU codec tests in the CUDA build, then the CUDA ones; a skip is a failure here.
build-gpu/tests/codec/codec_test --gtest_brief=1 2>&1 | tee "$OUT/codec_test.txt"
build-gpu/tests/codec/cuda_test --gtest_brief=1 2>&1 | tee "$OUT/cuda_test.txt"
if grep -q "SKIPPED" "$OUT/cuda_test.txt"; then
  echo "gpu.sh: CUDA tests skipped: no usable device" >&2
  exit 1
fi
build-gpu/tests/codec/cuda_timing "$SEQ" 0.2 | tee "$OUT/timing_0.2.txt"
build-gpu/tests/codec/cuda_timing "$SEQ" 0.1 | tee "$OUT/timing_0.1.txt"
end=$(date +%s)
echo "gpu.sh: build $((built - start)) s, tests + timing $((end - built)) s; results in $OUT/"
