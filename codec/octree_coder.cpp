// Octree geometry section (docs/delta-format.md, "octree"): depth, origin cell, then a range-coded
// breadth-first occupancy stream. Each child-occupancy bit is coded with a context of (child
// index, level, occupied face neighbours of the parent -- those touching the child and all six --
// and siblings already coded), as in MPEG G-PCC's neighbour-dependent contexts.
#include "octree_coder.h"

#include <algorithm>
#include <cmath>

#include "dejaview/base/bytes.h"
#include "dejaview/codec/range_coder.h"
#include "popcount.h"
#include "sorted_grid.h"
#include "voxel_hash.h"

namespace dv::codec {
namespace {

constexpr int kMaxDepth = 21;

uint64_t Spread(uint64_t v) {
  v &= 0x1fffff;
  v = (v | v << 32) & 0x1f00000000ffffull;
  v = (v | v << 16) & 0x1f0000ff0000ffull;
  v = (v | v << 8) & 0x100f00f00f00f00full;
  v = (v | v << 4) & 0x10c30c30c30c30c3ull;
  v = (v | v << 2) & 0x1249249249249249ull;
  return v;
}
uint32_t Compact(uint64_t v) {
  v &= 0x1249249249249249ull;
  v = (v ^ (v >> 2)) & 0x10c30c30c30c30c3ull;
  v = (v ^ (v >> 4)) & 0x100f00f00f00f00full;
  v = (v ^ (v >> 8)) & 0x1f0000ff0000ffull;
  v = (v ^ (v >> 16)) & 0x1f00000000ffffull;
  v = (v ^ (v >> 32)) & 0x1fffff;
  return uint32_t(v);
}
// Child index bits: x is the most significant of each octal digit.
uint64_t Morton(uint32_t x, uint32_t y, uint32_t z) {
  return Spread(x) << 2 | Spread(y) << 1 | Spread(z);
}
void Unmorton(uint64_t m, uint32_t* x, uint32_t* y, uint32_t* z) {
  *x = Compact(m >> 2);
  *y = Compact(m >> 1);
  *z = Compact(m);
}

uint64_t ZigZag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t UnZigZag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

// Occupied face neighbours of a node at a level (bit 2a: -axis a, bit 2a+1: +axis a). Along each
// axis one of the two is a sibling, read from the parent's occupancy; the other lies in the next
// parent along the axis and is looked up in a hash of the level's nodes (a Morton code has 63
// bits, so never VoxelHash's empty key). Half the look-ups, the same flags.
class LevelNeighbours {
 public:
  explicit LevelNeighbours(const std::vector<uint64_t>& level) : hash_(level.size()) {
    for (size_t i = 0; i < level.size(); ++i) hash_.Insert(level[i], int32_t(i));
  }
  // The neighbours' codes by dilated-integer arithmetic on the axis' bits of the code (a carry
  // or borrow crosses the other axes' bits, set to 1 or 0 for it), not by decoding and encoding.
  // parent_occupancy: the child bits of the node's parent (unused for the root, d = 0, which has
  // no neighbours). below: the index in the level of the neighbour at -axis a, -1 when there is
  // none, by the same look-ups (a sibling's index from the parent's occupancy: siblings are
  // consecutive); k: the node's own index.
  int Flags(uint64_t node, size_t k, int d, int parent_occupancy, int32_t below[3]) const {
    below[0] = below[1] = below[2] = -1;
    if (d == 0) return 0;
    constexpr uint64_t kAxis[3] = {0x4924924924924924ull, 0x2492492492492492ull,
                                   0x1249249249249249ull};  // x, y, z bits of a Morton code
    const uint64_t level = d >= kMaxDepth ? ~uint64_t(0) : (uint64_t(1) << (3 * d)) - 1;
    const int child = int(node & 7);
    int flags = 0;
    for (int a = 0; a < 3; ++a) {
      const int axis_bit = 4 >> a;  // the axis' bit in a child index
      const int sibling = (parent_occupancy >> (child ^ axis_bit)) & 1;
      const uint64_t m = kAxis[a], own = node & m, rest = node & ~m;
      if (child & axis_bit) {
        flags |= sibling << (2 * a);
        if (sibling) {
          const int s = child ^ axis_bit;  // below the node: the occupied siblings s..child - 1
          const unsigned between =
              unsigned(parent_occupancy) & ((1u << child) - 1) & ~((2u << s) - 1);
          below[a] = int32_t(k) - 1 - Popcount16(between);
        }
        // 0 when the coordinate was all ones at the deepest level (the sum wrapped).
        const uint64_t up = ((own | ~m) + 1) & m;
        if (up != 0 && (up & ~level) == 0 && hash_.Find(up | rest) >= 0) {
          flags |= 1 << (2 * a + 1);
        }
      } else {
        below[a] = own != 0 ? hash_.Find(((own - 1) & m) | rest) : -1;
        if (below[a] >= 0) flags |= 1 << (2 * a);
        flags |= sibling << (2 * a + 1);
      }
    }
    return flags;
  }

