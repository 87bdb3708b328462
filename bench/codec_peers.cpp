// The single-frame peers that need no map: generic lossless compressors on raw float32 points,
// and a Cloudini-like quantise-to-grid baseline. Their byte layouts live only in memory inside the
// bench (nothing is written to disk), so they are specified here rather than in docs/:
//   header   u8 kind, u8 flags (bit 0: intensity present), varint N points
//   raw      (zstd, lz4) varint compressed length, then N x {f32 x, y, z[, intensity]} compressed
//   grid     f64 step_m, then two blocks "varint length, zstd bytes": the xyz block holds per
//            point the zigzag varint deltas of round(coord / step) against the previous point
//            (scan order keeps neighbours close), the intensity block one byte per point.
#include <lz4.h>
#include <lz4hc.h>
#include <zstd.h>

#include <cmath>
#include <cstring>

#include "dejaview/base/bytes.h"
#include "dejaview/base/kitti.h"
#include "dejaview/bench/codec.h"

namespace dv::bench {
namespace {

enum Kind : uint8_t { kZstd = 1, kLz4 = 2, kGrid = 3 };

void WriteHeader(ByteWriter* w, Kind kind, const PointCloud& frame, bool intensity) {
  w->U8(kind);
  w->U8(intensity ? 1 : 0);
  w->Varint(frame.size());
}

struct Header {
  bool intensity = false;
  size_t points = 0;
};

StatusOr<Header> ReadHeader(ByteReader* r, Kind kind, const std::string& codec) {
  uint8_t k = 0, flags = 0;
  uint64_t n = 0;
  if (!r->U8(&k) || !r->U8(&flags) || !r->Varint(&n)) {
    return Status::Corruption(codec + ": truncated header");
  }
  if (k != kind) return Status::Corruption(codec + ": wrong kind byte " + std::to_string(k));
  if (flags > 1) return Status::Corruption(codec + ": unknown flags " + std::to_string(flags));
  // Bounded allocation whatever the header claims.
  if (n > kMaxPointsPerFrame) return Status::Corruption(codec + ": absurd point count");
  return Header{flags == 1, size_t(n)};
}

// Reads "varint length, bytes" as a view into the input.
bool ReadBlock(ByteReader* r, const uint8_t** data, size_t* size) {
  uint64_t n = 0;
  if (!r->Varint(&n) || n > r->remaining()) return false;
  *size = size_t(n);
  return r->View(data, *size);
}

void WriteBlock(ByteWriter* w, const std::vector<uint8_t>& block) {
  w->Varint(block.size());
  w->Bytes(block.data(), block.size());
}

std::vector<uint8_t> Interleave(const PointCloud& frame, bool intensity) {
  const size_t stride = intensity ? 16 : 12;
  std::vector<uint8_t> raw(frame.size() * stride);
  for (size_t i = 0; i < frame.size(); ++i) {
    std::memcpy(&raw[i * stride], frame.xyz[i].data(), 12);
    if (intensity) std::memcpy(&raw[i * stride + 12], &frame.intensity[i], 4);
  }
  return raw;
}

PointCloud Deinterleave(const std::vector<uint8_t>& raw, size_t points, bool intensity) {
  const size_t stride = intensity ? 16 : 12;
  PointCloud cloud;
  cloud.reserve(points);
  for (size_t i = 0; i < points; ++i) {
    Eigen::Vector3f p;
    float v = 0;
    std::memcpy(p.data(), &raw[i * stride], 12);
    if (intensity) std::memcpy(&v, &raw[i * stride + 12], 4);
    cloud.push_back(p, v);
  }
  return cloud;
}

std::vector<uint8_t> ZstdCompress(const std::vector<uint8_t>& in, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), level);
  // Compressing into a buffer of ZSTD_compressBound bytes cannot fail.
  out.resize(n);
  return out;
}

// Decompresses into exactly `expected` bytes: anything else is corruption.
StatusOr<std::vector<uint8_t>> ZstdDecompress(const uint8_t* data, size_t size, size_t expected,
                                              const std::string& what) {
  std::vector<uint8_t> out(expected);
  const size_t n = ZSTD_decompress(out.data(), out.size(), data, size);
  if (ZSTD_isError(n)) return Status::Corruption(what + ": " + ZSTD_getErrorName(n));
  if (n != expected) return Status::Corruption(what + ": decompressed size mismatch");
  return out;
}

