// The candidates: the map voxels within a radius of the frame's pose, in canonical map order,
// each with its representative in the sensor frame and its static context, and their causal
// neighbours. Encoder and decoder derive them from (map, quantised pose, radius) alone, with
// integer voxel arithmetic and IEEE double arithmetic free of libm calls, so they agree on any
// machine (docs/delta-format.md, "Map section").
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/codec/range_coder.h"
#include "dejaview/maps/route_map.h"
#include "voxel_hash.h"

namespace dv::codec {

class HotPaths;  // hot_paths.h
namespace cpu {
struct Kernels;  // cpu/kernels.h
}  // namespace cpu

struct Candidates {
  double resolution_m = 0;
  std::vector<maps::MapVoxel> voxels;   // canonical map order
  std::vector<Eigen::Vector3f> sensor;  // each representative in the sensor frame, as decoded
  std::vector<uint8_t> context;         // visibility x range x persistence, per candidate
  std::vector<int32_t> cell;            // angular cell of each candidate, -1 outside the grid
  VoxelHash index{0};                   // voxel key -> candidate index (encoder only)
  // The ball the voxels were taken from: keys within `reach` voxels of `centre` (-1: none).
  maps::VoxelKey centre = maps::VoxelKey::Zero();
  int reach = -1;
};

// The static contexts: visibility x range x persistence (docs/delta-format.md).
constexpr int kStaticContexts = 64;

// The angular grid of the visibility context: cell = row * kAngularCols + column.
constexpr int kAngularCols = 1024;
// The grid column of a point in the sensor frame, by the rule DeriveCandidates projects with.
int AngularColumn(const Eigen::Vector3f& p_sensor);

// Rotation matrix of a unit quaternion by explicit products (no libm): both sides use this.
Eigen::Matrix3d RotationOf(const Eigen::Vector4d& wxyz);

// Candidates: map voxels with |key - key(sensor)| <= ceil(radius / resolution) + 1 voxels.
// `parts` says what to fill beyond voxels: the decoder never looks a key up, and registration
// needs neither the sensor-frame positions nor the contexts. The index and the projection are
// hot paths of `hot`; the projection runs on up to `threads` threads, with the same result.
enum CandidateParts : unsigned { kCandidateIndex = 1, kCandidateProjection = 2 };
Status DeriveCandidates(const HotPaths& hot, maps::RouteMap* map,
                        const Eigen::Matrix3d& R_map_sensor, const Eigen::Vector3d& t_map_sensor,
                        double radius_m, Candidates* out,
                        unsigned parts = kCandidateIndex | kCandidateProjection, int threads = 1);
// The same, taken from `around` (candidates of another ball, voxels only read; may be null)
// where its ball holds this one: its voxels in its order that fall in this ball, which are this
// ball's map voxels in canonical order, without reading the map. *kept[i] is then the index here
// of around's voxel i, -1 where it is left out; where around's ball does not hold this one,
// *kept is empty and the map is read.
Status DeriveCandidatesWithin(const HotPaths& hot, maps::RouteMap* map, const Candidates* around,
                              const Eigen::Matrix3d& R_map_sensor,
                              const Eigen::Vector3d& t_map_sensor, double radius_m, Candidates* out,
                              std::vector<int32_t>* kept,
                              unsigned parts = kCandidateIndex | kCandidateProjection,
                              int threads = 1);
// Whether the ball of keys within `reach` of `centre` lies inside the ball c's voxels came from
// (the triangle inequality on integer keys: exact).
bool BallHolds(const Candidates& c, const maps::VoxelKey& centre, int reach);
// The reach in voxels of the ball DeriveCandidates takes for radius_m: ceil(radius / res) + 1.
inline int BallReach(double radius_m, double resolution_m) {
  return int(std::ceil(radius_m / resolution_m)) + 1;
}

// The 13 neighbour offsets (dx, dy, dz) below zero in (x, y, z) order, in that order. The face
// neighbours -x, -y, -z are entries kFaceX, kFaceY, kFaceZ.
constexpr int kCausalOffsets = 13;
constexpr int8_t kCausalOffset[kCausalOffsets][3] = {
    {-1, -1, -1}, {-1, -1, 0}, {-1, -1, 1}, {-1, 0, -1}, {-1, 0, 0}, {-1, 0, 1}, {-1, 1, -1},
    {-1, 1, 0},   {-1, 1, 1},  {0, -1, -1}, {0, -1, 0},  {0, -1, 1}, {0, 0, -1}};
constexpr int kFaceX = 4, kFaceY = 10, kFaceZ = 12;

// For each candidate in turn, the index of its neighbour at each causal offset when that
// neighbour is a candidate earlier in the order, else -1: the context of the selection coder.
// Streams (no table of 13 indices per candidate); Next must be called for begin, begin + 1, ...
// in turn, and candidates before begin are never neighbours (a part of the selection, below).
class CausalNeighbours {
 public:
  // ranges (optional): version 5's ranges of the candidates (RingStates, indexed by candidate,
  // sign bit: selected), filled before each candidate's Next; the planes of ranges below are kept
  // from them.
  explicit CausalNeighbours(const Candidates& c, size_t begin = 0, const float* ranges = nullptr);
  // Inline where the candidate is in the slab and tile of the one before, away from the tile's
  // borders (most of them): the call saved and restored the registers the other cases need.
  void Next(size_t i, int32_t out[kCausalOffsets]) {
    const ptrdiff_t at = Locate(i, out);
    if (at >= 0) Inside(size_t(at), out);
  }
  // Next without the neighbours where they are the planes' cells around candidate i's (away from
  // the tile's borders in x and y): returns that cell, for PrevRanges, CurRanges and Neighbours;
  // else fills out and returns -1. On a tile's bottom or top layer the cell is one of the border
  // planes' (AtZBorder).
  ptrdiff_t Locate(size_t i, int32_t out[kCausalOffsets]) {
    const maps::VoxelKey& k = v_[i].key;
    const int lx = k.x() & kTileMask, ly = k.y() & kTileMask, lz = k.z() & kTileMask;
    if (k.x() == slab_x_ && lx >= 1 && ly >= 1 && ly < kTileMask && maps::TileOf(k) == tile_) {
      const size_t at = size_t(ly) << kTileBits | size_t(lz);
      Keep(i, at);
      if (lz >= 1 && lz < kTileMask) return ptrdiff_t(at);
      return ptrdiff_t(AtZBorder(i, lx, ly, lz, at));
    }
    NextSlow(i, out);
    return -1;
  }
  // The neighbours of the candidate Locate returned cell `at` for, until the next Locate: all of
  // them, or the one at causal offset k.
  void Neighbours(size_t at, int32_t out[kCausalOffsets]) const { Inside(at, out); }
  int32_t Neighbour(size_t at, int k) const {
    const int8_t* o = kCausalOffset[k];
    return (o[0] < 0 ? PrevCells(at) : CurCells(at))[o[1] * ptrdiff_t(maps::kTileVoxels) + o[2]];
  }
  // With ranges: the planes of the ranges of slabs x - 1 (prev) and x (cur), at cell `at`
  // (Locate's): rows of maps::kTileVoxels cells by z, +infinity where no candidate is. A cell's
  // neighbours are a few runs of adjacent cells, read together (cpu/kernels.h
  // ring_state_planes), not looked up one by one.
  const float* PrevRanges(size_t at) const {
    return at < kBorderAt ? hprev_.data() + at : border_hprev_ + kBorderCell;
  }
  const float* CurRanges(size_t at) const {
    return at < kBorderAt ? hcur_.data() + at : border_hcur_ + kBorderCell;
  }
  // With ranges: the last candidate's bit, once coded (its range's sign, as RingStates::Mark).
  void Mark(int bit) {
    if (bit && ranges_) hcur_[last_] = -hcur_[last_];
  }