 private:
  VoxelHash hash_;
};

// An occupancy bit's context: level x child x parent's neighbours touching the child x all six,
// then on small levels the siblings set (0..4); on levels of at least kMinCausalNodes nodes, the
// siblings set (0..2) and how many of the child's causal neighbours are occupied (0..3; the cells
// at -x, -y, -z, coded before it, as in G-PCC's neighbour-dependent contexts). A small level's
// causal contexts would each see too few bits to learn from. Models that start from the map's
// priors have nothing left to learn: they take the causal contexts on every level.
constexpr size_t kMinCausalNodes = 1024;
bool CausalLevel(const OctreeModel& model, size_t nodes) {
  return model.start != nullptr || nodes >= kMinCausalNodes;
}

// The contexts of a node's eight children differ only in the child index, the face neighbours
// each touches and the siblings and causal neighbours before it: per (level, flags), the eight
// children's bases ((level * 8 + child) * 4 + touching) * 7 + all six, from a constexpr table
// once a node, not once a child: computed a child, with the causal count below, they would be a
// large share of the octree decoder's instructions.
struct BaseTable {
  uint16_t base[3][64][8];
};
constexpr BaseTable MakeBases() {
  BaseTable t{};
  for (int level = 0; level < 3; ++level) {
    for (int flags = 0; flags < 64; ++flags) {
      int total = 0;
      for (int b = 0; b < 6; ++b) total += (flags >> b) & 1;
      for (int child = 0; child < 8; ++child) {
        // How many of the node's occupied face neighbours the child touches: along each axis the
        // one on its side.
        int touching = 0;
        for (int a = 0; a < 3; ++a) touching += (flags >> (2 * a + ((child >> (2 - a)) & 1))) & 1;
        t.base[level][flags][child] = uint16_t(((level * 8 + child) * 4 + touching) * 7 + total);
      }
    }
  }
  return t;
}
constexpr BaseTable kBases = MakeBases();

class OccupancyContexts {
 public:
  // The model's start states when it has any (kOctreeModels of them).
  explicit OccupancyContexts(const OctreeModel& model) : m_(kOctreeModels) {
    static_assert(kBase * 17 == kOctreeModels, "octree_coder.h");
    if (model.start) std::copy(model.start, model.start + kOctreeModels, m_.begin());
  }
  // Into model.end, when given.
  void Store(const OctreeModel& model) const {
    if (model.end) std::copy(m_.begin(), m_.end(), model.end);
  }
  // The bases of a node's children at depth d with these face neighbours.
  static const uint16_t* Bases(int d, int depth, int flags) {
    const int level = d == depth - 1 ? 0 : (d == depth - 2 ? 1 : 2);
    return kBases.base[level][flags];
  }
  // causal < 0: a small level's context.
  BitModel* Get(const uint16_t* bases, int child, int siblings, int causal) {
    const size_t base = bases[child];
    if (causal < 0) return &m_[base * 5 + size_t(std::min(siblings, 4))];
    return &m_[kBase * 5 + (base * 3 + size_t(std::min(siblings, 2))) * 4 + size_t(causal)];
  }

