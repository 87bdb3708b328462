// Map section body: one adaptive binary decision per candidate voxel, in canonical map order.
// Context = (static context of the candidate) x (state of its already-coded neighbours). The
// static context splats every candidate into an angular grid around the sensor and keeps, per
// cell, the nearest one: a voxel far behind the nearest surface in its direction is rarely seen.
#include "map_coder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "dejaview/codec/range_coder.h"
#include "hot_paths.h"
#include "popcount.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace dv::codec {
namespace {

constexpr int kCols = kAngularCols, kRows = 80;
constexpr double kElevMin = -0.45, kElevMax = 0.11;  // radians, an HDL-64E's field plus margin
constexpr int kVisStates = 4, kRangeStates = 4, kPersistStates = 4;
constexpr int kStaticStates = kVisStates * kRangeStates * kPersistStates;
// The most neighbour states of any model: 27 face states (versions 3, 4), 3 x 3 x 4 x 3 ring
// states (5).
constexpr int kNeighbourStates = 108;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}
float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

constexpr uint32_t kSign = 0x80000000u, kInfinity = 0x7f800000u;

// The context from the least key (best), the least of the four at the candidate's height
// (level), the key of the neighbour below, the number selected and which are (signs: bit k for
// the neighbour whose key's low 4 bits are k; keys as RingStateScalar's): what the keys and signs
// say, no look-up again. A state as a product, not a branch: whether a neighbour is there is
// data (selection coding 17.0 -> 15.9 ms a frame at T = 0.05, KITTI 00).
int RingContext(unsigned signs, uint32_t best, uint32_t level, uint32_t below, int sel) {
  auto state = [&](uint32_t k) {
    return int((k & ~15u) != kInfinity) * (1 + int((signs >> (k & 15)) & 1));
  };
  return ((state(best) * 3 + state(level)) * 4 + std::min(sel, 3)) * 3 + state(below);
}

#ifdef __SSE2__
// Four neighbours' keys (RingStateScalar's) from their ranges x, the candidate's range hi in
// every lane, and each lane's low four bits.
inline __m128i RingKeys(__m128 x, __m128 hi, __m128i low_bits) {
  const __m128 sign = _mm_castsi128_ps(_mm_set1_epi32(int(kSign)));
  const __m128 d = _mm_andnot_ps(sign, _mm_sub_ps(_mm_andnot_ps(sign, x), hi));
  return _mm_or_si128(_mm_and_si128(_mm_castps_si128(d), _mm_set1_epi32(~15)), low_bits);
}

// The lesser of each lane; signed compares order the keys, which are below 2^31.
inline __m128i Lesser(__m128i a, __m128i b) {
  const __m128i greater = _mm_cmpgt_epi32(a, b);
  return _mm_or_si128(_mm_and_si128(greater, b), _mm_andnot_si128(greater, a));
}
#endif

}  // namespace

// The nearest neighbour as the least of (distance's bits, offset) keys: non-negative floats order
// as their bit patterns, distances within 16 float steps (2e-6 relative) tie and the lower offset
// wins, and an absent neighbour is at infinity (h[-1]). Minima, not branches: which neighbour is
// nearest is data, and mispredicted it costs more.
int RingStateScalar(const float* h, const int32_t nb[kPaddedOffsets], size_t i) {
  uint32_t key[kCausalOffsets];
  unsigned signs = 0;
  int sel = 0;
  const float hi = h[i];
  for (int k = 0; k < kCausalOffsets; ++k) {
    const uint32_t hj = Bits(h[nb[k]]);
    key[k] = (Bits(std::fabs(FromBits(hj & ~kSign) - hi)) & ~15u) | uint32_t(k);
    signs |= (hj >> 31) << k;
    sel += int(hj >> 31);
  }
  // A tree of minima: a chain of 12 would be as long as its dependencies.
  const uint32_t level = std::min(std::min(key[1], key[4]), std::min(key[7], key[10]));
  const uint32_t rest = std::min(std::min(std::min(key[0], key[2]), std::min(key[3], key[5])),
                                 std::min(std::min(key[6], key[8]), std::min(key[9], key[11])));
  return RingContext(signs, std::min(std::min(level, rest), key[12]), level, key[kFaceZ], sel);
}

