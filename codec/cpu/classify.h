// The CPU classification (HotPaths::ClassifyPoints) around a variant's two steps: its key sort
// (cpu/kernels.h sort_points) and its classification of one voxel's points (VoxelJob). Each
// variant's file instantiates ClassifyRuns with its own steps (cpu/kernels.h classify), so that
// they inline into the loop over voxels: one call through the table a classification, not one a
// voxel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/variants.h"
#include "hot_paths.h"

namespace dv::codec::cpu {

// A classification run's scratch: the points of a voxel share its candidates, whose coordinates
// are laid out once a voxel (x, y, z), with room for each point's distances (d2) and for the
// close marks, ORed over the voxel's points as bits and stored once a voxel, not once a point;
// and the job, whose fields but the voxel's own are set once a run.
struct ClassifyScratch {
  std::vector<double> x, y, z, d2;
  std::vector<uint64_t> close;
  VoxelJob job;
};

// The fields of a run's job that are the same for every voxel: the search's, and the run's marks.
inline void StartJob(const CandidateSearch& search, const ClassifyRadii& radii,
                     const ClassifyOut& out, CandidateMarks* marks, VoxelJob* job) {
  job->pts = search.pts->data();
  job->bound2 = radii.bound2;
  job->select2 = radii.select2;
  job->near2 = radii.near2;
  job->point_nearest = out.marks->point_nearest.data();
  job->point_second = out.marks->point_second.data();
  job->near_out = out.near ? out.near->data() : nullptr;
  job->nearest = marks->nearest.data();
}

// One voxel's points: its candidates (sensor: their representatives) laid out, Voxel(job, close),
// then the close marks it found set in the run's marks.
template <auto Voxel>
inline void ClassifyVoxelWith(const float* sensor, const uint32_t* points, size_t count,
                              const SortedGrid::Items& near, CandidateMarks* marks,
                              ClassifyScratch* s) {
  const size_t n = near.size(), words = (n + 63) / 64;
  if (s->x.size() < n + 3) {
    for (std::vector<double>* v : {&s->x, &s->y, &s->z, &s->d2}) v->resize(n + 3);
  }
  // The close marks' words cleared by hand: a memset call a voxel cost more than the few words.
  if (s->close.size() < std::max<size_t>(words, 1)) s->close.resize(std::max<size_t>(words, 1));
  uint64_t* const close = s->close.data();
  close[0] = 0;
  for (size_t w = 1; w < words; ++w) close[w] = 0;
  double *x = s->x.data(), *y = s->y.data(), *z = s->z.data();
  for (size_t a = 0; a < n; ++a) {
    const float* c = sensor + 3 * size_t(near[a]);
    x[a] = double(c[0]);
    y[a] = double(c[1]);
    z[a] = double(c[2]);
  }
  VoxelJob& job = s->job;
  job.points = points;
  job.count = count;
  job.near = near.data();
  job.n = n;
  job.x = x;
  job.y = y;
  job.z = z;
  job.d2 = s->d2.data();
  Voxel(job, close);
  for (size_t w = 0; w < words; ++w) {
    for (uint64_t b = close[w]; b != 0; b &= b - 1) {
      marks->close[size_t(near[64 * w + size_t(__builtin_ctzll(b))])] = 1;
    }
  }
}

// The classification with a variant's steps, template arguments so that they are called
// directly: Sort(grid, pts, T, voxel_m, nb, runs) lists the points by key, Voxel(job, close)
// classifies a voxel's points. A candidate near two runs' points is marked by both: each run past
// the first marks its own copies (made by the run itself, for the runs the grid makes), ORed into
// the caller's after. Per point, every run writes its own points only. The outputs are sized and
// cleared, and the grid has room for nb.
template <auto Sort, auto Voxel>
void ClassifyRuns(const CandidateSearch& search, const ClassifyRadii& radii,
                  const ClassifyOut& out) {
  const std::vector<Eigen::Vector3f>& pts = *search.pts;
  const SortedGrid& grid = *search.grid;
  const size_t candidates = search.candidates->size();
  const float* sensor = candidates > 0 ? (*search.candidates)[0].data() : nullptr;
  const int runs = std::max(search.threads, 1);
  std::vector<CandidateMarks> own(size_t(runs - 1));
  std::vector<ClassifyScratch> scratch(static_cast<size_t>(runs));
  const SortedGrid::Queries q =
      Sort(grid, pts, search.T_map_sensor, search.voxel_m, search.nb, runs);
  grid.ForEachVoxelInRuns(
      q, search.nb, runs,
      [&](int r, const uint32_t* points, size_t count, const SortedGrid::Items& near) {
        CandidateMarks& m = r == 0 ? *out.marks : own[size_t(r - 1)];
        ClassifyScratch& s = scratch[size_t(r)];
        if (m.nearest.empty()) {
          for (std::vector<uint8_t>* v : {&m.nearest, &m.close}) v->assign(candidates, 0);
        }
        if (s.job.pts == nullptr) StartJob(search, radii, out, &m, &s.job);
        ClassifyVoxelWith<Voxel>(sensor, points, count, near, &m, &s);
      },
      // The sorted order is no order in the points' array: each point's coordinates are
      // fetched a few points ahead.
      [&](uint32_t i) { __builtin_prefetch(pts[i].data()); });
  // Each point's flag from its nearest, in order: written in the pass, it was a third scattered
  // store a point.
  CandidateMarks& marks = *out.marks;
  for (size_t i = 0; i < pts.size(); ++i) (*out.explained)[i] = marks.point_nearest[i] >= 0;
  for (const CandidateMarks& m : own) {
    if (m.nearest.empty()) continue;  // a run the grid did not make
    for (size_t j = 0; j < candidates; ++j) {
      marks.nearest[j] |= m.nearest[j];
      marks.close[j] |= m.close[j];
    }
  }
}

}  // namespace dv::codec::cpu