 private:
  static constexpr size_t kBase = 3 * 8 * 4 * 7;
  std::vector<BitModel> m_;
};

// How many causal neighbours of each child of a node are occupied , four bits a
// child (child c's count at bits 4c): the cell at -axis a is a sibling with a lower index when the
// child's coordinate bit is 1, else the child c | axis_bit of the node's neighbour at -axis a,
// whose occupancy was coded before (it precedes in Morton order). The siblings' part reads only
// bits below the child's, so the occupancy coded so far gives each child's (the encoder may pass
// the whole). A count is at most 3: the nibbles never carry.
struct CountTables {
  uint32_t sibling[256];
  uint32_t below[3][256];  // per axis, by the neighbour's occupancy
};
constexpr CountTables MakeCounts() {
  CountTables t{};
  for (int occ = 0; occ < 256; ++occ) {
    for (int child = 0; child < 8; ++child) {
      for (int a = 0; a < 3; ++a) {
        const int axis_bit = 4 >> a;
        if (child & axis_bit) {
          t.sibling[occ] += uint32_t((occ >> (child ^ axis_bit)) & 1) << (4 * child);
        } else {
          t.below[a][occ] += uint32_t((occ >> (child | axis_bit)) & 1) << (4 * child);
        }
      }
    }
  }
  return t;
}
constexpr CountTables kCounts = MakeCounts();

// The below part of the counts: below[a], the index of the neighbour at -axis a, -1 for none.
uint32_t BelowCounts(const int32_t below[3], const std::vector<uint8_t>& occupancy) {
  uint32_t counts = 0;
  for (int a = 0; a < 3; ++a) {
    if (below[a] >= 0) counts += kCounts.below[a][occupancy[size_t(below[a])]];
  }
  return counts;
}
int CausalCount(uint32_t below_counts, int so_far, int child) {
  return int(((kCounts.sibling[so_far] + below_counts) >> (4 * child)) & 15);
}

// Intensity of each cell, 6 bits, the model chosen by the previous cell's top two bits.
struct IntensityModel {
  BitTree<6> tree[4];
};

}  // namespace

namespace {

// The cells of side step_m that points fall in (2D with heights: z key 0), numbered in the order
// of their first points, and each cell's points listed by cell.
struct CellIndex {
  std::vector<int32_t> cell_of;  // per point
  std::vector<maps::VoxelKey> keys;
  std::vector<int32_t> start, members;  // cell c's points: members[start[c] .. start[c + 1])
  VoxelHash cells{0};

  // False where a key (or a neighbour's) would not pack.
  bool Build(const std::vector<Eigen::Vector3f>& points, double step_m, bool flat) {
    const size_t n = points.size();
    cell_of.resize(n);
    cells = VoxelHash(n / 2 + 16);
    for (size_t i = 0; i < n; ++i) {
      maps::VoxelKey k(0, 0, 0);
      for (int a = 0; a < (flat ? 2 : 3); ++a) {
        const double f = std::floor(double(points[i][a]) / step_m);
        if (!(std::fabs(f) < kPackBias - 3)) return false;
        k[a] = int32_t(f);
      }
      const int32_t id = int32_t(keys.size());
      cell_of[i] = cells.Insert(PackKey(k), id);
      if (cell_of[i] == id) keys.push_back(k);
    }
    start.assign(keys.size() + 1, 0);
    members.resize(n);
    for (int32_t c : cell_of) ++start[size_t(c) + 1];
    for (size_t c = 1; c < start.size(); ++c) start[c] += start[c - 1];
    std::vector<int32_t> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < n; ++i) members[size_t(fill[size_t(cell_of[i])]++)] = int32_t(i);
    return true;
  }
};

}  // namespace

