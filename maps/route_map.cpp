#include "dejaview/maps/route_map.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <sstream>

#include <zstd.h>

#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/hex.h"
#include "manifest.h"

namespace dv::maps {
namespace {

// Version 2 adds the codec_priors line.
constexpr int kManifestVersion = 1, kManifestPriors = 2;
constexpr size_t kMaxTiles = size_t(1) << 20;
// Tile keys beyond this would overflow int voxel keys (tile * 256 + 255).
constexpr int kMaxTileKey = 1 << 22;

std::array<int, 3> A(const VoxelKey& k) { return {k.x(), k.y(), k.z()}; }

}  // namespace

std::string TileFileName(const VoxelKey& tile) {
  return "tiles/" + std::to_string(tile.x()) + "_" + std::to_string(tile.y()) + "_" +
         std::to_string(tile.z()) + ".dvt";
}

std::string FormatManifest(double resolution_m, const std::vector<TileInfo>& tiles,
                           const std::vector<uint8_t>& codec_priors) {
  const bool priors = !codec_priors.empty();
  std::string s =
      "dejaview-map " + std::to_string(priors ? kManifestPriors : kManifestVersion) + "\n";
  char line[160];
  std::snprintf(line, sizeof(line), "resolution_m %.17g\ntile_voxels %d\ntiles %zu\n", resolution_m,
                kTileVoxels, tiles.size());
  s += line;
  for (const TileInfo& t : tiles) {
    std::snprintf(line, sizeof(line), "tile %d %d %d %u %" PRIu64 " %08x\n", t.tile.x(), t.tile.y(),
                  t.tile.z(), t.voxels, t.bytes, t.crc32c);
    s += line;
  }
  if (priors) {
    // zstd, then hex: the manifest stays text. Unused contexts keep one starting state, so the
    // priors compress several times over.
    std::vector<uint8_t> z(ZSTD_compressBound(codec_priors.size()));
    z.resize(ZSTD_compress(z.data(), z.size(), codec_priors.data(), codec_priors.size(), 19));
    s += "codec_priors " + std::to_string(codec_priors.size()) + " " +
         HexEncode(z.data(), z.size()) + "\n";
  }
  std::snprintf(line, sizeof(line), "end %08x\n", crc32c::Value(s.data(), s.size()));
  return s + line;
}

uint64_t ManifestHash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

Status ParseManifest(const std::string& text, const std::string& name, double* resolution_m,
                     std::vector<TileInfo>* tiles, std::vector<uint8_t>* codec_priors) {
  auto bad = [&](const std::string& what) { return Status::Corruption(name + ": " + what); };
  const size_t end = text.rfind("end ");
  if (end == std::string::npos || (end > 0 && text[end - 1] != '\n')) {
    return bad("no end line (truncated manifest)");
  }
  unsigned crc = 0;
  if (std::sscanf(text.c_str() + end, "end %8x", &crc) != 1 ||
      crc != crc32c::Value(text.data(), end)) {
    return bad("manifest checksum mismatch");
  }
  std::istringstream in(text.substr(0, end));
  std::string word;
  int version = 0, tile_voxels = 0;
  size_t count = 0;
  if (!(in >> word >> version) || word != "dejaview-map") return bad("not a dejaview map manifest");
  if (version != kManifestVersion && version != kManifestPriors) {
    return bad("unsupported map version " + std::to_string(version));
  }
  if (!(in >> word >> *resolution_m) || word != "resolution_m" || !(*resolution_m > 0.001) ||
      !(*resolution_m < 100)) {
    return bad("bad resolution_m");
  }
  if (!(in >> word >> tile_voxels) || word != "tile_voxels" || tile_voxels != kTileVoxels) {
    return bad("bad tile_voxels");
  }
  if (!(in >> word >> count) || word != "tiles" || count > kMaxTiles) return bad("bad tile count");
  tiles->clear();
  for (size_t i = 0; i < count; ++i) {
    TileInfo t;
    int x, y, z;
    std::string hex;
    if (!(in >> word >> x >> y >> z >> t.voxels >> t.bytes >> hex) || word != "tile" ||
        hex.size() != 8) {
      return bad("bad tile line " + std::to_string(i + 1));
    }
    if (std::abs(x) > kMaxTileKey || std::abs(y) > kMaxTileKey || std::abs(z) > kMaxTileKey) {
      return bad("tile key out of range on line " + std::to_string(i + 1));
    }
    t.tile = VoxelKey(x, y, z);
    t.crc32c = uint32_t(std::stoul(hex, nullptr, 16));
    if (!tiles->empty() && !KeyLess(tiles->back().tile, t.tile)) {
      return bad("tiles not in increasing key order");
    }
    tiles->push_back(t);
  }
  if (codec_priors) codec_priors->clear();
  if (version == kManifestPriors) {
    size_t raw = 0;
    std::string hex;
    if (!(in >> word >> raw >> hex) || word != "codec_priors") return bad("bad codec_priors line");
    if (raw == 0 || raw > kMaxCodecPriorsBytes) return bad("codec_priors: bad size");
    if (hex.size() % 2 != 0 || hex.size() / 2 > ZSTD_compressBound(raw)) {
      return bad("codec_priors: bad length");
    }
    std::vector<uint8_t> z(hex.size() / 2);
    if (!HexDecode(hex, z.data())) return bad("codec_priors: not hex");
    std::vector<uint8_t> out(raw);
    const size_t got = ZSTD_decompress(out.data(), out.size(), z.data(), z.size());
    if (ZSTD_isError(got) || got != raw) return bad("codec_priors: does not decompress");
    if (codec_priors) *codec_priors = std::move(out);
  }
  if (in >> word) return bad("unexpected '" + word.substr(0, 32) + "' before the end line");
  return Status::Ok();
}

uint64_t RouteMap::disk_bytes() const {
  uint64_t n = manifest_bytes_;
  for (const TileInfo& t : tiles_) n += t.bytes;
  return n;
}

StatusOr<std::unique_ptr<RouteMap>> OpenMap(const std::string& dir, size_t memory_budget_bytes) {
  const std::string path = dir + "/MANIFEST";
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, kMaxManifestBytes));
  auto map = std::unique_ptr<RouteMap>(new RouteMap());
  DV_RETURN_IF_ERROR(
      ParseManifest(text, path, &map->resolution_m_, &map->tiles_, &map->codec_priors_));
  map->dir_ = dir;
  map->budget_bytes_ = memory_budget_bytes;
  map->version_id_ = ManifestHash(text);
  map->manifest_bytes_ = text.size();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, map->version_id_);
  map->version_ = hex;
  for (size_t i = 0; i < map->tiles_.size(); ++i) {
    map->tile_index_[A(map->tiles_[i].tile)] = i;
    map->voxel_count_ += map->tiles_[i].voxels;
  }
  return map;
}

