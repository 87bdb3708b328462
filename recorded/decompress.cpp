#include "decompress.h"

#include <bzlib.h>
#include <lz4frame.h>
#include <zstd.h>

#include <climits>

namespace dv::recorded {

bool Lz4FrameDecompress(ByteView in, uint8_t* out, size_t n) {
  LZ4F_dctx* ctx = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION))) return false;
  size_t src_left = in.size, dst_left = n, ret = 1;
  const uint8_t* src = in.data;
  uint8_t* dst = out;
  while (ret != 0 && !LZ4F_isError(ret)) {
    size_t dst_size = dst_left, src_size = src_left;
    ret = LZ4F_decompress(ctx, dst, &dst_size, src, &src_size, nullptr);
    if (LZ4F_isError(ret) || (src_size == 0 && dst_size == 0)) break;
    src += src_size;
    src_left -= src_size;
    dst += dst_size;
    dst_left -= dst_size;
  }
  LZ4F_freeDecompressionContext(ctx);
  return ret == 0 && src_left == 0 && dst_left == 0;
}

bool ZstdDecompress(ByteView in, uint8_t* out, size_t n) {
  const size_t got = ZSTD_decompress(out, n, in.data, in.size);
  return !ZSTD_isError(got) && got == n;
}

bool Bz2Decompress(ByteView in, uint8_t* out, size_t n) {
  if (in.size > UINT_MAX || n > UINT_MAX) return false;
  auto got = unsigned(n);
  const int rc = BZ2_bzBuffToBuffDecompress(
      reinterpret_cast<char*>(out), &got, const_cast<char*>(reinterpret_cast<const char*>(in.data)),
      unsigned(in.size), 0, 0);
  return rc == BZ_OK && got == n;
}

}  // namespace dv::recorded
