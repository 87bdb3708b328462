#!/bin/bash
# Registration under larger localisation errors: codec_eval at T = 0.1 on KITTI 00 and 07 with
# seeds 1-3 (5 coded frames each) and the protocol's prior noise times 1, 2 and 3. Prints, per
# noise level, how many frames end more than 0.1 m from the ground-truth pose and the ratios.
# Usage: scripts/registration-robustness.sh [CODEC_EVAL]  (default build/tests/codec/codec_eval)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/tests/codec/codec_eval}
data=../shared/data/kitti-odometry-mini
for noise in 1 2 3; do
  far=0 frames=0 ratios=""
  for seq in 00 07; do
    for seed in 1 2 3; do
      out=$("$bin" "$data/$seq" 0.1 0.02 0 2 0.6 "$seed" "$noise" 2>&1)
      n=$(echo "$out" | sed -n 's/^frame .*pose err \([0-9.]*\) m.*/\1/p' | awk '$1 > 0.1 {c++} END {print c + 0}')
      far=$((far + n))
      frames=$((frames + $(echo "$out" | grep -c '^frame')))
      ratios="$ratios $seq/$seed:$(echo "$out" | sed -n 's/^T=.* ratio \([0-9.]*\) .*/\1/p')"
    done
  done
  echo "prior noise x$noise: $far of $frames frames > 0.1 m from the truth; ratio$ratios"
done
