// BuildMap: accumulate every source frame into a voxel hash (KISS-ICP style), then count for each
// voxel the frames whose beams passed clearly beyond it (seen through), drop the transient ones,
// and write tiles and the manifest.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"
#include "dejaview/maps/route_map.h"
#include "manifest.h"

namespace dv::maps {
namespace {

// Angular grid of one source frame, fine enough for an HDL-64E (0.4 deg rows, 0.35 deg columns):
// each cell keeps the nearest return in its direction.
class RangeImage {
 public:
  static constexpr int kCols = 1024, kRows = 80;
  static constexpr double kElevMin = -0.45, kElevMax = 0.11;  // radians

  RangeImage() : near_(kCols * kRows, kEmpty) {}
  static bool Cell(const Eigen::Vector3d& p, int* row, int* col) {
    const double rxy = std::hypot(p.x(), p.y());
    const double elev = PortableAtan2(p.z(), rxy);
    const double az = PortableAtan2(p.y(), p.x());
    *row = int((elev - kElevMin) / (kElevMax - kElevMin) * kRows);
    *col = int((az + M_PI) / (2 * M_PI) * kCols) % kCols;
    return *row >= 0 && *row < kRows;
  }
  void Add(const Eigen::Vector3d& p) {
    int row, col;
    if (Cell(p, &row, &col)) {
      float& n = near_[row * kCols + col];
      n = std::min(n, float(p.norm()));
    }
  }
  // The nearest return over the 3x3 cells around each cell: a voxel counts as seen through only
  // when every beam near its direction went beyond it (grazing ground and edges do not).
  void Erode() {
    std::vector<float> e(near_.size(), kEmpty);
    for (int r = 0; r < kRows; ++r) {
      for (int c = 0; c < kCols; ++c) {
        float m = kEmpty;
        for (int dr = -1; dr <= 1; ++dr) {
          for (int dc = -1; dc <= 1; ++dc) {
            const int rr = r + dr, cc = (c + dc + kCols) % kCols;
            if (rr >= 0 && rr < kRows) m = std::min(m, near_[rr * kCols + cc]);
          }
        }
        e[r * kCols + c] = m;
      }
    }
    near_ = std::move(e);
  }
  // Range of the nearest return around p's direction; kEmpty where nothing came back.
  float Free(const Eigen::Vector3d& p) const {
    int row, col;
    return Cell(p, &row, &col) ? near_[row * kCols + col] : kEmpty;
  }
  static constexpr float kEmpty = 1e30f;

