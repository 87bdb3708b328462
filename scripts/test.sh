#!/usr/bin/env bash
# README command (2): install packages, build (Release, warnings as errors), run every test, build
# the CUDA backend, then the same tests under address+undefined sanitizers (clang), bounded
# libFuzzer runs of every parser, the agent pipeline under the thread sanitizer, then the
# clang-format check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
JOBS=$(nproc)
start=$(date +%s)

echo "== Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEJAVIEW_WERROR=ON >/dev/null
cmake --build build -j "$JOBS"
echo "== Tests (Release)"
ctest --test-dir build -j "$JOBS" --output-on-failure 2>&1 | tail -n 25

# The CUDA backend compiles for Jetson Orin (sm_87) and a data-centre GPU (sm_90) wherever nvcc
# is (CUDA is not a Debian 12 package); without a device its tests check the clean refusal, and
# scripts/gpu.sh runs the byte-for-byte ones on a machine with a GPU.
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ]; then
  echo "== CUDA build ($("$NVCC" --version | tail -n 1)) and its tests"
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEJAVIEW_WERROR=ON \
    -DDEJAVIEW_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null
  cmake --build build-cuda -j "$JOBS" --target dejaview_codec cuda_test
  build-cuda/tests/codec/cuda_test --gtest_brief=1
else
  echo "== CUDA build: NOT RUN, no nvcc on PATH or in /usr/local/cuda/bin"
fi

# One clang build serves two stages: every test under ASan+UBSan, then each libFuzzer target
# fuzzed for a bounded time (the libraries carry the fuzzer's coverage instrumentation).
echo "== Tests (clang, address+undefined sanitizers)"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDEJAVIEW_SANITIZE=ON -DDEJAVIEW_FUZZERS=ON -DDEJAVIEW_WERROR=ON >/dev/null
cmake --build build-san -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-san -j "$JOBS" --output-on-failure 2>&1 | tail -n 25

echo "== Fuzz (libFuzzer, ${FUZZ_SECONDS:-15} s per target)"
bash scripts/fuzz.sh build-san "${FUZZ_SECONDS:-15}"

# The agent's threads (subscriber, encoders, spool writer, uploader), in-process and as the
# real agent and server processes of the fault tests.
echo "== Tests (thread sanitizer: the agent pipeline)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEJAVIEW_TSAN=ON \
  -DDEJAVIEW_WERROR=ON >/dev/null
cmake --build build-tsan -j "$JOBS" --target agent_test agent_server_faults_test
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
build-tsan/tests/agent/agent_test --gtest_brief=1
build-tsan/tests/agent/agent_server_faults_test --gtest_brief=1
unset TSAN_OPTIONS

echo "== clang-format"
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
clang-format --dry-run --Werror $files
echo "== all green in $(( $(date +%s) - start )) s"