// zstd or LZ4 on the raw float32 points: the lossless baseline.
class RawCodec : public Codec {
 public:
  explicit RawCodec(Kind kind) : kind_(kind) {}
  std::string name() const override { return kind_ == kZstd ? "zstd" : "lz4"; }
  std::string knob_name() const override { return "level"; }
  // zstd: fast, default, strong. LZ4: level 1 is LZ4_compress_default, higher levels are LZ4HC.
  std::vector<double> DefaultKnobs() const override {
    return kind_ == kZstd ? std::vector<double>{1, 3, 9} : std::vector<double>{1, 9};
  }

  StatusOr<EncodedFrame> Encode(const PointCloud& frame, const Pose&, const FrameContext& context,
                                double knob) override {
    const std::vector<uint8_t> raw = Interleave(frame, context.intensity);
    std::vector<uint8_t> packed;
    const int level = int(knob);
    if (kind_ == kZstd) {
      packed = ZstdCompress(raw, level);
    } else {
      if (raw.size() > size_t(LZ4_MAX_INPUT_SIZE)) {
        return Status::InvalidArgument("lz4: frame too large");
      }
      packed.resize(size_t(LZ4_compressBound(int(raw.size()))));
      const auto* src = reinterpret_cast<const char*>(raw.data());
      auto* dst = reinterpret_cast<char*>(packed.data());
      const int n = level <= 1
                        ? LZ4_compress_default(src, dst, int(raw.size()), int(packed.size()))
                        : LZ4_compress_HC(src, dst, int(raw.size()), int(packed.size()), level);
      packed.resize(size_t(n));
    }
    ByteWriter w;
    WriteHeader(&w, kind_, frame, context.intensity);
    const size_t header = w.size();
    WriteBlock(&w, packed);
    EncodedFrame out;
    out.sections = {{"header", header}, {"points", w.size() - header}};
    out.bytes = w.Take();
    return out;
  }

  StatusOr<DecodedCloud> Decode(const std::vector<uint8_t>& bytes) override {
    ByteReader r(bytes);
    DV_ASSIGN_OR_RETURN(Header h, ReadHeader(&r, kind_, name()));
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (!ReadBlock(&r, &data, &size)) return Status::Corruption(name() + ": truncated points");
    const size_t expected = h.points * (h.intensity ? 16 : 12);
    std::vector<uint8_t> raw;
    if (kind_ == kZstd) {
      DV_ASSIGN_OR_RETURN(raw, ZstdDecompress(data, size, expected, name()));
    } else {
      raw.resize(expected);
      const int n =
          LZ4_decompress_safe(reinterpret_cast<const char*>(data),
                              reinterpret_cast<char*>(raw.data()), int(size), int(expected));
      if (n < 0 || size_t(n) != expected) return Status::Corruption("lz4: corrupt points");
    }
    return DecodedCloud{Deinterleave(raw, h.points, h.intensity), {}};
  }

 private:
  Kind kind_;
};

uint64_t ZigZag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t UnZigZag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

// Cloudini-like: every coordinate rounded to a grid of step q, so each point moves by at most
// q * sqrt(3) / 2 (half a step per axis); the point count is kept.
class GridZstdCodec : public Codec {
 public:
  std::string name() const override { return "grid+zstd"; }
  std::string knob_name() const override { return "step_m"; }
  std::vector<double> DefaultKnobs() const override {
    return {0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5};
  }

  StatusOr<EncodedFrame> Encode(const PointCloud& frame, const Pose&, const FrameContext& context,
                                double step_m) override {
    if (!(step_m > 0)) return Status::InvalidArgument("grid+zstd: step must be positive");
    ByteWriter xyz;
    std::vector<uint8_t> intensity;
    int64_t prev[3] = {0, 0, 0};
    for (size_t i = 0; i < frame.size(); ++i) {
      for (int a = 0; a < 3; ++a) {
        const double q = std::round(double(frame.xyz[i][a]) / step_m);
        // A finite float over the step stays far inside int64 for any step >= 1e-9 m.
        if (!std::isfinite(q) || std::fabs(q) > 1e15) {
          return Status::InvalidArgument("grid+zstd: coordinate out of range");
        }
        xyz.Varint(ZigZag(int64_t(q) - prev[a]));
        prev[a] = int64_t(q);
      }
      if (context.intensity) {
        const float v = std::min(1.0f, std::max(0.0f, frame.intensity[i]));
        intensity.push_back(uint8_t(std::lround(v * 255.0f)));
      }
    }
    ByteWriter w;
    WriteHeader(&w, kGrid, frame, context.intensity);
    w.F64(step_m);
    const size_t header = w.size();
    WriteBlock(&w, ZstdCompress(xyz.buffer(), 3));
    const size_t after_xyz = w.size();
    EncodedFrame out;
    out.sections = {{"header", header}, {"xyz", after_xyz - header}};
    if (context.intensity) {
      WriteBlock(&w, ZstdCompress(intensity, 3));
      out.sections.push_back({"intensity", w.size() - after_xyz});
    }
    out.bytes = w.Take();
    return out;
  }

