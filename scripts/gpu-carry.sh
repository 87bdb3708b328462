#!/usr/bin/env bash
# Issue 8's device check for a GPU machine that has the NVIDIA driver and nvcc's runtime but none
# of this project's Debian packages and no network (scripts/gpu.sh builds there, so it needs
# both). Packs into DEST the CUDA build's codec test binaries, the libraries they link beyond
# glibc and libstdc++, the shared KITTI extract and run.sh. On the GPU machine, from a copy of
# this repository with DEST in it: `bash DEST/run.sh` runs the byte-for-byte CUDA tests, the CPU
# codec tests (their golden files: the same bits on another CPU), the CPU vs CUDA timing tables
# of both sequences and compute-sanitizer's memcheck, each output also into $OUT (default
# out/gpu). About 50 s on an H200 with 16 cores.
#   usage: bash scripts/gpu-carry.sh [BUILD_DIR] [DEST]     (defaults: build, .devcarry)
# BUILD_DIR: configured with -DDEJAVIEW_CUDA=ON (the default architectures include sm_90).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DEST=${2:-.devcarry}
grep -q "^DEJAVIEW_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" ||
  { echo "gpu-carry.sh: $BUILD is not a CUDA build (-DDEJAVIEW_CUDA=ON)" >&2; exit 1; }
cmake --build "$BUILD" --target cuda_test cuda_timing codec_test
# The test binaries name the data and fixture folders by their absolute paths at build time.
DATA=$(sed -n 's/^DEJAVIEW_DATA_DIR:PATH=//p' "$BUILD/CMakeCache.txt")
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
cp "$BUILD"/tests/codec/{cuda_test,cuda_timing,codec_test} "$DEST/bin/"
for b in "$DEST"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so' |
  xargs -r -I{} cp -L {} "$DEST/lib/"
cp -rL "$DATA/kitti-odometry-mini" "$DEST/"
cat >"$DEST/run.sh" <<EOF
#!/usr/bin/env bash
# Written by scripts/gpu-carry.sh: runs prebuilt binaries; see there.
set -u
C=\$(cd "\$(dirname "\$0")" && pwd); B=\$C/bin
OUT=\${OUT:-out/gpu}; mkdir -p "\$OUT"
export LD_LIBRARY_PATH=\$C/lib PATH=\$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "\$OUT/gpu.txt"
(nproc; grep -m1 "model name" /proc/cpuinfo) | tee -a "\$OUT/gpu.txt"
# The source folder first: the data path may run through it (SRC/../shared/data).
[ -e "$SRC" ] || ln -s "\$(dirname "\$C")" "$SRC"
# Only where the data is missing: never write into a data folder that exists.
if [ ! -e "$DATA/kitti-odometry-mini" ]; then
  mkdir -p "$DATA" && ln -s "\$C/kitti-odometry-mini" "$DATA/kitti-odometry-mini"
fi
echo "== cuda_test"; timeout 120 \$B/cuda_test --gtest_brief=1 2>&1 | tee "\$OUT/cuda_test.txt" | tail -6
# The CLI test needs the dejaview binary and its many libraries: it runs in CI, not here.
echo "== codec_test"; timeout 150 \$B/codec_test --gtest_brief=1 --gtest_filter=-CliCodec.* 2>&1 |
  tee "\$OUT/codec_test.txt" | tail -4
echo "== timing"
for s in 00 07; do for T in 0.05 0.1 0.2 0.4; do
  timeout 60 \$B/cuda_timing "\$C/kitti-odometry-mini/\$s" \$T
done; done 2>&1 | tee "\$OUT/timing.txt"
echo "== memcheck"; timeout 240 compute-sanitizer --tool memcheck --leak-check full \\
  \$B/cuda_test --gtest_brief=1 2>&1 | tee "\$OUT/memcheck.txt" | tail -4
EOF
chmod +x "$DEST/run.sh"
du -sh "$DEST"