 private:
  std::vector<float> near_;
};

struct Accum {
  double sum[3] = {0, 0, 0};
  double intensity = 0;
  uint32_t points = 0;
  uint32_t hits = 0;
  uint32_t seen_through = 0;
  int64_t last_frame = -1;
};

// 21 bits per axis: voxel keys within +-2^20 (e.g. +-210 km at 0.2 m).
constexpr int kKeyBias = 1 << 20;
uint64_t Pack(const VoxelKey& k) {
  return uint64_t(k.x() + kKeyBias) << 42 | uint64_t(k.y() + kKeyBias) << 21 |
         uint64_t(k.z() + kKeyBias);
}
VoxelKey Unpack(uint64_t p) {
  return VoxelKey(int(p >> 42) - kKeyBias, int((p >> 21) & 0x1fffff) - kKeyBias,
                  int(p & 0x1fffff) - kKeyBias);
}

struct Source {
  Pose T_map_sensor;
  RangeImage image;
};

}  // namespace

Status BuildMap(const std::vector<Drive>& drives, const BuildOptions& opt,
                const std::string& out_dir, BuildReport* report) {
  if (!(opt.resolution_m >= 0.01 && opt.resolution_m <= 10)) {
    return Status::InvalidArgument("resolution_m must be in [0.01, 10] m");
  }
  if (opt.every < 1) return Status::InvalidArgument("every must be >= 1");
  const double res = opt.resolution_m;
  std::vector<std::pair<const Drive*, size_t>> frames;
  for (const Drive& d : drives) {
    if (d.poses.size() != d.size()) {
      return Status::InvalidArgument(d.root + ": a map needs poses.txt with one pose per frame");
    }
    for (size_t i = 0; i < d.size(); i += size_t(opt.every)) frames.emplace_back(&d, i);
  }
  if (frames.empty()) return Status::InvalidArgument("no source frames");

  std::unordered_map<uint64_t, Accum> voxels;
  std::vector<Source> sources(frames.size());
  for (size_t f = 0; f < frames.size(); ++f) {
    const Drive& d = *frames[f].first;
    const size_t i = frames[f].second;
    DV_ASSIGN_OR_RETURN(PointCloud cloud, ReadPointCloudFile(d.frame_paths[i]));
    RemoveNonFinite(&cloud);
    sources[f].T_map_sensor = d.poses[i];
    for (size_t j = 0; j < cloud.size(); ++j) {
      const Eigen::Vector3d ps = cloud.xyz[j].cast<double>();
      const double range = ps.norm();
      if (range < opt.min_range_m || range > opt.max_range_m) continue;
      sources[f].image.Add(ps);
      const Eigen::Vector3d pm = d.poses[i] * ps;
      const VoxelKey k = KeyOf(pm, res);
      if ((k.array().abs() >= kKeyBias).any()) {
        return Status::InvalidArgument(d.frame_paths[i] + ": point beyond the map's key range");
      }
      Accum& a = voxels[Pack(k)];
      for (int ax = 0; ax < 3; ++ax) a.sum[ax] += pm[ax];
      a.intensity += cloud.intensity[j];
      ++a.points;
      if (a.last_frame != int64_t(f)) {
        a.last_frame = int64_t(f);
        ++a.hits;
      }
    }
    sources[f].image.Erode();
    if (opt.progress) opt.progress(f + 1, 2 * frames.size());
  }

  // Each source frame tests only the voxels within its range: voxels are bucketed in cubes of
  // kBucketM, and a bucket whose box lies beyond max_range_m of the sensor holds no voxel the test
  // would count. Without it the pass is O(frames x voxels), hours for a long drive's map.
  constexpr double kBucketM = 16;
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, Accum*>>> buckets;
  for (auto& [packed, a] : voxels) {
    const Eigen::Vector3d c = (Unpack(packed).cast<double>().array() + 0.5) * res;
    buckets[Pack(KeyOf(c, kBucketM))].emplace_back(packed, &a);
  }
  const double margin = 0.5 + 2 * res;
  for (size_t f = 0; f < sources.size(); ++f) {
    const Pose T_sensor_map = sources[f].T_map_sensor.inverse();
    const Eigen::Vector3d origin = sources[f].T_map_sensor.translation();
    for (const auto& [bucket, members] : buckets) {
      // Distance from the sensor to the bucket's box, less a millimetre for rounding.
      const Eigen::Vector3d lo = Unpack(bucket).cast<double>() * kBucketM;
      const Eigen::Vector3d gap =
          (lo - origin).cwiseMax(origin - lo - Eigen::Vector3d::Constant(kBucketM));
      if (gap.cwiseMax(0.0).norm() - 1e-3 > opt.max_range_m) continue;
      for (const auto& [packed, a] : members) {
        const Eigen::Vector3d c = (Unpack(packed).cast<double>().array() + 0.5) * res;
        const Eigen::Vector3d ps = T_sensor_map * c;
        const double range = ps.norm();
        if (range > opt.max_range_m) continue;
        if (sources[f].image.Free(ps) < RangeImage::kEmpty &&
            sources[f].image.Free(ps) > range + margin) {
          ++a->seen_through;
        }
      }
    }
    if (opt.progress) opt.progress(frames.size() + f + 1, 2 * frames.size());
  }

  std::map<std::array<int, 3>, std::vector<MapVoxel>> tiles;
  BuildReport rep;
  rep.frames = frames.size();
  for (const Drive& d : drives) {
    double length = 0;
    for (size_t i = size_t(opt.every); i < d.size(); i += size_t(opt.every)) {
      length += (d.poses[i].translation() - d.poses[i - size_t(opt.every)].translation()).norm();
    }
    rep.route_m = std::max(rep.route_m, length);
  }
  rep.voxels_seen = voxels.size();
  for (const auto& [packed, a] : voxels) {
    if (opt.drop_transient && a.seen_through >= a.hits) {
      ++rep.voxels_dropped;
      continue;
    }
    MapVoxel v;
    v.key = Unpack(packed);
    for (int ax = 0; ax < 3; ++ax) {
      const double local = a.sum[ax] / a.points / res - v.key[ax];
      v.q[ax] = uint8_t(std::clamp(int(std::floor(local * 256)), 0, 255));
    }
    v.intensity = uint8_t(std::clamp(std::lround(a.intensity / a.points * 255), 0L, 255L));
    v.hits = uint16_t(std::min<uint32_t>(a.hits, 0xffff));
    v.seen_through = uint16_t(std::min<uint32_t>(a.seen_through, 0xffff));
    const VoxelKey t = TileOf(v.key);
    tiles[{t.x(), t.y(), t.z()}].push_back(v);
  }

  DV_RETURN_IF_ERROR(MakeDirs(out_dir + "/tiles"));
  std::vector<TileInfo> infos;
  for (auto& [t, vs] : tiles) {
    std::sort(vs.begin(), vs.end(),
              [](const MapVoxel& a, const MapVoxel& b) { return KeyLess(a.key, b.key); });
    TileInfo info;
    info.tile = VoxelKey(t[0], t[1], t[2]);
    info.voxels = uint32_t(vs.size());
    const std::vector<uint8_t> bytes = EncodeTile(info.tile, res, vs);
    info.bytes = bytes.size();
    info.crc32c = crc32c::Value(bytes.data(), bytes.size());
    DV_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/" + TileFileName(info.tile), bytes));
    infos.push_back(info);
    rep.voxels_kept += vs.size();
  }
  rep.tiles = infos.size();
  // The manifest is written last: a crash mid-build leaves no manifest naming missing tiles.
  DV_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/MANIFEST", FormatManifest(res, infos)));
  if (report) *report = rep;
  return Status::Ok();
}

}  // namespace dv::maps