#ifdef __SSE2__
// The same keys four at a time (x86-64 always has SSE2): half the scalar version's instructions.
// The three padding offsets (13..15, no neighbour) make keys above every real one.
int RingStateSse2(const float* h, const int32_t nb[kPaddedOffsets], size_t i) {
  alignas(16) float hv[kPaddedOffsets];
  for (int k = 0; k < kPaddedOffsets; ++k) hv[k] = h[nb[k]];
  const __m128 hi = _mm_set1_ps(h[i]);
  alignas(16) uint32_t key[kPaddedOffsets];
  unsigned selected = 0;
  __m128i least = _mm_set1_epi32(0x7fffffff);
  for (int v = 0; v < 4; ++v) {
    const __m128 x = _mm_load_ps(hv + 4 * v);
    selected |= unsigned(_mm_movemask_ps(x)) << (4 * v);
    const __m128i k = RingKeys(x, hi, _mm_setr_epi32(4 * v, 4 * v + 1, 4 * v + 2, 4 * v + 3));
    _mm_store_si128(reinterpret_cast<__m128i*>(key + 4 * v), k);
    least = Lesser(least, k);
  }
  // Shifts by immediates: clang wants constants, not a loop variable.
  least = Lesser(least, _mm_srli_si128(least, 8));
  least = Lesser(least, _mm_srli_si128(least, 4));
  const uint32_t best = uint32_t(_mm_cvtsi128_si32(least));
  const uint32_t level = std::min(std::min(key[1], key[4]), std::min(key[7], key[10]));
  return RingContext(selected, best, level, key[kFaceZ], Popcount16(selected));
}

int RingStatePlanes(const float* prev, const float* cur, float hi, unsigned* selected) {
  constexpr ptrdiff_t kRow = maps::kTileVoxels;
  const __m128 inf = _mm_set1_ps(HUGE_VALF);
  const __m128 low3 = _mm_castsi128_ps(_mm_setr_epi32(-1, -1, -1, 0));
  // Slab x - 1's rows y - 1, y, y + 1 at z - 1 .. z + 1 (offsets 0..8, three a row), a padding
  // lane (+infinity) fourth in each.
  auto row = [&](const float* p) {
    return _mm_or_ps(_mm_and_ps(low3, _mm_loadu_ps(p - 1)), _mm_andnot_ps(low3, inf));
  };
  const __m128 r0 = row(prev - kRow), r1 = row(prev), r2 = row(prev + kRow);
  // Slab x's row y - 1 (offsets 9..11), and the cell below (offset 12) in the fourth lane.
  const __m128 c = _mm_loadu_ps(cur - kRow - 1);
  const __m128 u = _mm_shuffle_ps(c, _mm_load_ss(cur - 1), _MM_SHUFFLE(0, 0, 2, 2));
  const __m128 r3 = _mm_shuffle_ps(c, u, _MM_SHUFFLE(2, 0, 1, 0));
  // RingStateSse2's keys, each with its lane's position (0..15, row by row) in place of the
  // offset: positions rise with offsets as offsets do, so the least finite key is the same
  // neighbour's, and where none is finite every state is 0 whichever lane holds the least. The
  // lanes' sign bits are then the neighbours' states by position, without a shuffle.
  const __m128 h = _mm_set1_ps(hi);
  const __m128i k0 = RingKeys(r0, h, _mm_setr_epi32(0, 1, 2, 3));
  const __m128i k1 = RingKeys(r1, h, _mm_setr_epi32(4, 5, 6, 7));
  const __m128i k2 = RingKeys(r2, h, _mm_setr_epi32(8, 9, 10, 11));
  const __m128i k3 = RingKeys(r3, h, _mm_setr_epi32(12, 13, 14, 15));
  // Lane by lane the least of the four rows; lane 1 holds offsets 1, 4, 7 and 10, the four at
  // the candidate's height.
  __m128i least = Lesser(Lesser(k0, k1), Lesser(k2, k3));
  const uint32_t level = uint32_t(_mm_cvtsi128_si32(_mm_shuffle_epi32(least, 1)));
  least = Lesser(least, _mm_srli_si128(least, 8));
  least = Lesser(least, _mm_srli_si128(least, 4));
  const uint32_t best = uint32_t(_mm_cvtsi128_si32(least));
  const uint32_t below = uint32_t(_mm_cvtsi128_si32(_mm_shuffle_epi32(k3, 3)));
  // Sign bits by position (a padding lane, +infinity, has none).
  const unsigned signs = unsigned(_mm_movemask_ps(r0) | _mm_movemask_ps(r1) << 4 |
                                  _mm_movemask_ps(r2) << 8 | _mm_movemask_ps(r3) << 12);
  if (selected) *selected = signs;
  return RingContext(signs, best, level, below, Popcount16(signs));
}
#endif

