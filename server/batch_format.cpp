#include "dejaview/server/batch_format.h"

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"
#include "dejaview/base/kitti.h"

namespace dv::server {
namespace {

constexpr size_t kMaxNameBytes = 128;  // as transport's record names

// Zero bytes that take a file offset to the next multiple of kBatchPointAlignment.
size_t PaddingAt(size_t file_offset) {
  return (kBatchPointAlignment - file_offset % kBatchPointAlignment) % kBatchPointAlignment;
}

// The file offsets where a batch's first frame's bytes start and where a later one's may start
// (its predecessor's points end on a multiple of kBatchPointAlignment, then length and CRC).
constexpr size_t kFirstFrameOffset = 12 + 8;
constexpr size_t kLaterFrameOffset = kBatchPointAlignment + 8;

// The frame's bytes before its points, padding included, for a frame starting at body_offset.
void EncodeFrameHead(const BatchFrameHeader& f, uint32_t points, size_t body_offset,
                     ByteWriter* w) {
  w->Str(f.vehicle);
  w->Str(f.drive);
  w->U32(f.sensor_id);
  w->U64(f.sequence);
  w->I64(f.timestamp_ns);
  w->Str(f.map_version);
  const Eigen::Matrix<double, 3, 4> m = f.T_map_sensor.matrix().topRows<3>();
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) w->F64(m(r, c));
  }
  w->U32(points);
  for (size_t pad = PaddingAt(body_offset + w->size()); pad > 0; --pad) w->U8(0);
}

// r reads one frame's body inside file (the padding depends on where it lies in the file).
StatusOr<BatchFrameView> ParseFrame(ByteReader* r, const uint8_t* file, const std::string& what) {
  BatchFrameView f;
  double m[12] = {};
  r->Str(&f.vehicle, kMaxNameBytes);
  r->Str(&f.drive, kMaxNameBytes);
  r->U32(&f.sensor_id);
  r->U64(&f.sequence);
  r->I64(&f.timestamp_ns);
  r->Str(&f.map_version, kMaxNameBytes);
  for (double& v : m) r->F64(&v);
  if (!r->U32(&f.points)) return Status::Corruption(what + ": truncated header");
  for (size_t pad = PaddingAt(size_t(r->position() - file)); pad > 0; --pad) {
    uint8_t zero = 0;
    if (!r->U8(&zero) || zero != 0) {
      return Status::Corruption(what + ": bad padding before the points at offset " +
                                std::to_string(r->position() - file - 1));
    }
  }
  if (uint64_t(f.points) * 16 != r->remaining()) {
    return Status::Corruption(what + ": " + std::to_string(f.points) + " points need " +
                              std::to_string(uint64_t(f.points) * 16) + " bytes, frame has " +
                              std::to_string(r->remaining()));
  }
  f.points_offset = size_t(r->position() - file);
  for (int row = 0; row < 3; ++row) {
    for (int c = 0; c < 4; ++c) f.T_map_sensor.matrix()(row, c) = m[row * 4 + c];
  }
  return f;
}

BatchFrame CopyFrame(const BatchFrameView& view, const uint8_t* file) {
  BatchFrame f;
  static_cast<BatchFrameHeader&>(f) = view;
  ByteReader r(file + view.points_offset, size_t(view.points) * 16);
  f.cloud.reserve(view.points);
  for (uint32_t i = 0; i < view.points; ++i) {
    float v[4] = {0, 0, 0, 0};
    for (float& x : v) r.F32(&x);
    f.cloud.push_back(Eigen::Vector3f(v[0], v[1], v[2]), v[3]);
  }
  return f;
}

}  // namespace

EncodedBatchFrame EncodeBatchFrame(const BatchFrameHeader& header, const std::vector<uint8_t>& rows,
                                   bool first) {
  ByteWriter body;
  EncodeFrameHead(header, uint32_t(rows.size() / 16), first ? kFirstFrameOffset : kLaterFrameOffset,
                  &body);
  const uint32_t crc =
      crc32c::Extend(crc32c::Value(body.buffer().data(), body.size()), rows.data(), rows.size());
  ByteWriter w;
  w.U32(uint32_t(body.size() + rows.size()));
  w.U32(crc32c::Mask(crc));
  w.Bytes(body.buffer().data(), body.size());
  return EncodedBatchFrame{w.Take(), first};
}

std::vector<uint8_t> EncodeBatchHeader(uint32_t frames) {
  ByteWriter w;
  w.U32(kBatchMagic);
  w.U32(kBatchVersion);
  w.U32(frames);
  return w.Take();
}

std::vector<uint8_t> EncodeBatch(const std::vector<BatchFrame>& frames) {
  std::vector<uint8_t> out = EncodeBatchHeader(uint32_t(frames.size()));
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::vector<uint8_t> rows = EncodeKittiBin(frames[i].cloud);
    const EncodedBatchFrame f = EncodeBatchFrame(frames[i], rows, i == 0);
    out.insert(out.end(), f.head.begin(), f.head.end());
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

StatusOr<std::vector<BatchFrameView>> ParseBatch(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  uint32_t magic = 0, version = 0, count = 0;
  r.U32(&magic);
  r.U32(&version);
  if (!r.U32(&count)) return Status::Corruption("batch: truncated header");
  if (magic != kBatchMagic) return Status::Corruption("batch: bad magic (not a DVXB file)");
  if (version != kBatchVersion) {
    return Status::Corruption("batch: version " + std::to_string(version) + ", expected " +
                              std::to_string(kBatchVersion));
  }
  if (count > kMaxBatchFrames) {
    return Status::Corruption("batch: frame count " + std::to_string(count) + " over " +
                              std::to_string(kMaxBatchFrames));
  }
  std::vector<BatchFrameView> frames;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string what = "batch: frame " + std::to_string(i);
    uint32_t length = 0, crc = 0;
    r.U32(&length);
    if (!r.U32(&crc)) return Status::Corruption(what + ": truncated frame header");
    const uint8_t* body = nullptr;
    if (length > kMaxBatchFrameBytes || !r.View(&body, length)) {
      return Status::Corruption(what + ": length " + std::to_string(length) + " past the end");
    }
    if (crc32c::Unmask(crc) != crc32c::Value(body, length)) {
      return Status::Corruption(what + ": CRC mismatch");
    }
    ByteReader fr(body, length);
    DV_ASSIGN_OR_RETURN(BatchFrameView f, ParseFrame(&fr, data, what));
    frames.push_back(std::move(f));
  }
  if (r.remaining() != 0) {
    return Status::Corruption("batch: " + std::to_string(r.remaining()) + " trailing bytes");
  }
  return frames;
}

StatusOr<std::vector<BatchFrame>> DecodeBatch(const uint8_t* data, size_t size) {
  DV_ASSIGN_OR_RETURN(const std::vector<BatchFrameView> views, ParseBatch(data, size));
  std::vector<BatchFrame> frames;
  frames.reserve(views.size());
  for (const BatchFrameView& v : views) frames.push_back(CopyFrame(v, data));
  return frames;
}

}  // namespace dv::server
