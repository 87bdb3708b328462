// Tile file codec (docs/map-format.md). Voxels are written column by column (keys as deltas,
// then each field) so that zstd sees long runs of similar bytes.
#include <zstd.h>

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"
#include "dejaview/maps/route_map.h"

namespace dv::maps {
namespace {

constexpr char kTileMagic[4] = {'D', 'V', 'M', 'T'};
constexpr uint8_t kTileVersion = 1;
constexpr uint8_t kCompressionZstd = 1;
constexpr size_t kHeaderBytes = 4 + 1 + 1 + 8 + 12 + 4 + 4 + 4;
constexpr uint32_t kMaxTileVoxels = uint32_t(kTileVoxels) * kTileVoxels * kTileVoxels;
// A voxel's raw record is at most 3 key varint bytes + 3 + 1 + 3 + 3 bytes.
constexpr uint64_t kMaxRawPerVoxel = 13;

uint32_t LocalKey(const MapVoxel& v) {
  const int lx = v.key.x() - FloorDiv(v.key.x(), kTileVoxels) * kTileVoxels;
  const int ly = v.key.y() - FloorDiv(v.key.y(), kTileVoxels) * kTileVoxels;
  const int lz = v.key.z() - FloorDiv(v.key.z(), kTileVoxels) * kTileVoxels;
  return uint32_t(lx) << 16 | uint32_t(ly) << 8 | uint32_t(lz);
}

}  // namespace

std::vector<uint8_t> EncodeTile(const VoxelKey& tile, double resolution_m,
                                const std::vector<MapVoxel>& sorted_voxels) {
  ByteWriter raw;
  uint32_t prev = 0;
  for (const MapVoxel& v : sorted_voxels) {
    const uint32_t k = LocalKey(v);
    raw.Varint(k - prev);
    prev = k;
  }
  for (int axis = 0; axis < 3; ++axis) {
    for (const MapVoxel& v : sorted_voxels) raw.U8(v.q[axis]);
  }
  for (const MapVoxel& v : sorted_voxels) raw.U8(v.intensity);
  for (const MapVoxel& v : sorted_voxels) raw.Varint(v.hits);
  for (const MapVoxel& v : sorted_voxels) raw.Varint(v.seen_through);
  std::vector<uint8_t> body(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress(body.data(), body.size(), raw.buffer().data(), raw.size(), 19);
  body.resize(n);  // ZSTD_compress cannot fail with a compressBound-sized output

  ByteWriter w;
  w.Bytes(kTileMagic, 4);
  w.U8(kTileVersion);
  w.U8(kCompressionZstd);
  w.F64(resolution_m);
  for (int a = 0; a < 3; ++a) w.U32(uint32_t(tile[a]));
  w.U32(uint32_t(sorted_voxels.size()));
  w.U32(uint32_t(raw.size()));
  w.U32(uint32_t(body.size()));
  w.Bytes(body.data(), body.size());
  w.U32(crc32c::Mask(crc32c::Value(w.buffer().data(), w.size())));
  return w.Take();
}

StatusOr<std::vector<MapVoxel>> DecodeTile(const uint8_t* data, size_t size,
                                           const std::string& name, double resolution_m,
                                           const VoxelKey& tile) {
  auto bad = [&](const std::string& what) { return Status::Corruption(name + ": " + what); };
  if (size < kHeaderBytes + 4) return bad("truncated tile (" + std::to_string(size) + " bytes)");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data + size - 4, 4);
  if (crc32c::Unmask(stored_crc) != crc32c::Value(data, size - 4)) return bad("checksum mismatch");
  ByteReader r(data, size - 4);
  char magic[4] = {};
  uint8_t version = 0, compression = 0;
  double res = 0;
  uint32_t t[3] = {}, count = 0, raw_size = 0, body_size = 0;
  r.Bytes(magic, 4);
  r.U8(&version);
  r.U8(&compression);
  r.F64(&res);
  for (uint32_t& v : t) r.U32(&v);
  r.U32(&count);
  r.U32(&raw_size);
  r.U32(&body_size);
  if (std::memcmp(magic, kTileMagic, 4) != 0) return bad("not a dejaview map tile (bad magic)");
  if (version != kTileVersion) return bad("unsupported tile version " + std::to_string(version));
  if (compression != kCompressionZstd)
    return bad("unknown compression " + std::to_string(compression));
  if (res != resolution_m) return bad("resolution differs from the manifest");
  for (int a = 0; a < 3; ++a) {
    if (int(t[a]) != tile[a]) return bad("tile key differs from its file name");
  }
  if (count > kMaxTileVoxels) return bad("voxel count " + std::to_string(count) + " too large");
  if (raw_size > count * kMaxRawPerVoxel) return bad("raw size inconsistent with voxel count");
  if (body_size != r.remaining()) return bad("body length " + std::to_string(body_size) + " wrong");
  std::vector<uint8_t> raw(raw_size);
  const size_t got = ZSTD_decompress(raw.data(), raw.size(), r.position(), body_size);
  if (ZSTD_isError(got) || got != raw_size) return bad("compressed body does not decompress");

  ByteReader b(raw);
  std::vector<MapVoxel> voxels(count);
  uint64_t key = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t d;
    if (!b.Varint(&d)) return bad("truncated keys");
    if (i > 0 && d == 0) return bad("voxel keys not strictly increasing");
    key += d;
    if (key >= kMaxTileVoxels) return bad("voxel key outside its tile");
    voxels[i].key = VoxelKey(tile.x() * kTileVoxels + int(key >> 16),
                             tile.y() * kTileVoxels + int((key >> 8) & 0xff),
                             tile.z() * kTileVoxels + int(key & 0xff));
  }
  for (int axis = 0; axis < 3; ++axis) {
    for (MapVoxel& v : voxels) b.U8(&v.q[axis]);
  }
  for (MapVoxel& v : voxels) b.U8(&v.intensity);
  for (int field = 0; field < 2; ++field) {
    for (MapVoxel& v : voxels) {
      uint64_t x = 0;
      if (!b.Varint(&x) || x > 0xffff) return bad("bad observation count");
      (field == 0 ? v.hits : v.seen_through) = uint16_t(x);
    }
  }
  if (b.failed()) return bad("truncated voxel fields");
  if (b.remaining() != 0) return bad("trailing bytes after voxel fields");
  return voxels;
}

}  // namespace dv::maps
