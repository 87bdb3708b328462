#!/usr/bin/env bash
# README command (2): install packages, build (Release, warnings as errors), run every test,
# then the same tests under address+undefined sanitizers, then the clang-format check.
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

echo "== Tests (address+undefined sanitizers)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEJAVIEW_SANITIZE=ON \
  -DDEJAVIEW_WERROR=ON >/dev/null
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j "$JOBS" --output-on-failure 2>&1 | tail -n 25

echo "== clang-format"
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
clang-format --dry-run --Werror $files
echo "== all green in $(( $(date +%s) - start )) s"