namespace {

// Version 5's neighbour context. A scan ring crosses the map at a nearly constant range from the
// sensor, so the coded neighbour nearest the candidate in horizontal range (of the
// representatives in the sensor frame, float) is the one most likely on the same ring: the state
// (not coded, unselected, selected) of that one among the 13, of the nearest among the four at the
// same height, how many of the 13 are selected (0..3+), and the state of the neighbour below (on
// the dense maps of the simulated days, walls and poles: without it their map sections grew 4%).
// On KITTI 00 at T = 0.1 the map section is 5.0% smaller than with the face states alone
// (BENCHMARK.md).
class RingStates {
 public:
  // h[0] is the range of "no neighbour" (index -1): infinitely far, never selected (the
  // caller's). Each part fills h[begin + 1, end + 1) of the storage the parts share, and reads
  // and marks only there.
  RingStates(const Candidates& c, size_t begin, size_t end, float* h) : h_(h) {
    // The sum in double and the square root exactly rounded: the same on every machine.
    size_t i = begin;
#ifdef __SSE2__
    // Two roots an instruction: one at a time, waiting on each, they were a tenth of the selection
    // coder's time (KITTI 00, T = 0.12).
    for (; i + 2 <= end; i += 2) {
      const double x0 = c.sensor[i].x(), y0 = c.sensor[i].y();
      const double x1 = c.sensor[i + 1].x(), y1 = c.sensor[i + 1].y();
      const __m128d r = _mm_sqrt_pd(_mm_setr_pd(x0 * x0 + y0 * y0, x1 * x1 + y1 * y1));
      h_[i + 1] = float(_mm_cvtsd_f64(r));
      h_[i + 2] = float(_mm_cvtsd_f64(_mm_unpackhi_pd(r, r)));
    }
#endif
    for (; i < end; ++i) {
      const double x = c.sensor[i].x(), y = c.sensor[i].y();
      h_[i + 1] = float(std::sqrt(x * x + y * y));
    }
  }
  // The state of candidate i, all candidates before it marked; nb as RingStateScalar's.
  int Get(const int32_t nb[kPaddedOffsets], size_t i) const {
#ifdef __SSE2__
    return RingStateSse2(h_ + 1, nb, i);
#else
    return RingStateScalar(h_ + 1, nb, i);
#endif
  }
  float Range(size_t i) const { return h_[i + 1]; }
  // Candidate i's bit, once coded: the sign of its range.
  void Mark(size_t i, int bit) {
    if (bit) h_[i + 1] = -h_[i + 1];
  }

 private:
  float* h_;  // h_[i + 1]: candidate i's horizontal range; sign bit: selected
};

// Versions 1 to 4's neighbour context, from the face neighbours: kFaceStates, the state of each
// ((x * 3 + y) * 3 + z, 27 values); kSelectedFaces, 0 when none is coded, else 1 + min(selected,
// 3).
int FaceState(NeighbourContext kind, const int32_t nb[kCausalOffsets],
              const std::vector<uint8_t>& selected) {
  int coded = 0, sel = 0, state = 0;
  for (int k : {kFaceX, kFaceY, kFaceZ}) {
    const int s = nb[k] < 0 ? 0 : 1 + selected[size_t(nb[k])];
    state = state * 3 + s;
    coded += s > 0;
    sel += s == 2;
  }
  if (kind == NeighbourContext::kFaceStates) return state;
  return coded == 0 ? 0 : 1 + std::min(sel, 3);
}

class SelectionContexts {
 public:
  static_assert(kStaticStates * kNeighbourStates == kSelectionModels, "map_coder.h");
  void Load(const BitModel* start) { std::copy(start, start + kSelectionModels, m_); }
  void Store(BitModel* end) const { std::copy(m_, m_ + kSelectionModels, end); }
  BitModel* Get(uint8_t static_ctx, int neighbour) {
    return &m_[static_ctx * kNeighbourStates + neighbour];
  }

 private:
  BitModel m_[kStaticStates * kNeighbourStates];
};

}  // namespace

int AngularColumn(const Eigen::Vector3f& p) {
  return kernels::AngularColumn(double(p.x()), double(p.y()), kCols);
}

Eigen::Matrix3d RotationOf(const Eigen::Vector4d& q) {
  const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  Eigen::Matrix3d R;
  R(0, 0) = 1 - 2 * (y * y + z * z);
  R(0, 1) = 2 * (x * y - w * z);
  R(0, 2) = 2 * (x * z + w * y);
  R(1, 0) = 2 * (x * y + w * z);
  R(1, 1) = 1 - 2 * (x * x + z * z);
  R(1, 2) = 2 * (y * z - w * x);
  R(2, 0) = 2 * (x * z - w * y);
  R(2, 1) = 2 * (y * z + w * x);
  R(2, 2) = 1 - 2 * (x * x + y * y);
  return R;
}

bool BallHolds(const Candidates& c, const maps::VoxelKey& centre, int reach) {
  const int64_t spare = int64_t(c.reach) - reach;
  return c.reach >= 0 && spare >= 0 &&
         (c.centre - centre).cast<int64_t>().squaredNorm() <= spare * spare;
}