StatusOr<RouteMap::Loaded*> RouteMap::Tile(const VoxelKey& tile) {
  auto it = loaded_.find(A(tile));
  if (it == loaded_.end()) {
    const auto idx = tile_index_.find(A(tile));
    if (idx == tile_index_.end()) return static_cast<Loaded*>(nullptr);
    const TileInfo& info = tiles_[idx->second];
    const std::string path = dir_ + "/" + TileFileName(tile);
    DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path, info.bytes));
    if (bytes.size() != info.bytes || crc32c::Value(bytes.data(), bytes.size()) != info.crc32c) {
      return Status::Corruption(path + ": tile does not match the manifest (size or checksum)");
    }
    DV_ASSIGN_OR_RETURN(std::vector<MapVoxel> voxels,
                        DecodeTile(bytes.data(), bytes.size(), path, resolution_m_, tile));
    if (voxels.size() != info.voxels) {
      return Status::Corruption(path + ": voxel count differs from the manifest");
    }
    memory_bytes_ += voxels.size() * sizeof(MapVoxel);
    it = loaded_.emplace(A(tile), Loaded{std::move(voxels), 0}).first;
  }
  it->second.last_use = ++clock_;
  return &it->second;
}

void RouteMap::Evict(const VoxelKey& keep_lo, const VoxelKey& keep_hi) {
  while (budget_bytes_ > 0 && memory_bytes_ > budget_bytes_) {
    auto victim = loaded_.end();
    for (auto it = loaded_.begin(); it != loaded_.end(); ++it) {
      const auto& k = it->first;
      const bool kept = k[0] >= keep_lo.x() && k[0] <= keep_hi.x() && k[1] >= keep_lo.y() &&
                        k[1] <= keep_hi.y() && k[2] >= keep_lo.z() && k[2] <= keep_hi.z();
      if (!kept && (victim == loaded_.end() || it->second.last_use < victim->second.last_use)) {
        victim = it;
      }
    }
    if (victim == loaded_.end()) return;  // everything left is needed by this call
    memory_bytes_ -= victim->second.voxels.size() * sizeof(MapVoxel);
    loaded_.erase(victim);
  }
}

Status RouteMap::CollectBox(const VoxelKey& lo, const VoxelKey& hi, std::vector<MapVoxel>* out) {
  const VoxelKey tlo = TileOf(lo), thi = TileOf(hi);
  // Walk the manifest's tiles (sorted) inside the tile box: canonical order by construction.
  for (const TileInfo& info : tiles_) {
    const VoxelKey& t = info.tile;
    if ((t.array() < tlo.array()).any() || (t.array() > thi.array()).any()) continue;
    DV_ASSIGN_OR_RETURN(Loaded * tile, Tile(t));
    const std::vector<MapVoxel>& vs = tile->voxels;
    const VoxelKey first = t * kTileVoxels, last = first.array() + (kTileVoxels - 1);
    if ((first.array() >= lo.array()).all() && (last.array() <= hi.array()).all()) {
      out->insert(out->end(), vs.begin(), vs.end());  // the whole tile is inside: one copy
      continue;
    }
    for (const MapVoxel& v : vs) {
      if ((v.key.array() >= lo.array()).all() && (v.key.array() <= hi.array()).all()) {
        out->push_back(v);
      }
    }
  }
  Evict(tlo, thi);
  return Status::Ok();
}

