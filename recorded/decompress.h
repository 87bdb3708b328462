// Whole-buffer decompression for the chunks of MCAP files and ROS 1 bags, which declare their
// uncompressed size: each function is true only when the input decodes to exactly n bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dejaview/recorded/mcap.h"

namespace dv::recorded {

// A chunk decompresses to at most kMaxChunkBytes, and to at most what its codec can expand its
// compressed bytes to: LZ4 emits at most 255 bytes per input byte (a match length grows by 255
// per extra byte), zstd at most 128 KiB per 4-byte RLE block. bzip2's first run-length stage
// alone lets a few bytes stand for megabytes, so for bz2 only kMaxChunkBytes bounds it.
constexpr uint64_t kMaxChunkBytes = uint64_t(1) << 30;
constexpr uint64_t kLz4MaxRatio = 256;
constexpr uint64_t kZstdMaxRatio = 32768;
constexpr uint64_t kRatioSlackBytes = 4096;

bool Lz4FrameDecompress(ByteView in, uint8_t* out, size_t n);  // exactly one LZ4 frame
bool ZstdDecompress(ByteView in, uint8_t* out, size_t n);
bool Bz2Decompress(ByteView in, uint8_t* out, size_t n);

}  // namespace dv::recorded