  StatusOr<DecodedCloud> Decode(const std::vector<uint8_t>& bytes) override {
    ByteReader r(bytes);
    DV_ASSIGN_OR_RETURN(Header h, ReadHeader(&r, kGrid, name()));
    double step_m = 0;
    if (!r.F64(&step_m)) return Status::Corruption("grid+zstd: truncated step");
    if (!(step_m > 0) || !std::isfinite(step_m)) return Status::Corruption("grid+zstd: bad step");
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (!ReadBlock(&r, &data, &size)) return Status::Corruption("grid+zstd: truncated xyz");
    const unsigned long long content = ZSTD_getFrameContentSize(data, size);
    // Three varints of at most 10 bytes per point bound the block.
    if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
        content > h.points * 30) {
      return Status::Corruption("grid+zstd: bad xyz block size");
    }
    DV_ASSIGN_OR_RETURN(auto deltas, ZstdDecompress(data, size, size_t(content), "grid+zstd xyz"));
    std::vector<uint8_t> intensity;
    if (h.intensity) {
      if (!ReadBlock(&r, &data, &size)) return Status::Corruption("grid+zstd: truncated intensity");
      DV_ASSIGN_OR_RETURN(intensity, ZstdDecompress(data, size, h.points, "grid+zstd intensity"));
    }
    ByteReader d(deltas);
    DecodedCloud out;
    out.cloud.reserve(h.points);
    int64_t prev[3] = {0, 0, 0};
    for (size_t i = 0; i < h.points; ++i) {
      Eigen::Vector3f p;
      for (int a = 0; a < 3; ++a) {
        uint64_t z = 0;
        if (!d.Varint(&z)) return Status::Corruption("grid+zstd: truncated deltas");
        prev[a] += UnZigZag(z);
        p[a] = float(double(prev[a]) * step_m);
      }
      out.cloud.push_back(p, h.intensity ? float(intensity[i]) / 255.0f : 0.0f);
    }
    if (d.remaining() != 0) return Status::Corruption("grid+zstd: trailing deltas");
    return out;
  }
};

}  // namespace

std::unique_ptr<Codec> MakeZstdCodec() { return std::make_unique<RawCodec>(kZstd); }
std::unique_ptr<Codec> MakeLz4Codec() { return std::make_unique<RawCodec>(kLz4); }
std::unique_ptr<Codec> MakeGridZstdCodec() { return std::make_unique<GridZstdCodec>(); }

std::vector<std::string> AvailableCodecs() {
  std::vector<std::string> names = {"zstd", "lz4", "grid+zstd"};
  if (MakeDracoCodec()) names.push_back("draco");
  if (MakeDejaviewCodec()) names.push_back("dejaview");
  return names;
}

StatusOr<std::unique_ptr<Codec>> MakeCodec(const std::string& name) {
  std::unique_ptr<Codec> c;
  if (name == "zstd") c = MakeZstdCodec();
  if (name == "lz4") c = MakeLz4Codec();
  if (name == "grid+zstd" || name == "grid") c = MakeGridZstdCodec();
  if (name == "draco") c = MakeDracoCodec();
  if (name == "dejaview") c = MakeDejaviewCodec();
  // dejaview-rR: candidates within R metres (EncoderParams::selection_radius_m), R in [1, 1000].
  if (name.rfind("dejaview-r", 0) == 0 && name.size() > 10 && name.size() <= 14 &&
      name.find_first_not_of("0123456789", 10) == std::string::npos) {
    const int r = std::stoi(name.substr(10));
    if (r >= 1 && r <= 1000) c = MakeDejaviewCodec(r);
  }
  if (!c) {
    std::string known;
    for (const auto& n : AvailableCodecs()) known += (known.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("unknown or not built-in codec '" + name + "' (have: " + known +
                                   ")");
  }
  return c;
}

}  // namespace dv::bench