 private:
  struct Run {
    maps::VoxelKey tile;
    size_t begin, end;
  };
  static constexpr int kTileBits = 8;
  static constexpr int kTileMask = maps::kTileVoxels - 1;
  // The border planes: three rows (y - 1, y, y + 1) of a plane's layout around one cell,
  // kBorderCell, holding the causal neighbours of a candidate on its tile's bottom layer (those at
  // z - 1 are in the top layer of the tile below, kept in below_) or top layer (those at z + 1 are
  // in the tile above, which comes later: none), so that the planes' reads (Inside,
  // ring_state_planes) find them where they find a candidate's inside the tile. Locate's cell for
  // such a candidate is kBorderAt: beyond every plane cell.
  static constexpr size_t kBorderRow = maps::kTileVoxels;
  static constexpr size_t kBorderCell = kBorderRow + 1;
  static constexpr size_t kBorderCells = 3 * kBorderRow + 4;  // a four-cell read past the last
  static constexpr size_t kBorderAt = size_t(1) << 20;
  size_t AtZBorder(size_t i, int lx, int ly, int lz, size_t at);
  const int32_t* PrevCells(size_t at) const {
    return at < kBorderAt ? prev_.data() + at : border_prev_ + kBorderCell;
  }
  const int32_t* CurCells(size_t at) const {
    return at < kBorderAt ? cur_.data() + at : border_cur_ + kBorderCell;
  }
  void NextSlow(size_t i, int32_t out[kCausalOffsets]);
  // Candidate i now holds plane cell `at` of slab x.
  void Keep(size_t i, size_t at) {
    cur_[at] = int32_t(i);
    if (ranges_) {
      hcur_[at] = ranges_[i];
      last_ = at;
    }
  }
  // The neighbours of the candidate at plane cell `at` away from the tile's borders: offsets
  // 0..8 in slab x - 1, 9..12 in slab x.
  void Inside(size_t at, int32_t out[kCausalOffsets]) const {
    constexpr ptrdiff_t kRow = maps::kTileVoxels;
    const int32_t* p = PrevCells(at);
    const int32_t* c = CurCells(at);
    out[0] = p[-kRow - 1];
    out[1] = p[-kRow];
    out[2] = p[-kRow + 1];
    out[3] = p[-1];
    out[4] = p[0];
    out[5] = p[1];
    out[6] = p[kRow - 1];
    out[7] = p[kRow];
    out[8] = p[kRow + 1];
    out[9] = c[-kRow - 1];
    out[10] = c[-kRow];
    out[11] = c[-kRow + 1];
    out[12] = c[-1];
  }
  int32_t InEarlierTile(int offset, const maps::VoxelKey& key);
  // Empties the cells of candidates [begin, end) in the index plane and, with ranges, in the
  // plane of ranges beside it.
  void Clear(std::vector<int32_t>* plane, std::vector<float>* ranges, int32_t begin, int32_t end);
  void NewTile(const maps::VoxelKey& tile, size_t i);

