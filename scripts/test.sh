#!/usr/bin/env bash
# README command (2): install packages, build (Release, warnings as errors, the CUDA backend where
# nvcc is), run every test, the arm64 cross build's qemu smoke, the packages installed into a
# fresh root and run from there, then the same tests under address+undefined sanitizers (clang),
# bounded libFuzzer runs of every parser, the agent pipeline and the export under the thread
# sanitizer, then the clang-format check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
JOBS=$(nproc)
start=$(date +%s)
# Each stage prints when it starts, so a slow CI says which stage grew.
stage() { echo "== $1 (at $(( $(date +%s) - start )) s)"; }

# The CUDA backend compiles for Jetson Orin (sm_87) and a data-centre GPU (sm_90) wherever nvcc
# is (CUDA is not a Debian 12 package), in the Release build itself: one compile of everything, and
# the suite runs against the library the vehicle would use. Without a device cuda_test checks the
# clean refusal (its byte-for-byte tests skip, saying why); scripts/gpu.sh runs them on a machine
# with a GPU. The clang build below has no CUDA, so the "built without CUDA" path is tested there.
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda=()
if [ -x "$NVCC" ]; then
  cuda=(-DDEJAVIEW_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC")
  stage "Release build, with the CUDA backend ($("$NVCC" --version | tail -n 1))"
else
  stage "Release build (CUDA backend NOT built: no nvcc on PATH or in /usr/local/cuda/bin)"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEJAVIEW_WERROR=ON "${cuda[@]}" >/dev/null
cmake --build build -j "$JOBS"
stage "Tests (Release)"
ctest --test-dir build -j "$JOBS" --output-on-failure 2>&1 | tail -n 25

# The vehicle computers are arm64: the codec and spool cross-built and run under qemu-user, the
# codec's bytes compared with this Release build's (only the smoke's targets are built here;
# `bash scripts/arm64.sh` runs every vehicle test).
stage "arm64 cross build + qemu smoke (codec bytes equal amd64's, spool tests)"
bash scripts/arm64.sh --smoke

stage "Packages (.deb into a fresh root: units verified, installed agent and server end to end)"
bash scripts/install-check.sh

# One clang build serves two stages: every test under ASan+UBSan, then each libFuzzer target
# fuzzed for a bounded time (the libraries with fuzz targets carry the fuzzer's coverage
# instrumentation: tests/CMakeLists.txt, dv_fuzz).
stage "Tests (clang, address+undefined sanitizers)"
# Line tables are all the sanitizers' reports need (-g's full debug info took 5% longer to build).
CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" -DDEJAVIEW_SANITIZE=ON \
  -DDEJAVIEW_FUZZERS=ON -DDEJAVIEW_WERROR=ON >/dev/null
cmake --build build-san -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-san -j "$JOBS" --output-on-failure 2>&1 | tail -n 25

stage "Fuzz (libFuzzer, ${FUZZ_SECONDS:-10} s per target)"
bash scripts/fuzz.sh build-san "${FUZZ_SECONDS:-10}"

# The agent's threads (subscriber, encoders, spool writer, uploader), in-process and as the
# real agent and server processes of the fault tests; the export's threads (readers, decoders, the
# writer in order).
stage "Tests (thread sanitizer: the agent pipeline, the export)"
# -O1 and minimal debug info (enough for TSan's stacks): the pipeline's tests take seconds either
# way, and its libraries build in two thirds of the time -O2 -g takes.
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DDEJAVIEW_TSAN=ON \
  -DDEJAVIEW_WERROR=ON >/dev/null
cmake --build build-tsan -j "$JOBS" --target agent_test agent_server_faults_test export_test
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
build-tsan/tests/agent/agent_test --gtest_brief=1
build-tsan/tests/agent/agent_server_faults_test --gtest_brief=1
build-tsan/tests/server/export_test --gtest_brief=1
unset TSAN_OPTIONS

stage "clang-format"
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
clang-format --dry-run --Werror $files
echo "== all green in $(( $(date +%s) - start )) s"