void DropCoveredCells(double step_m, double bound_m, std::vector<Eigen::Vector3f>* points,
                      std::vector<float>* intensity, const std::vector<float>* heights) {
  const bool height = heights != nullptr;
  CellIndex index;
  if (!index.Build(*points, step_m, height)) return;
  const std::vector<maps::VoxelKey>& keys = index.keys;
  // A cell's decoded centre, per axis, as DecodeCells places it; with heights, its z is that of
  // its first point.
  auto centre = [&](int32_t k) { return double(float((double(k) + 0.5) * step_m)); };
  std::vector<double> decoded_z(keys.size());
  for (size_t i = points->size(); i-- > 0;) {
    if (height) decoded_z[size_t(index.cell_of[i])] = double((*heights)[i]);
  }
  for (size_t c = 0; c < keys.size() && !height; ++c) decoded_z[c] = centre(keys[c].z());
  const double bound2 = bound_m * bound_m;
  std::vector<uint8_t> kept(keys.size(), 1), locked(keys.size(), 0);
  std::vector<int32_t> coverers;
  // Point p is covered when a kept neighbour of cell k decodes within the bound of it; the
  // neighbours it finds are recorded (they must then stay).
  auto covered = [&](const Eigen::Vector3f& p, const maps::VoxelKey& k) {
    // Per axis, the neighbour offsets whose centre can lie within the bound along that axis.
    int lo[3], hi[3];
    for (int a = 0; a < 3; ++a) {
      lo[a] = double(p[a]) - centre(k[a] - 1) <= bound_m ? -1 : 0;
      hi[a] = centre(k[a] + 1) - double(p[a]) <= bound_m ? 1 : 0;
    }
    if (height) lo[2] = hi[2] = 0;
    for (int dx = lo[0]; dx <= hi[0]; ++dx) {
      for (int dy = lo[1]; dy <= hi[1]; ++dy) {
        for (int dz = lo[2]; dz <= hi[2]; ++dz) {
          if (dx == 0 && dy == 0 && dz == 0) continue;
          const maps::VoxelKey q(k.x() + dx, k.y() + dy, k.z() + dz);
          const int32_t b = index.cells.Find(PackKey(q));
          if (b < 0 || !kept[size_t(b)]) continue;
          const double ex = centre(q.x()) - double(p.x()), ey = centre(q.y()) - double(p.y()),
                       ez = decoded_z[size_t(b)] - double(p.z());
          if (ex * ex + ey * ey + ez * ez <= bound2) {
            coverers.push_back(b);
            return true;
          }
        }
      }
    }
    return false;
  };
  for (size_t c = 0; c < keys.size(); ++c) {
    if (locked[c]) continue;
    coverers.clear();
    bool all = true;
    for (int32_t m = index.start[c]; m < index.start[c + 1] && all; ++m) {
      all = covered((*points)[size_t(index.members[size_t(m)])], keys[c]);
    }
    if (!all) continue;
    kept[c] = 0;
    for (int32_t b : coverers) locked[size_t(b)] = 1;
  }
  size_t out = 0;
  for (size_t i = 0; i < points->size(); ++i) {
    if (!kept[size_t(index.cell_of[i])]) continue;
    (*points)[out] = (*points)[i];
    (*intensity)[out] = (*intensity)[i];
    ++out;
  }
  points->resize(out);
  intensity->resize(out);
}

namespace {

// The occupied cells of a non-empty point set, level by level: levels[depth] holds each cell's
// Morton code relative to lo (in Morton order), levels[d] the codes of their ancestors at depth d.
struct CellTree {
  int depth = 0;
  Eigen::Matrix<int64_t, 3, 1> lo;
  std::vector<std::vector<uint64_t>> levels;
  std::vector<uint8_t> intensity;  // per cell, the mean of its points', quantised
};

Status BuildCellTree(const std::vector<Eigen::Vector3f>& points,
                     const std::vector<float>& intensity, double step_m, CellTree* tree) {
  std::vector<Eigen::Matrix<int64_t, 3, 1>> keys(points.size());
  Eigen::Matrix<int64_t, 3, 1> lo = Eigen::Matrix<int64_t, 3, 1>::Constant(INT64_MAX);
  Eigen::Matrix<int64_t, 3, 1> hi = Eigen::Matrix<int64_t, 3, 1>::Constant(INT64_MIN);
  for (size_t i = 0; i < points.size(); ++i) {
    for (int a = 0; a < 3; ++a) {
      const double k = std::floor(double(points[i][a]) / step_m);
      if (!(std::fabs(k) < 1e12)) return Status::InvalidArgument("point outside the octree span");
      keys[i][a] = int64_t(k);
    }
    lo = lo.cwiseMin(keys[i]);
    hi = hi.cwiseMax(keys[i]);
  }
  const int64_t extent = (hi - lo).maxCoeff();
  if (extent >= (int64_t(1) << kMaxDepth)) {
    return Status::InvalidArgument("frame spans more than 2^21 cells of " + std::to_string(step_m) +
                                   " m");
  }
  int depth = 1;
  while ((int64_t(1) << depth) <= extent) ++depth;

  // The points in Morton order of their cells, each cell's in point order: a stable radix sort
  // of 3 depth bits (the order std::sort of (code, index) pairs would give, in fewer passes).
  std::vector<uint64_t> code(points.size());
  std::vector<uint32_t> order(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const auto r = keys[i] - lo;
    code[i] = Morton(uint32_t(r[0]), uint32_t(r[1]), uint32_t(r[2]));
    order[i] = uint32_t(i);
  }
  RadixSort(3 * depth, &code, &order);
  tree->depth = depth;
  tree->lo = lo;
  tree->levels.assign(size_t(depth) + 1, {});
  tree->intensity.clear();
  std::vector<std::vector<uint64_t>>& levels = tree->levels;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    double sum = 0;
    while (j < order.size() && code[j] == code[i]) {
      sum += intensity[order[j]];
      ++j;
    }
    levels[size_t(depth)].push_back(code[i]);
    tree->intensity.push_back(QuantizeIntensity6(float(sum / double(j - i))));
    i = j;
  }
  for (int d = depth - 1; d >= 0; --d) {
    for (uint64_t c : levels[size_t(d) + 1]) {
      if (levels[size_t(d)].empty() || levels[size_t(d)].back() != (c >> 3)) {
        levels[size_t(d)].push_back(c >> 3);
      }
    }
  }
  return Status::Ok();
}