Status RouteMap::CollectBall(const VoxelKey& centre, int reach, std::vector<MapVoxel>* out) {
  const VoxelKey lo = centre.array() - reach, hi = centre.array() + reach;
  const VoxelKey tlo = TileOf(lo), thi = TileOf(hi);
  const int64_t r2 = int64_t(reach) * reach;
  // Squared distances from the centre to the nearest and the farthest key of a tile, per axis.
  auto axis = [&](int32_t first, int32_t c, int64_t* nearest, int64_t* farthest) {
    const int64_t a = int64_t(first) - c, b = a + kTileVoxels - 1;
    const int64_t n = a > 0 ? a : b < 0 ? -b : 0;
    *nearest += n * n;
    *farthest += std::max(a * a, b * b);
  };
  // The tiles the ball reaches, loaded (and checked) first, then room for all their voxels at
  // once: grown push by push, the array is copied to fresh pages at each doubling (a ball holds
  // hundreds of thousands of voxels on a fine map). std::map keeps the loaded tiles in place until
  // Evict.
  std::vector<std::pair<const Loaded*, bool>> reached;  // (tile, wholly inside)
  size_t most = out->size();
  for (const TileInfo& info : tiles_) {
    const VoxelKey& t = info.tile;
    if ((t.array() < tlo.array()).any() || (t.array() > thi.array()).any()) continue;
    const VoxelKey first = t * kTileVoxels;
    int64_t nearest = 0, farthest = 0;
    for (int a = 0; a < 3; ++a) axis(first[a], centre[a], &nearest, &farthest);
    if (nearest > r2) continue;  // the tile's keys all lie outside: not even loaded
    DV_ASSIGN_OR_RETURN(Loaded * tile, Tile(t));
    reached.emplace_back(tile, farthest <= r2);
    most += tile->voxels.size();
  }
  out->reserve(most);
  for (const auto& [tile, inside] : reached) {
    const std::vector<MapVoxel>& vs = tile->voxels;
    if (inside) {
      out->insert(out->end(), vs.begin(), vs.end());  // the whole tile is inside: one copy
      continue;
    }
    for (const MapVoxel& v : vs) {
      const Eigen::Matrix<int64_t, 3, 1> d = (v.key - centre).cast<int64_t>();
      if (d.squaredNorm() <= r2) out->push_back(v);
    }
  }
  Evict(tlo, thi);
  return Status::Ok();
}

Status RouteMap::LoadAround(const Eigen::Vector3d& p_map, double radius_m) {
  const Eigen::Vector3d r = Eigen::Vector3d::Constant(radius_m);
  const VoxelKey tlo = TileOf(KeyOf(p_map - r, resolution_m_));
  const VoxelKey thi = TileOf(KeyOf(p_map + r, resolution_m_));
  for (const TileInfo& info : tiles_) {
    const VoxelKey& t = info.tile;
    if ((t.array() < tlo.array()).any() || (t.array() > thi.array()).any()) continue;
    DV_RETURN_IF_ERROR(Tile(t).status());
  }
  Evict(tlo, thi);
  return Status::Ok();
}

Status RouteMap::RadiusSearch(const Eigen::Vector3d& p, double radius_m,
                              std::vector<MapVoxel>* out) {
  // A representative lies inside its voxel, so any within radius has a key in this box.
  const Eigen::Vector3d r = Eigen::Vector3d::Constant(radius_m);
  std::vector<MapVoxel> box;
  DV_RETURN_IF_ERROR(CollectBox(KeyOf(p - r, resolution_m_), KeyOf(p + r, resolution_m_), &box));
  for (const MapVoxel& v : box) {
    if ((Representative(v, resolution_m_) - p).norm() <= radius_m) out->push_back(v);
  }
  return Status::Ok();
}

Status SetCodecPriors(const std::string& dir, const std::vector<uint8_t>& codec_priors) {
  if (codec_priors.empty() || codec_priors.size() > kMaxCodecPriorsBytes) {
    return Status::InvalidArgument("codec priors: " + std::to_string(codec_priors.size()) +
                                   " bytes (1.." + std::to_string(kMaxCodecPriorsBytes) + ")");
  }
  const std::string path = dir + "/MANIFEST";
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, kMaxManifestBytes));
  double res = 0;
  std::vector<TileInfo> tiles;
  DV_RETURN_IF_ERROR(ParseManifest(text, path, &res, &tiles));
  const std::string next = FormatManifest(res, tiles, codec_priors);
  return WriteFileAtomic(path, next.data(), next.size());
}

}  // namespace dv::maps
