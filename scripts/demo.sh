#!/usr/bin/env bash
# README command (1): install packages, build, and run the most complete pipeline on built-in
# defaults (the shared KITTI extract beside the repo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
DATA=${DEJAVIEW_DATA:-../shared/data/kitti-odometry-mini}
./build/tools/dejaview info "$DATA/00"