// The occupancy stream, level by level: per occupied node, its children's bits in their
// contexts (OccupancyContexts).
std::vector<uint8_t> EncodeOccupancy(const CellTree& tree, const OctreeModel& model) {
  RangeEncoder rc;
  OccupancyContexts ctx(model);
  // Per node of the level being coded, its parent's occupancy, and its own.
  std::vector<uint8_t> parent_occupancy = {0}, child_parent_occupancy, occupancies;
  for (int d = 0; d < tree.depth; ++d) {
    const std::vector<uint64_t>& parents = tree.levels[size_t(d)];
    const std::vector<uint64_t>& children = tree.levels[size_t(d) + 1];
    size_t c = 0;
    const LevelNeighbours neighbours(parents);
    child_parent_occupancy.clear();
    occupancies.assign(parents.size(), 0);
    const bool causal_level = CausalLevel(model, parents.size());
    for (size_t k = 0; k < parents.size(); ++k) {
      const uint64_t parent = parents[k];
      int occupancy = 0;
      const size_t first_child = c;
      while (c < children.size() && (children[c] >> 3) == parent) {
        occupancy |= 1 << (children[c] & 7);
        ++c;
      }
      child_parent_occupancy.insert(child_parent_occupancy.end(), c - first_child,
                                    uint8_t(occupancy));
      occupancies[k] = uint8_t(occupancy);
      int32_t below[3];
      const int flags = neighbours.Flags(parent, k, d, parent_occupancy[k], below);
      const uint16_t* bases = OccupancyContexts::Bases(d, tree.depth, flags);
      const uint32_t below_counts = causal_level ? BelowCounts(below, occupancies) : 0;
      int siblings = 0;
      for (int child = 0; child < 8; ++child) {
        const int bit = (occupancy >> child) & 1;
        if (child == 7 && siblings == 0) break;  // an occupied node has at least one child
        const int causal = causal_level ? CausalCount(below_counts, occupancy, child) : -1;
        rc.Encode(ctx.Get(bases, child, siblings, causal), bit);
        siblings += bit;
      }
    }
    parent_occupancy.swap(child_parent_occupancy);
  }
  ctx.Store(model);
  return rc.Finish();
}

std::vector<uint8_t> EncodeIntensity(const std::vector<uint8_t>& cell_intensity) {
  RangeEncoder irc;
  IntensityModel im;
  int prev = 0;
  for (uint8_t q : cell_intensity) {
    im.tree[prev >> 4].Encode(&irc, q);
    prev = q;
  }
  return irc.Finish();
}

}  // namespace

Status EncodeCells(const std::vector<Eigen::Vector3f>& points, const std::vector<float>& intensity,
                   double step_m, bool with_intensity, OctreeModel model,
                   std::vector<uint8_t>* geometry, std::vector<uint8_t>* intensity_bytes,
                   CellCloud* cells) {
  ByteWriter head;
  intensity_bytes->clear();
  if (points.empty()) {
    if (model.end) OccupancyContexts(model).Store(model);
    head.U8(0);
    *geometry = head.Take();
    if (cells) *cells = CellCloud{step_m, {}, {}};
    return Status::Ok();
  }
  CellTree tree;
  DV_RETURN_IF_ERROR(BuildCellTree(points, intensity, step_m, &tree));
  head.U8(uint8_t(tree.depth));
  for (int a = 0; a < 3; ++a) head.Varint(ZigZag(tree.lo[a]));
  *geometry = head.Take();
  const std::vector<uint8_t> stream = EncodeOccupancy(tree, model);
  geometry->insert(geometry->end(), stream.begin(), stream.end());
  if (with_intensity) *intensity_bytes = EncodeIntensity(tree.intensity);
  if (cells) {
    cells->step_m = step_m;
    cells->centres.clear();
    for (uint64_t m : tree.levels[size_t(tree.depth)]) {
      uint32_t r[3];
      Unmorton(m, &r[0], &r[1], &r[2]);
      Eigen::Vector3f p;
      for (int a = 0; a < 3; ++a) p[a] = float((double(tree.lo[a] + r[a]) + 0.5) * step_m);
      cells->centres.push_back(p);
    }
    cells->intensity = with_intensity ? tree.intensity : std::vector<uint8_t>();
  }
  return Status::Ok();
}

