// The CPU variants of the codec's innermost loops, one table of function pointers per instruction
// set: scalar.cpp (portable C++, every target), sse2.cpp (x86-64's baseline) and avx2.cpp (x86-64
// CPUs that have AVX2, found at run time). Every variant computes the bits the scalar one does,
// lane by lane the same IEEE operations in the same order: the bitstream must not depend on the
// CPU that wrote it (a frame coded on one machine decodes on any other), and tests compare each
// table against the scalar one.
//
// A table is chosen once, by whatever runs the loops, when it is made (Best(): the CPU's backend
// object, hot_paths.h; the selection coder; the fill's coder and decoder), and called through
// from then on: no test of the CPU or of the target at each use.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dejaview/maps/voxel.h"
#include "hot_kernels.h"
#include "map_section.h"
#include "sorted_grid.h"

namespace dv::codec {

struct CandidateSearch;  // hot_paths.h
struct ClassifyRadii;
struct ClassifyOut;

// Whether this CPU runs the AVX2 variants, and AllowAvx2 allows them.
bool CpuHasAvx2();
// Tests: allow (the default) or forbid the AVX2 variants CpuHasAvx2 opens, so that one machine
// checks the SSE2 ones beside them. Read when a table is chosen (cpu::Best): objects made before
// the call keep theirs.
void AllowAvx2(bool allow);

namespace cpu {

// The ring state (map_section.cpp, RingStates) reads 13 causal neighbours padded to 16: the
// padding offsets are -1, "no neighbour".
constexpr int kPaddedOffsets = 16;
// ring_state_planes' `selected` bits: causal offset k in lane RingLane(k) (three lanes of four a
// row of slab x - 1, the fourth unused; then offsets 9-12), and back.
constexpr int RingLane(int offset) { return offset + (offset / 3 < 3 ? offset / 3 : 3); }
constexpr int RingOffset(int lane) { return lane - (lane / 4 < 3 ? lane / 4 : 3); }

struct Kernels {
  const char* name;  // "scalar", "sse2", "avx2"

  // kernels::Project on voxels[0, n): each one's representative in the sensor frame (sensor: 3
  // floats a voxel), its range and its angular cell.
  void (*project)(const maps::MapVoxel* voxels, size_t n, double voxel_m,
                  const kernels::Rigid& T_map_sensor, const kernels::AngularGrid& grid,
                  float* sensor, double* range, int32_t* cell);

  // SortedGrid::SortBy over the frame points pts[i] by kernels::NeighbourhoodKey of T_map_sensor
  // pts[i] (voxels of voxel_m, room for nb around), in `parts` parts at once.
  SortedGrid::Queries (*sort_points)(const SortedGrid& grid,
                                     const std::vector<Eigen::Vector3f>& pts,
                                     const kernels::Rigid& T_map_sensor, double voxel_m, int nb,
                                     int parts);

  // HotPaths::ClassifyPoints on the CPU (cpu/classify.h), the outputs sized and cleared and
  // search.grid of max_nb >= search.nb: the points sorted by key (sort_points), then each voxel's
  // points against the candidates around it at once, on up to search.threads threads with the
  // same marks. The variants differ in how they take a voxel's distances and keep each point's
  // nearest and second (kernels::KeepNearest's: the first in (dx, dy, dz) order among equals).
  void (*classify)(const CandidateSearch& search, const ClassifyRadii& radii,
                   const ClassifyOut& out);

  // Version 5's neighbour state of candidate i: h points at the candidates' horizontal ranges,
  // sign bit set once selected, with h[-1] = +infinity standing for "no neighbour"; nb holds the
  // 13 causal neighbours and three -1s.
  int (*ring_state)(const float* h, const int32_t nb[kPaddedOffsets], size_t i);
  // The same state for a candidate away from its tile's borders, from CausalNeighbours' planes of
  // ranges (PrevRanges, CurRanges at its cell) and its own range hi: its 13 causal neighbours are
  // the cells at z - 1 .. z + 1 of rows y - 1 .. y + 1 of slab x - 1, of row y - 1 of slab x, and
  // the cell at z - 1 of row y (+infinity where none). With `selected`, also which of the 13 are
  // selected, as bits by RingLane.
  int (*ring_state_planes)(const float* prev, const float* cur, float hi, unsigned* selected);
  // h[i] = the horizontal range of sensor[i] (float of the exactly rounded root of the double
  // sum), i < n.
  void (*horizontal_ranges)(const Eigen::Vector3f* sensor, size_t n, float* h);

  // The fill's range bin of each of pairs[0, n) (fill.cpp SortMidpoints), float arithmetic as
  // FillPoint's: kFillRangeBins where its representatives lie farther apart than sqrt(limit2),
  // else the truncated squared range of its midpoint, at most kFillRangeBins - 1.
  void (*fill_bins)(const Candidates& cand, const SelectedPair* pairs, size_t n, float limit2,
                    uint16_t* bin);

  // Registration's cell keys: keys[i] = kernels::PackKey of the floors of pts[i] * inv, the
  // coordinates as doubles; within reach of the sensor (|p * inv| well below 2^20) every variant
  // gives the same key, beyond it any.
  void (*cell_keys)(const Eigen::Vector3f* pts, size_t n, double inv, uint64_t* keys);
};

// The portable table: every target has it.
const Kernels& Scalar();
// The SSE2 table, and the AVX2 table (SSE2's entries where AVX2 has no variant of its own); null
// where the build has no such variants (not x86-64), or, for AVX2, the CPU does not run them.
const Kernels* Sse2();
const Kernels* Avx2();
// The fastest table this CPU runs, AllowAvx2 considered.
const Kernels& Best();
// Every table this CPU runs, the scalar one first.
std::vector<const Kernels*> Variants();

}  // namespace cpu
}  // namespace dv::codec