Status DeriveCandidates(maps::RouteMap* map, const Eigen::Matrix3d& R, const Eigen::Vector3d& t,
                        double radius_m, Candidates* out, unsigned parts, Backend backend,
                        int threads) {
  std::vector<int32_t> kept;
  return DeriveCandidatesWithin(map, nullptr, R, t, radius_m, out, &kept, parts, backend, threads);
}

Status DeriveCandidatesWithin(maps::RouteMap* map, const Candidates* around,
                              const Eigen::Matrix3d& R, const Eigen::Vector3d& t, double radius_m,
                              Candidates* out, std::vector<int32_t>* kept, unsigned parts,
                              Backend backend, int threads) {
  const bool with_index = (parts & kCandidateIndex) != 0;
  const double res = map->resolution_m();
  out->resolution_m = res;
  const maps::VoxelKey s = maps::KeyOf(t, res);
  const int n = BallReach(radius_m, res);
  if (!KeyInRange(s) || (s.array().abs() + n >= kPackBias - 2).any()) {
    return Status::InvalidArgument("sensor position outside the map's key range");
  }
  out->centre = s;
  out->reach = n;
  const int64_t n2 = int64_t(n) * n;
  auto outside = [&](const maps::MapVoxel& v) {
    const Eigen::Matrix<int64_t, 3, 1> d = (v.key - s).cast<int64_t>();
    return d.squaredNorm() > n2;
  };
  std::vector<maps::MapVoxel>& ball = out->voxels;
  ball.clear();
  kept->clear();
  if (around && around->resolution_m == res && !around->voxels.empty() &&
      BallHolds(*around, s, n)) {
    kept->assign(around->voxels.size(), -1);
    // At most all of them: no copies as it grows (the encoder's candidates stage 9.6-10.3 ->
    // 9.1-9.4 ms at T = 0.05, 2.05-2.20 -> 1.81-1.89 at 0.2, KITTI 00).
    ball.reserve(around->voxels.size());
    for (size_t i = 0; i < around->voxels.size(); ++i) {
      if (outside(around->voxels[i])) continue;
      (*kept)[i] = int32_t(ball.size());
      ball.push_back(around->voxels[i]);
    }
  } else {
    DV_RETURN_IF_ERROR(map->CollectBall(s, n, &ball));
  }
  const size_t count = out->voxels.size();
  if (with_index) {
    DV_RETURN_IF_ERROR(IndexKeys(backend, out->voxels, &out->index));
  } else {
    out->index = VoxelHash(0);
  }
  out->sensor.clear();
  out->context.clear();
  out->cell.clear();
  if ((parts & kCandidateProjection) == 0) return Status::Ok();
  out->context.resize(count);
  Projection proj;
  DV_RETURN_IF_ERROR(ProjectCandidates(backend, out->voxels, res, R, t,
                                       {kCols, kRows, kElevMin, kElevMax}, &proj, threads));
  out->sensor = std::move(proj.sensor);
  const std::vector<double>& range = proj.range;
  out->cell = std::move(proj.cell);
  const std::vector<int32_t>& cell = out->cell;
  const std::vector<double>& nearest = proj.nearest;
  // Buckets as sums of comparisons, not chains of branches that mispredict on scattered voxels.
  for (size_t i = 0; i < count; ++i) {
    const int32_t c = cell[i];
    const double behind = range[i] - nearest[size_t(c >= 0 ? c : 0)];
    const int vis = c >= 0 ? 1 + (behind <= 3 * res) + (behind <= res) : 0;
    const int rb = (range[i] >= 10) + (range[i] >= 20) + (range[i] >= 40);
    const maps::MapVoxel& v = out->voxels[i];
    const int pb = v.seen_through > 0 ? 0 : std::min<int>(v.hits, 3);
    out->context[i] = uint8_t((vis * kRangeStates + rb) * kPersistStates + pb);
  }
  return Status::Ok();
}

// The candidates come tile by tile, each tile's voxels in KeyLess order, so inside a tile every
// causal neighbour comes before the voxel and lies in its x slab or the one before. Two planes
// of the tile's (y, z) cells hold the indices of those two slabs' candidates (-1 elsewhere: a
// plane is emptied cell by cell of the slab it held before it takes another), so a look-up is one
// read, without hashing, searching or comparing. A neighbour in another tile is found by a search
// in that tile's run when the tile came earlier. The decoder builds no voxel hash.
namespace {
constexpr size_t kPlaneCells = size_t(maps::kTileVoxels) * maps::kTileVoxels;
}  // namespace