Status DecodeCells(const uint8_t* geometry, size_t geometry_size, const uint8_t* intensity_bytes,
                   size_t intensity_size, double step_m, bool with_intensity, OctreeModel model,
                   size_t max_cells, CellCloud* cells) {
  cells->step_m = step_m;
  cells->centres.clear();
  cells->intensity.clear();
  ByteReader r(geometry, geometry_size);
  uint8_t depth = 0;
  if (!r.U8(&depth)) return Status::Corruption("octree: empty section");
  if (depth == 0) return Status::Ok();
  if (depth > kMaxDepth) return Status::Corruption("octree: depth " + std::to_string(depth));
  int64_t lo[3];
  for (int64_t& v : lo) {
    uint64_t z = 0;
    if (!r.Varint(&z)) return Status::Corruption("octree: truncated origin");
    v = UnZigZag(z);
    if (std::llabs(v) > (int64_t(1) << 50))
      return Status::Corruption("octree: origin out of range");
  }
  RangeDecoder rc(r.position(), r.remaining());
  OccupancyContexts ctx(model);
  std::vector<uint64_t> level = {0}, next;
  // Per node of `level`, its parent's occupancy and its own; per node of `next`, the first.
  std::vector<uint8_t> parent_occupancy = {0}, next_parent_occupancy, occupancies;
  for (int d = 0; d < depth; ++d) {
    next.clear();
    next_parent_occupancy.clear();
    occupancies.assign(level.size(), 0);
    const bool causal_level = CausalLevel(model, level.size());
    const LevelNeighbours neighbours(level);
    for (size_t k = 0; k < level.size(); ++k) {
      const uint64_t parent = level[k];
      int32_t below[3];
      const int flags = neighbours.Flags(parent, k, d, parent_occupancy[k], below);
      const uint16_t* bases = OccupancyContexts::Bases(d, depth, flags);
      const uint32_t below_counts = causal_level ? BelowCounts(below, occupancies) : 0;
      int siblings = 0, occupancy = 0;
      for (int child = 0; child < 8; ++child) {
        int bit = 1;
        if (child < 7 || siblings > 0) {
          const int causal = causal_level ? CausalCount(below_counts, occupancy, child) : -1;
          bit = rc.Decode(ctx.Get(bases, child, siblings, causal));
        }
        if (bit) next.push_back(parent << 3 | uint64_t(child));
        occupancy |= bit << child;
        siblings += bit;
      }
      occupancies[k] = uint8_t(occupancy);
      next_parent_occupancy.insert(next_parent_occupancy.end(), size_t(siblings),
                                   uint8_t(occupancy));
      if (next.size() > max_cells) return Status::Corruption("octree: more cells than allowed");
    }
    if (rc.overrun() > 0) return Status::Corruption("octree: truncated occupancy stream");
    level.swap(next);
    parent_occupancy.swap(next_parent_occupancy);
  }
  if (rc.overrun() > 0) return Status::Corruption("octree: truncated occupancy stream");
  cells->centres.reserve(level.size());
  for (uint64_t m : level) {
    uint32_t c[3];
    Unmorton(m, &c[0], &c[1], &c[2]);
    Eigen::Vector3f p;
    for (int a = 0; a < 3; ++a) p[a] = float((double(lo[a] + c[a]) + 0.5) * step_m);
    cells->centres.push_back(p);
  }
  if (with_intensity) {
    RangeDecoder irc(intensity_bytes, intensity_size);
    IntensityModel im;
    int prev = 0;
    cells->intensity.resize(level.size());
    for (uint8_t& q : cells->intensity) {
      q = uint8_t(im.tree[prev >> 4].Decode(&irc));
      prev = q;
    }
    if (irc.overrun() > 0) return Status::Corruption("octree: truncated intensity stream");
  }
  return Status::Ok();
}

}  // namespace dv::codec