  const std::vector<maps::MapVoxel>& v_;
  std::vector<Run> runs_;
  // The current tile's slabs x - 1 (prev_) and x (cur_): candidate indices by local y * 256 +
  // local z, -1 where none. They hold the candidates [prev_begin_, cur_begin_) (none unless the
  // slab before is x - 1) and [cur_begin_, i).
  std::vector<int32_t> prev_, cur_;
  // With ranges_: the same slabs' ranges (+infinity where -1), each kPlaneCells + 1 long (a read
  // of four cells from the last row's cell 254 reads one past it), and the cell of the last
  // candidate.
  const float* ranges_;
  std::vector<float> hprev_, hcur_;
  size_t last_ = 0;
  int32_t slab_x_ = 0;
  // The tile of runs_.back(), or none: a tile's keys are below 2^23 (maps::KeyInRange).
  maps::VoxelKey tile_ = maps::VoxelKey::Constant(INT32_MAX);
  int32_t prev_begin_, cur_begin_;
  // The top layer (local z 255) of the current tile (top_) and of the tile below it (below_,
  // when that tile is the run before: else all -1), by local x * 256 + local y, and the candidates
  // each holds. A tile border in z cuts every wall, tree and car at one height; looked up by
  // search from the hints below, its neighbours were much of the decoder's neighbour time.
  std::vector<int32_t> top_, below_;
  std::vector<int32_t> top_held_, below_held_;
  // Per offset, where its last look-up in another tile ended: along a tile's border the keys
  // looked up rise, so the next search starts there.
  struct Hint {
    size_t current = SIZE_MAX;  // the run (of the current tile) the hint was made in
    maps::VoxelKey tile;
    size_t run = 0, pos = 0;  // run == SIZE_MAX: the tile has no earlier run
  };
  Hint hint_[kCausalOffsets];
  int32_t border_prev_[kBorderCells], border_cur_[kBorderCells];
  float border_hprev_[kBorderCells], border_hcur_[kBorderCells];
};

}  // namespace dv::codec