CausalNeighbours::CausalNeighbours(const Candidates& c, size_t begin, const float* ranges)
    : v_(c.voxels),
      prev_(kPlaneCells, -1),
      cur_(kPlaneCells, -1),
      ranges_(ranges),
      hprev_(ranges ? kPlaneCells + 1 : 0, HUGE_VALF),
      hcur_(ranges ? kPlaneCells + 1 : 0, HUGE_VALF),
      prev_begin_(int32_t(begin)),
      cur_begin_(int32_t(begin)),
      top_(kPlaneCells, -1),
      below_(kPlaneCells, -1) {
  static_assert(maps::kTileVoxels == 1 << kTileBits, "tile arithmetic: shifts and masks");
}

int32_t CausalNeighbours::InEarlierTile(int offset, const maps::VoxelKey& key) {
  const maps::VoxelKey t = maps::TileOf(key);
  Hint& h = hint_[offset];
  const size_t current = runs_.size() - 1;
  if (h.current != current || h.tile != t) {
    h.current = current;
    h.tile = t;
    h.run = SIZE_MAX;
    // Backwards: the tile below in z is the run just before, the one below in y a few before.
    for (size_t r = current; r-- > 0;) {
      if (runs_[r].tile == t) {
        h.run = r;
        h.pos = runs_[r].begin;
        break;
      }
    }
  }
  if (h.run == SIZE_MAX) return -1;
  // A tile's run is in KeyLess order.
  const Run& run = runs_[h.run];
  auto below = [&](size_t j) { return maps::KeyLess(v_[j].key, key); };
  if (h.pos >= run.end || maps::KeyLess(key, v_[h.pos].key)) h.pos = run.begin;
  // Galloping from the hint: short moves are the common case.
  size_t lo = h.pos, step = 1;
  while (lo + step < run.end && below(lo + step)) {
    lo += step;
    step <<= 1;
  }
  // Then binary search: the first of [lo, lo + step] not below the key.
  for (size_t hi = std::min(lo + step + 1, run.end); lo < hi;) {
    const size_t mid = lo + (hi - lo) / 2;
    if (below(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  h.pos = lo;
  return lo < run.end && v_[lo].key == key ? int32_t(lo) : -1;
}

void CausalNeighbours::Clear(std::vector<int32_t>* plane, std::vector<float>* ranges, int32_t begin,
                             int32_t end) {
  for (int32_t j = begin; j < end; ++j) {
    const maps::VoxelKey& k = v_[size_t(j)].key;
    const size_t at = size_t(k.y() & kTileMask) << kTileBits | size_t(k.z() & kTileMask);
    (*plane)[at] = -1;
    if (ranges_) (*ranges)[at] = HUGE_VALF;
  }
}

void CausalNeighbours::NewTile(const maps::VoxelKey& tile, size_t i) {
  const int32_t self = int32_t(i);
  // Both slab planes emptied of the slabs they held; the top layer becomes the layer below when
  // the new tile is the one above.
  Clear(&prev_, &hprev_, prev_begin_, cur_begin_);
  Clear(&cur_, &hcur_, cur_begin_, self);
  for (int32_t j : below_held_) below_[size_t(j)] = -1;
  below_held_.clear();
  if (!runs_.empty() && tile == runs_.back().tile + maps::VoxelKey(0, 0, 1)) {
    std::swap(top_, below_);
    std::swap(top_held_, below_held_);
  } else {
    for (int32_t j : top_held_) top_[size_t(j)] = -1;
    top_held_.clear();
  }
  // The run before ends here (Next's inline path leaves its end behind); InEarlierTile searches
  // only runs that have ended.
  if (!runs_.empty()) runs_.back().end = i;
  runs_.push_back({tile, i, i});
  tile_ = tile;
  prev_begin_ = cur_begin_ = self;
  slab_x_ = v_[i].key.x();
}

void CausalNeighbours::NextSlow(size_t i, int32_t out[kCausalOffsets]) {
  const maps::VoxelKey& k = v_[i].key;
  const int32_t self = int32_t(i);
  const maps::VoxelKey tile = maps::TileOf(k);
  if (runs_.empty() || tile != runs_.back().tile) {
    NewTile(tile, i);
  } else if (k.x() != slab_x_) {
    // A new slab: prev_ is emptied and becomes the new slab's plane; the slab just ended stays
    // as prev_ if it is x - 1, else it is emptied too.
    Clear(&prev_, &hprev_, prev_begin_, cur_begin_);
    if (k.x() != slab_x_ + 1) {
      Clear(&cur_, &hcur_, cur_begin_, self);
      prev_begin_ = self;
    } else {
      prev_begin_ = cur_begin_;
    }
    std::swap(prev_, cur_);
    std::swap(hprev_, hcur_);
    cur_begin_ = self;
    slab_x_ = k.x();
  }
  const int lx = k.x() & kTileMask, ly = k.y() & kTileMask, lz = k.z() & kTileMask;
  const size_t at = size_t(ly) << kTileBits | size_t(lz);
  if (lx >= 1 && ly >= 1 && ly < kTileMask && lz >= 1 && lz < kTileMask) {
    Inside(at, out);
  } else {
    // Near the tile's border: each neighbour in whichever tile holds it.
    for (int n = 0; n < kCausalOffsets; ++n) {
      const int8_t* o = kCausalOffset[n];
      const int nx = lx + o[0], ny = ly + o[1], nz = lz + o[2];
      if (((nx | ny) & ~kTileMask) != 0) {  // x or y left the tile: [0, 256)
        out[n] = InEarlierTile(n, k + maps::VoxelKey(o[0], o[1], o[2]));
      } else if (nz < 0) {
        out[n] = below_[size_t(nx) << kTileBits | size_t(ny)];
      } else if (nz > kTileMask) {
        out[n] = -1;  // the tile above comes later
      } else {
        out[n] = (o[0] < 0 ? prev_ : cur_)[size_t(ny) << kTileBits | size_t(nz)];
      }
    }
  }
  Keep(i, at);
  if (lz == kTileMask) {
    const int32_t xy = lx << kTileBits | ly;
    top_[size_t(xy)] = self;
    top_held_.push_back(xy);
  }
}

namespace {

// A close free bit (a candidate within select_factor x T of a point that is no point's nearest)
// is left out when its model gives 0 a probability above 0.6, in units of 2^-16: a predicted bit
// costs less than half a bit, an unpredicted one more than one. The other free bits (within T of
// a point, not close) stay 0. Until version 8's fill section the encoder also selected those when
// their models gave 1 a probability above 3/4, which bought distance where a surface was sampled
// sparsely; the fill points do that better now. On KITTI 00 at equal CD 0.05 / 0.10 / 0.15 m the
// bench gives 95.6 / 483 / 1056 without that rule against 87.6 / 421 / 908 with it, on 07 194 /
// 1261 / 2670 against 182 / 1250 / 2626 (BENCHMARK.md).
constexpr uint32_t kDropOdds = 3 * 65536 / 5;  // P(0) above which a close, free bit is 0
// P(0) above which a nearest goes when its points keep their seconds. On KITTI at equal CD 0.05 /
// 0.10 / 0.15 m (BENCHMARK.md): 00 73.2 / 248 / 510 against 73.5 / 245 / 503 without, 07 131 /
// 531 / 1358 against 130 / 520 / 1338; 0.8 gave 72.4 / 248 / 512 and 0.9 73.6 / 247 / 508 on 00.
constexpr uint32_t kCoverOdds = 17 * 65536 / 20;

constexpr size_t kPairsPerCandidate = 3;  // CodePart

}  // namespace

SelectionCoder::SelectionCoder(const Candidates& c, const SelectionModel& model, int parts,
                               std::vector<uint8_t>* selected, bool list_pairs)
    : c_(c),
      model_(model),
      parts_(std::clamp(parts, 1, kMaxSelectionParts)),
      selected_(*selected),
      pairs_(size_t(parts_)) {
  const size_t n = c.voxels.size();
  selected_.assign(n, 0);
  // Left for each part to fill its own range: on one thread these were 6 bytes a candidate
  // cleared before any part could start (2 MB on KITTI 00 at T = 0.05: 357 k candidates).
  if (model.neighbours == NeighbourContext::kRingNeighbours) {
    h_.reset(new float[n + 1]);
    h_[0] = HUGE_VALF;
  }
  if (list_pairs) {
    shifted_.reset(new uint8_t[n + 1]);
    shifted_[0] = 0;
  }
}

SelectionCoder::~SelectionCoder() = default;

std::pair<size_t, size_t> SelectionCoder::Range(int part) const {
  const size_t n = c_.voxels.size();
  return {n * size_t(part) / size_t(parts_), n * size_t(part + 1) / size_t(parts_)};
}

// The selection bits of one part in candidate order, each with its context: code(model, i) codes
// candidate i's bit (or decodes it into `selected_`) and returns it. With pairs, lists the
// selected neighbour pairs (SelectedPair) as it goes.
template <typename Code>
void SelectionCoder::CodePart(int part, Code&& code) {
  const auto [begin, end] = Range(part);
  auto ctx = std::make_unique<SelectionContexts>();
  if (model_.start) ctx->Load(model_.start);
  const bool ring_model = model_.neighbours == NeighbourContext::kRingNeighbours;
#ifdef __SSE2__
  // The planes of ranges for RingStatePlanes; RingStates (below) fills the ranges first.
  CausalNeighbours around(c_, begin, ring_model ? h_.get() + 1 : nullptr);
#else
  CausalNeighbours around(c_, begin);
#endif
  int32_t nb[kPaddedOffsets] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  // Branch-free: every neighbour is written and the count moves on by its bit, read from a copy
  // of the bits shifted by one so that "no neighbour" (-1) reads a 0. A test and push_back per
  // neighbour took 2.3 ms longer a frame (KITTI 00, T = 0.1: 280k pairs).
  std::vector<SelectedPair>& pairs = pairs_[size_t(part)];
  const bool listing = shifted_ != nullptr;
  if (listing) std::fill(&shifted_[begin + 1], &shifted_[end + 1], uint8_t(0));
  size_t listed = 0;
  // Room for kPairsPerCandidate pairs a candidate of the part, and in the first part for the whole
  // frame's, which TakePairs appends to it (the slots are not cleared: only the pages written are
  // touched). On KITTI 00 a frame lists 0.3 a candidate at T = 0.05, 1.1 at 0.1, 2.3 at 0.4 and
  // 2.9 at 0.8: the lists seldom regrow.
  const size_t room = kPairsPerCandidate * (part == 0 ? c_.voxels.size() : end - begin);
  if (listing && pairs.size() < room + kCausalOffsets) pairs.resize(room + kCausalOffsets);
  auto list = [&](size_t i) {
    shifted_[i + 1] = 1;
    if (listed + kCausalOffsets > pairs.size()) pairs.resize(2 * pairs.size());
    SelectedPair* p = pairs.data() + listed;
    for (int o = 0; o < kCausalOffsets; ++o) {
      *p = {uint32_t(i), uint32_t(nb[o]), uint8_t(o)};
      const int in = shifted_[size_t(nb[o] + 1)];
      p += in;
      listed += size_t(in);
    }
  };
  if (ring_model) {
    RingStates ring(c_, begin, end, h_.get());
    for (size_t i = begin; i < end; ++i) {
#ifdef __SSE2__
      // Away from the tile's borders the neighbours' ranges come from the planes, and their
      // indices only for a selected candidate's pairs: selection decoding 389.0 -> 354.7 M
      // instructions over 5 frames at T = 0.1, selection coding 18.4-18.7 -> 16.9-17.0 ms a frame
      // at 0.05 (KITTI 00).
      const ptrdiff_t at = around.Locate(i, nb);
      unsigned neighbours_selected = 0;
      const int state =
          at >= 0 ? RingStatePlanes(around.PrevRanges(size_t(at)), around.CurRanges(size_t(at)),
                                    ring.Range(i), &neighbours_selected)
                  : ring.Get(nb, i);
#else
      around.Next(i, nb);
      const int state = ring.Get(nb, i);
#endif
      const int bit = code(ctx->Get(c_.context[i], state), i);
      ring.Mark(i, bit);
      around.Mark(bit);
      if (bit && listing) {
#ifdef __SSE2__
        if (at >= 0) {
          // Only the selected neighbours, which the planes' signs name: 3.5 of the 13 a selected
          // candidate at T = 0.1, 1.7 at 0.05 (KITTI 00), where list() writes all 13 and keeps
          // those.
          shifted_[i + 1] = 1;
          if (listed + kCausalOffsets > pairs.size()) pairs.resize(2 * pairs.size());
          for (unsigned m = neighbours_selected; m != 0; m &= m - 1) {
            const int o = RingOffset(__builtin_ctz(m));
            pairs[listed++] = {uint32_t(i), uint32_t(around.Neighbour(size_t(at), o)), uint8_t(o)};
          }
        } else {
          list(i);
        }
#else
        list(i);
#endif
      }
    }
  } else {
    for (size_t i = begin; i < end; ++i) {
      around.Next(i, nb);
      const int bit = code(ctx->Get(c_.context[i], FaceState(model_.neighbours, nb, selected_)), i);
      if (bit && listing) list(i);
    }
  }
  pairs.resize(listed);
  if (model_.end && part == parts_ - 1) ctx->Store(model_.end);
}

void ListByNearest(const std::vector<int32_t>& point_nearest, size_t candidates,
                   std::vector<int32_t>* start, std::vector<int32_t>* points,
                   const std::vector<int32_t>* point_second, std::vector<int32_t>* seconds) {
  start->assign(candidates + 1, 0);
  for (int32_t b : point_nearest) {
    if (b >= 0) ++(*start)[size_t(b) + 1];
  }
  for (size_t k = 1; k <= candidates; ++k) (*start)[k] += (*start)[k - 1];
  points->resize(size_t((*start)[candidates]));
  std::vector<int32_t> at(start->begin(), start->end() - 1);
  // The seconds written where their points go, read in point order: the selection coder reads
  // them by candidate, and reading point_second through the lists there was a miss a point.
  if (point_second) seconds->resize(points->size());
  for (size_t p = 0; p < point_nearest.size(); ++p) {
    const int32_t b = point_nearest[p];
    if (b < 0) continue;
    const size_t k = size_t(at[size_t(b)]++);
    (*points)[k] = int32_t(p);
    if (point_second) (*seconds)[k] = (*point_second)[p];
  }
}

void SelectionCoder::SetMarks(const CandidateMarks& marks) {
  marks_ = &marks;
  const size_t n = c_.voxels.size();
  // Marks without each point's second (a caller's own) leave every nearest in: no lists.
  const bool seconds = marks.point_second.size() == marks.point_nearest.size();
  const bool listed = seconds && marks.nearest_start.size() == n + 1 &&
                      marks.nearest_seconds.size() == marks.nearest_points.size();
  if (!seconds) {
    own_start_.assign(n + 1, 0);
  } else if (!listed) {
    ListByNearest(marks.point_nearest, n, &own_start_, &own_points_, &marks.point_second,
                  &own_seconds_);
  }
  start_ = listed ? marks.nearest_start.data() : own_start_.data();
  seconds_ = listed ? marks.nearest_seconds.data() : own_seconds_.data();
  needed_.assign(n, 0);
}

std::vector<uint8_t> SelectionCoder::EncodePart(int part) {
  const CandidateMarks& marks = *marks_;
  const auto [begin, end] = Range(part);
  RangeEncoder rc;
  std::vector<uint8_t>& selected = selected_;
  // Whether each point candidate i is the nearest of has a second that is selected (coded before
  // i) or still to come, in this part: another part's bits are not this one's to read or set.
  auto covered = [&, begin = begin, end = end](size_t i) {
    for (int32_t k = start_[i]; k < start_[i + 1]; ++k) {
      const int32_t s = seconds_[size_t(k)];
      if (s < int32_t(begin) || size_t(s) >= end || (size_t(s) < i && !selected[size_t(s)])) {
        return false;
      }
    }
    return start_[i] < start_[i + 1];
  };
  CodePart(part, [&](BitModel* m, size_t i) {
    int bit = marks.nearest[i] || marks.close[i];
    if (bit && !marks.nearest[i] && m->p > kDropOdds) bit = 0;
    if (needed_[i]) {
      bit = 1;
    } else if (marks.nearest[i] && m->p > kCoverOdds && covered(i)) {
      bit = 0;
      // The candidates that must be selected because a nearest before them was left out.
      for (int32_t k = start_[i]; k < start_[i + 1]; ++k) {
        const int32_t s = seconds_[size_t(k)];
        if (size_t(s) > i) needed_[size_t(s)] = 1;
      }
    }
    rc.Encode(m, bit);
    selected[i] = uint8_t(bit);
    return bit;
  });
  return rc.Finish();
}

Status SelectionCoder::DecodePart(int part, const uint8_t* data, size_t size) {
  RangeDecoder rc(data, size);
  std::vector<uint8_t>& selected = selected_;
  CodePart(part, [&](BitModel* m, size_t i) {
    const int bit = rc.Decode(m);
    selected[i] = uint8_t(bit);
    return bit;
  });
  if (rc.overrun() > 0) return Status::Corruption("map section truncated");
  return Status::Ok();
}

void SelectionCoder::TakePairs(std::vector<SelectedPair>* pairs) {
  // The first part's list grows into the whole: its spare capacity often holds the rest.
  size_t total = 0;
  for (const auto& p : pairs_) total += p.size();
  *pairs = std::move(pairs_[0]);
  pairs->reserve(total);
  for (size_t k = 1; k < pairs_.size(); ++k) {
    pairs->insert(pairs->end(), pairs_[k].begin(), pairs_[k].end());
  }
}

std::vector<uint8_t> EncodeSelection(const Candidates& c, const CandidateMarks& marks,
                                     const SelectionModel& model, std::vector<uint8_t>* selected,
                                     std::vector<SelectedPair>* pairs) {
  SelectionCoder coder(c, model, 1, selected, pairs != nullptr);
  coder.SetMarks(marks);
  std::vector<uint8_t> bits = coder.EncodePart(0);
  if (pairs) coder.TakePairs(pairs);
  return bits;
}

Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       const SelectionModel& model, std::vector<uint8_t>* selected,
                       std::vector<SelectedPair>* pairs) {
  SelectionCoder coder(c, model, 1, selected, pairs != nullptr);
  DV_RETURN_IF_ERROR(coder.DecodePart(0, data, size));
  if (pairs) coder.TakePairs(pairs);
  return Status::Ok();
}

}  // namespace dv::codec
