#include "registration.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/Geometry>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "cpu/kernels.h"
#include "dejaview/base/fork_join.h"
#include "hot_paths.h"

namespace dv::codec {
namespace {

// The coarse stage pulls the prior in from metres: correspondences up to kCoarseStartM away,
// shrinking by kCoarseShrink an iteration to 0.3 m, found among the map's surface patches by cell
// of kCoarseVoxelM. Its reach decides which localisation errors are corrected: a reach of a metre
// leaves a localiser's decimetres of error in place, 6 m with 3 m cells corrects them. A sparse
// source (one point per kSourceVoxelM and kFineSourceVoxelM cell) converges closer and costs
// less. On maps finer than kOwnFineSourceM the fine stage takes the coarse stage's source too (one
// subsample a frame, fewer fine points, the same ratios); on coarser maps the representatives are
// sparse, and the fine stage needs a source of its own.
//
// The coarse stage matches points to planes: a patch is the centroid and normal of the map
// points in a kPatchM voxel that spread over two axes and are flat along the third. Matched to
// points instead, the pull along every surface of a straight street leaves the pose stuck in its
// along-road valley; against planes it converges in two or three iterations, so the reach shrinks
// by kCoarseShrink an iteration. Where planes are too few (fewer than kMinCorrespondences
// matches: sparse rings of a coarse map), an iteration matches the other voxels' centroids point
// to point as well. From where the planes leave it, kMaxFineIterations fine updates reach what
// more would: the later ones move points by millimetres, where the bound is centimetres.
constexpr double kSourceVoxelM = 2.0;      // frame subsample of the coarse stage
constexpr double kFineSourceVoxelM = 1.5;  // and of the fine stage (one point per cell)
constexpr double kOwnFineSourceM = 0.35;   // on maps of this resolution or coarser
constexpr double kCoarseVoxelM = 3.0;
constexpr double kPatchM = 0.75;
constexpr int kCoarsePerCell = 64;  // (kCoarseVoxelM / kPatchM)^3: every centroid of a cell
// Grids of 1.5 and 0.75 m for the iterations whose reach is that short (hot_paths.h): the same
// matches, found among a few centroids, not dozens.
constexpr int kCoarseLevels = 2;
constexpr int kMinPatchPoints = 4;
// A patch: the middle eigenvalue of its points' covariance at least (kPatchM / 10)^2, the
// smallest at most a tenth of it (a scan ring crossing the voxel is a line, not a patch).
constexpr double kPatchSpread2 = kPatchM * kPatchM / 100;
constexpr double kPatchFlatness = 0.1;
constexpr int kCoarseIterations = 7;
constexpr double kCoarseStartM = 6.0;
constexpr double kCoarseShrink = 0.6;
constexpr double kCoarseFloorM = 0.3;
// On maps finer than kOwnFineSourceM, once a coarse update moves points less than this (metres at
// 10 m), the next coarse iteration is the last, at the floor's reach: the reaches between only
// pull in a pose that is already near, at most of registration's cost. On coarser maps the fine
// stage's few representatives end where the coarse stage leaves them, so it runs every reach.
constexpr double kCoarseSettledM = 0.05;
constexpr int kMaxFineIterations = 3;
// The fine stage stops once an update moves points less than this (metres at 10 m).
constexpr double kConvergedM = 2e-4;
constexpr size_t kMinCorrespondences = 100;

// The points registration takes: between 3 and 80 m from the sensor.
bool InReach(const Eigen::Vector3d& p) {
  const double r2 = p.squaredNorm();
  return r2 >= 3 * 3 && r2 <= 80 * 80;
}

// One point per cell of side voxel_m, the first of each cell's points as they come.
class CellSample {
 public:
  CellSample(size_t frame_points, double voxel_m, size_t min_points)
      : seen_(std::max(frame_points / 8, 2 * min_points) + 16), inv_(1 / voxel_m) {}
  // Inline (GCC called it): the call saved and restored registers around a few dozen
  // instructions a point.
  [[gnu::always_inline]] void Add(const Eigen::Vector3d& p) { Add(Key(p), p); }
  // Within 80 m and cells of 0.125 m or more, a key is a few hundred at most (in range), and
  // which cell a point on a boundary falls in does not matter here: a product, not a quotient.
  uint64_t Key(const Eigen::Vector3d& p) const {
    return kernels::PackKey(maps::BoundedFloor(p.x() * inv_), maps::BoundedFloor(p.y() * inv_),
                            maps::BoundedFloor(p.z() * inv_));
  }
  double inverse() const { return inv_; }
  // Add with p's key known (Key's, or the same by other operations).
  [[gnu::always_inline]] void Add(uint64_t packed, const Eigen::Vector3d& p) {
    // A scan's points come ring by ring in azimuth order, mostly in the cell of the point
    // before: that one is known without a look-up.
    if (packed == last_) return;
    last_ = packed;
    const int32_t id = int32_t(out_.size());
    if (seen_.Insert(packed, id) == id) out_.push_back(p);
  }
  std::vector<Eigen::Vector3d> Take() { return std::move(out_); }

 private:
  VoxelHash seen_;
  const double inv_;
  uint64_t last_ = kernels::kEmptyKey;
  std::vector<Eigen::Vector3d> out_;
};

// One point per cell of side voxel_m / 2^first, between 3 and 80 m from the sensor. The side
// halves (up to halving 3) while fewer than min_points come out, so that a small or sparse scene
// still gives the stages enough correspondences; a KITTI frame gives enough at once.
std::vector<Eigen::Vector3d> Subsample(const std::vector<Eigen::Vector3f>& frame, double voxel_m,
                                       size_t min_points, int first = 0) {
  std::vector<Eigen::Vector3d> out;
  for (int halvings = first; halvings <= 3; ++halvings) {
    CellSample cells(frame.size(), voxel_m / double(1 << halvings), min_points);
    for (const Eigen::Vector3f& p : frame) {
      const Eigen::Vector3d pd = p.cast<double>();
      if (InReach(pd)) cells.Add(pd);
    }
    out = cells.Take();
    if (out.size() >= min_points) break;
  }
  return out;
}

// Subsample's two sides in one pass over the frame where each gives enough at its first side (a
// KITTI frame does), else as Subsample gives each: in a pass each, most of their time went to
// reading and testing every point twice. b null: side a alone.
void SubsampleBoth(const cpu::Kernels& k, const std::vector<Eigen::Vector3f>& frame, double a_m,
                   size_t a_min, double b_m, size_t b_min, std::vector<Eigen::Vector3d>* a,
                   std::vector<Eigen::Vector3d>* b) {
  CellSample as(frame.size(), a_m, a_min);
  std::optional<CellSample> bs;
  if (b) bs.emplace(frame.size(), b_m, b_min);
  // Both sides' keys of a block of points first (cpu/kernels.h cell_keys: the same samples with
  // any variant), then the points in order. Points out of reach get keys too, never used.
  constexpr size_t kBlock = 256;
  uint64_t ka[kBlock], kb[kBlock];
  const double ia = as.inverse(), ib = b ? bs->inverse() : 0;
  for (size_t base = 0; base < frame.size(); base += kBlock) {
    const size_t m = std::min(kBlock, frame.size() - base);
    const Eigen::Vector3f* f = frame.data() + base;
    k.cell_keys(f, m, ia, ka);
    if (b) k.cell_keys(f, m, ib, kb);
    for (size_t j = 0; j < m; ++j) {
      const Eigen::Vector3d pd = f[j].cast<double>();
      if (!InReach(pd)) continue;
      as.Add(ka[j], pd);
      if (b) bs->Add(kb[j], pd);
    }
  }
  *a = as.Take();
  if (a->size() < a_min) *a = Subsample(frame, a_m, a_min, 1);
  if (b) {
    *b = bs->Take();
    if (b->size() < b_min) *b = Subsample(frame, b_m, b_min, 1);
  }
}

// The points of one kPatchM voxel: moments from the voxel's corner (moments of coordinates
// hundreds of metres out would lose the patch's shape to cancellation), and the normal, found when
// a match first asks for it (a frame's coarse matches touch a few thousand of some 10-40 k).
class Patch {
 public:
  explicit Patch(const Eigen::Vector3d& corner) : corner_(corner) {}
  void Add(const Eigen::Vector3d& p) {
    const Eigen::Vector3d d = p - corner_;
    sum_ += d;
    outer_ += d * d.transpose();
    ++count_;
  }
  Eigen::Vector3d Centroid() const { return corner_ + sum_ / double(count_); }
  // Zero when the points are not a patch: spread over two axes, flat along the third.
  const Eigen::Vector3d& Normal() {
    if (normal_known_) return normal_;
    normal_known_ = true;
    if (count_ < kMinPatchPoints) return normal_;
    const Eigen::Vector3d mean = sum_ / double(count_);
    Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eig;
    eig.computeDirect(outer_ / double(count_) - mean * mean.transpose());
    const Eigen::Vector3d& l = eig.eigenvalues();  // ascending
    if (l[1] >= kPatchSpread2 && l[0] <= kPatchFlatness * l[1]) normal_ = eig.eigenvectors().col(0);
    return normal_;
  }

 private:
  Eigen::Vector3d corner_, sum_ = Eigen::Vector3d::Zero(), normal_ = Eigen::Vector3d::Zero();
  Eigen::Matrix3d outer_ = Eigen::Matrix3d::Zero();
  int count_ = 0;
  bool normal_known_ = false;
};

// Appends to *pts (the candidates' representatives) the centroid of the points in each kPatchM
// voxel, in the order the voxels first appear among them, and returns the voxels in that order.
std::vector<Patch> AppendPatches(std::vector<Eigen::Vector3d>* pts) {
  const size_t n = pts->size();
  VoxelHash voxels(n / 8 + 16);
  std::vector<Patch> patches;
  for (size_t i = 0; i < n; ++i) {
    const maps::VoxelKey k = maps::KeyOf((*pts)[i], kPatchM);
    if (!KeyInRange(k)) continue;
    const int32_t id = int32_t(patches.size());
    const int32_t at = voxels.Insert(PackKey(k), id);
    if (at == id) patches.emplace_back(k.cast<double>() * kPatchM);
    patches[size_t(at)].Add((*pts)[i]);
  }
  for (const Patch& p : patches) pts->push_back(p.Centroid());
  return patches;
}

Eigen::Matrix3d Skew(const Eigen::Vector3d& v) {
  Eigen::Matrix3d S;
  S << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
  return S;
}

}  // namespace

// The map side of registration, for one ball of map voxels (RegistrationBall keeps it).
// The search points into map_pts and the candidates' index: built in place, never moved.
struct RegistrationMap {
  Candidates c;
  Backend backend = Backend::kCpu;  // the kind of the hot paths that built it
  // The candidates' representatives, then the centroids of their patches (from first_patch).
  std::vector<Eigen::Vector3d> map_pts;
  size_t first_patch = 0;
  std::vector<Patch> patches;  // their normals found as matches ask
  // Where the backend sorts keys (the CPU): the candidates' keys, for the fine stage and more.
  std::unique_ptr<SortedGrid> grid;
  std::unique_ptr<CorrespondenceSearch> search;

  static StatusOr<std::unique_ptr<RegistrationMap>> Build(const HotPaths& hot, Candidates c,
                                                          int grid_nb) {
    std::unique_ptr<RegistrationMap> m(new RegistrationMap());
    m->c = std::move(c);
    m->backend = hot.kind();
    if (m->c.voxels.empty()) return m;  // nothing to search: Register returns the prior
    if (!hot.UsesCandidateIndex()) {
      m->grid = std::make_unique<SortedGrid>(VoxelKeys(m->c.voxels), std::max(grid_nb, 1), 0);
    }
    m->map_pts.resize(m->c.voxels.size());
    for (size_t i = 0; i < m->c.voxels.size(); ++i) {
      m->map_pts[i] = maps::Representative(m->c.voxels[i], m->c.resolution_m);
    }
    m->first_patch = m->map_pts.size();
    m->patches = AppendPatches(&m->map_pts);
    // The coarse stage's correspondences: the kPatchM centroids, by kCoarseVoxelM cell; the fine
    // stage's are the candidates' own voxels.
    DV_ASSIGN_OR_RETURN(
        m->search, hot.CreateSearch(m->map_pts, m->c.voxels, m->c.index, m->c.resolution_m,
                                    kCoarseVoxelM, kCoarsePerCell, kCoarseLevels, m->grid.get()));
    return m;
  }

  // Whether it serves a frame's ball of keys within `reach` of `centre` on backend b, with a grid
  // of max_nb >= grid_nb where it has one.
  bool Serves(const maps::VoxelKey& centre, int reach, double resolution_m, Backend b,
              int grid_nb) const {
    return b == backend && resolution_m == c.resolution_m && BallHolds(c, centre, reach) &&
           (!grid || grid->max_nb() >= grid_nb);
  }
};

namespace {

// A second thread for registration's correspondence searches: each iteration it searches the
// second half of the source while the caller searches the first. A search of 1-2 k points is
// short: a thread started per search cost as much as it saved, so this one lives for the frame's
// registration and waits for work spinning, with a yield.
class SearchHelper {
 public:
  explicit SearchHelper(const CorrespondenceSearch* search)
      : search_(search), thread_([this] { Loop(); }) {}
  ~SearchHelper() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }
  SearchHelper(const SearchHelper&) = delete;
  SearchHelper& operator=(const SearchHelper&) = delete;

  void Start(const std::vector<Eigen::Vector3d>* source, const kernels::Rigid& T, bool fine,
             double max_d2, NeighbourhoodCache* cache) {
    source_ = source;
    cache_ = cache;
    T_ = T;
    fine_ = fine;
    max_d2_ = max_d2;
    posted_.store(posted_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // Waits for the search Start posted; *best: its result, valid until the next Start.
  Status Wait(const std::vector<int32_t>** best) {
    const uint64_t want = posted_.load(std::memory_order_relaxed);
    while (done_.load(std::memory_order_acquire) != want) std::this_thread::yield();
    *best = &best_;
    return status_;
  }

 private:
  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      uint64_t posted;
      while ((posted = posted_.load(std::memory_order_acquire)) == seen) {
        if (stop_.load(std::memory_order_acquire)) return;
        std::this_thread::yield();
      }
      seen = posted;
      status_ = search_->Find(*source_, T_, fine_, max_d2_, &best_, cache_);
      done_.store(seen, std::memory_order_release);
    }
  }

  const CorrespondenceSearch* search_;
  const std::vector<Eigen::Vector3d>* source_ = nullptr;
  NeighbourhoodCache* cache_ = nullptr;
  kernels::Rigid T_{};
  bool fine_ = false;
  double max_d2_ = 0;
  std::vector<int32_t> best_;
  Status status_;
  std::atomic<uint64_t> posted_{0}, done_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: it starts once the rest is constructed
};

// Below this many source points a search is not split.
constexpr size_t kMinSplitSource = 1024;

// Registration's sources, subsampled from the frame: the coarse stage's, and on maps of
// kOwnFineSourceM or coarser the fine stage's own (on finer maps it takes the coarse stage's).
struct Sources {
  std::vector<Eigen::Vector3d> coarse, own_fine;
  bool own_fine_source = false;
  const std::vector<Eigen::Vector3d>& Of(bool fine) const {
    return fine && own_fine_source ? own_fine : coarse;
  }
};

Sources TakeSources(const cpu::Kernels& k, const std::vector<Eigen::Vector3f>& frame,
                    double resolution_m, int threads) {
  constexpr size_t kMinCoarseSource = 800, kMinFineSource = 1000;
  Sources s;
  s.own_fine_source = resolution_m >= kOwnFineSourceM;
  if (threads > 1 && s.own_fine_source) {
    RunBoth(
        true, [&] { s.coarse = Subsample(frame, kSourceVoxelM, kMinCoarseSource); },
        [&] { s.own_fine = Subsample(frame, kFineSourceVoxelM, kMinFineSource); });
  } else {
    SubsampleBoth(k, frame, kSourceVoxelM, kMinCoarseSource, kFineSourceVoxelM, kMinFineSource,
                  &s.coarse, s.own_fine_source ? &s.own_fine : nullptr);
  }
  return s;
}

// Each iteration's correspondence search. Where it may split (the CPU, with threads), each
// source is cut in two halves, the first and the second part, so that the sums see the
// correspondences in source order, and a SearchHelper searches the second.
class Correspondences {
 public:
  Correspondences(const CorrespondenceSearch* search, const Sources& src, bool may_split)
      : search_(search), src_(src) {
    if (!may_split || std::min(src.Of(false).size(), src.Of(true).size()) < kMinSplitSource) return;
    for (int f = 0; f < (src.own_fine_source ? 2 : 1); ++f) {
      const std::vector<Eigen::Vector3d>& s = src.Of(f != 0);
      const auto middle = s.begin() + std::ptrdiff_t(s.size() / 2);
      halves_[f][0].assign(s.begin(), middle);
      halves_[f][1].assign(middle, s.end());
    }
    try {
      helper_ = std::make_unique<SearchHelper>(search);
    } catch (const std::system_error&) {
      // No thread to be had: the caller searches alone, with the same result.
    }
  }

  // *best: the nearest map point of each point of the stage's source (CorrespondenceSearch::Find).
  Status Find(bool fine, const kernels::Rigid& T, double max_d2, std::vector<int32_t>* best) {
    if (!helper_) return search_->Find(src_.Of(fine), T, fine, max_d2, best, &cache_[fine][0]);
    const int src = fine && src_.own_fine_source;
    helper_->Start(&halves_[src][1], T, fine, max_d2, &cache_[fine][1]);
    const Status own = search_->Find(halves_[src][0], T, fine, max_d2, best, &cache_[fine][0]);
    const std::vector<int32_t>* rest = nullptr;
    const Status theirs = helper_->Wait(&rest);
    DV_RETURN_IF_ERROR(own);
    DV_RETURN_IF_ERROR(theirs);
    best->insert(best->end(), rest->begin(), rest->end());
    return Status::Ok();
  }

 private:
  const CorrespondenceSearch* search_;
  const Sources& src_;
  std::vector<Eigen::Vector3d> halves_[2][2];  // [own fine source][half]
  // The searches' look-ups, per stage and half of the source, kept from one iteration to the
  // next: most points keep their voxel between iterations (NeighbourhoodCache).
  NeighbourhoodCache cache_[2][2];        // [fine][half]
  std::unique_ptr<SearchHelper> helper_;  // last: it stops before what it searches goes
};

// The normal equations' sums of one iteration's matches, on the CPU in source order, whichever
// backend found the correspondences: [0] matches to planes (coarse stage) or to points (fine
// stage); [1] coarse matches to voxels that are not a patch, used only when planes are too few
// (sparse rings of a coarse map, where planes alone leave registration with the prior).
NormalSums MatchSums(RegistrationMap* m, const std::vector<Eigen::Vector3d>& source,
                     const std::vector<int32_t>& best, const kernels::Rigid& T, bool fine,
                     double kernel) {
  NormalSums sums[2];
  for (size_t s = 0; s < source.size(); ++s) {
    const int32_t best_i = best[s];
    if (best_i < 0) continue;
    Eigen::Vector3d p;
    kernels::Transform(T, source[s].data(), p.data());
    const Eigen::Vector3d r = p - m->map_pts[size_t(best_i)];
    const Eigen::Vector3d* n =
        fine ? nullptr : &m->patches[size_t(best_i) - m->first_patch].Normal();
    if (n && !n->isZero()) {
      const double rn = n->dot(r);
      sums[0].AddPlane(p, *n, rn, kernel * kernel / ((kernel + rn * rn) * (kernel + rn * rn)));
      continue;
    }
    const double r2 = r.squaredNorm();
    sums[fine ? 0 : 1].AddPoint(p, r, kernel * kernel / ((kernel + r2) * (kernel + r2)));
  }
  if (sums[0].count() < kMinCorrespondences) sums[0].Add(sums[1]);
  return sums[0];
}

// The update the sums solve for, and how far it moves points (*moved: metres at 10 m).
Pose Step(const NormalSums& sums, double* moved) {
  Eigen::Matrix<double, 6, 6> H;
  Eigen::Matrix<double, 6, 1> b;
  sums.Build(&H, &b);
  const Eigen::Matrix<double, 6, 1> dx = -H.ldlt().solve(b);
  Pose step = Pose::Identity();
  const double angle = dx.tail<3>().norm();
  if (angle > 0) step.linear() = Eigen::AngleAxisd(angle, dx.tail<3>() / angle).toRotationMatrix();
  step.translation() = dx.head<3>();
  *moved = dx.head<3>().norm() + 10 * angle;
  return step;
}

StatusOr<RegistrationResult> Register(const HotPaths& hot,
                                      const std::vector<Eigen::Vector3f>& frame, RegistrationMap* m,
                                      const Pose& prior, int threads) {
  RegistrationResult result;
  result.T_map_sensor = prior;
  if (m->c.voxels.empty()) return result;
  const double res = m->c.resolution_m;
  const Sources src = TakeSources(hot.cpu(), frame, res, threads);
  Correspondences correspondences(m->search.get(), src, threads > 1 && m->backend == Backend::kCpu);
  std::vector<int32_t> best;
  Pose T = prior;
  bool settled = false;
  for (int it = 0; it < kCoarseIterations + kMaxFineIterations; ++it) {
    const bool fine = it >= kCoarseIterations;
    const double max_dist =
        fine      ? std::max(res, 0.1)
        : settled ? kCoarseFloorM
                  : std::max(kCoarseFloorM, kCoarseStartM * std::pow(kCoarseShrink, it));
    const kernels::Rigid T_k = RigidOf(T.linear(), T.translation());
    DV_RETURN_IF_ERROR(correspondences.Find(fine, T_k, max_dist * max_dist, &best));
    const NormalSums sums = MatchSums(m, src.Of(fine), best, T_k, fine, max_dist / 3);
    result.correspondences = sums.count();
    if (sums.count() < kMinCorrespondences) return result;
    double moved = 0;
    T = Step(sums, &moved) * T;
    if (fine && moved < kConvergedM) break;
    if (!fine && settled) it = kCoarseIterations - 1;  // the fine stage next
    settled = settled || (!src.own_fine_source && moved < kCoarseSettledM);
  }
  // A refinement far from the prior is a failure (wrong place in the map), not a correction.
  const Pose delta = prior.inverse() * T;
  if (TranslationNorm(delta) > 2.0 || RotationAngleRad(delta) > 0.1) return result;
  result.T_map_sensor = T;
  result.converged = true;
  return result;
}

}  // namespace

void NormalSums::AddPlane(const Eigen::Vector3d& p, const Eigen::Vector3d& n, double rn, double w) {
  const Eigen::Vector3d m = p.cross(n);
  const double j[6] = {n.x(), n.y(), n.z(), m.x(), m.y(), m.z()};
  for (int a = 0, e = 0; a < 6; ++a) {
    const double wa = w * j[a];
    plane_b_[a] += wa * rn;
    for (int c = a; c < 6; ++c) plane_[e++] += wa * j[c];
  }
  ++count_;
}

void NormalSums::AddPoint(const Eigen::Vector3d& p, const Eigen::Vector3d& r, double w) {
  const Eigen::Vector3d wp = w * p;
  w_ += w;
  wp_ += wp;
  wpp_[0] += wp.x() * p.x();
  wpp_[1] += wp.x() * p.y();
  wpp_[2] += wp.x() * p.z();
  wpp_[3] += wp.y() * p.y();
  wpp_[4] += wp.y() * p.z();
  wpp_[5] += wp.z() * p.z();
  wr_ += w * r;
  wpr_ += wp.cross(r);
  ++count_;
}

void NormalSums::Add(const NormalSums& o) {
  for (int e = 0; e < 21; ++e) plane_[e] += o.plane_[e];
  for (int a = 0; a < 6; ++a) plane_b_[a] += o.plane_b_[a];
  w_ += o.w_;
  wp_ += o.wp_;
  for (int e = 0; e < 6; ++e) wpp_[e] += o.wpp_[e];
  wr_ += o.wr_;
  wpr_ += o.wpr_;
  count_ += o.count_;
}

void NormalSums::Build(Eigen::Matrix<double, 6, 6>* H, Eigen::Matrix<double, 6, 1>* b) const {
  for (int a = 0, e = 0; a < 6; ++a) {
    (*b)(a) = plane_b_[a];
    for (int c = a; c < 6; ++c, ++e) (*H)(a, c) = (*H)(c, a) = plane_[e];
  }
  const Eigen::Matrix3d S = Skew(wp_);
  const double trace = wpp_[0] + wpp_[3] + wpp_[5];
  Eigen::Matrix3d Q;
  Q << trace - wpp_[0], -wpp_[1], -wpp_[2], -wpp_[1], trace - wpp_[3], -wpp_[4], -wpp_[2], -wpp_[4],
      trace - wpp_[5];
  H->topLeftCorner<3, 3>().diagonal().array() += w_;
  H->topRightCorner<3, 3>() -= S;
  H->bottomLeftCorner<3, 3>() += S;
  H->bottomRightCorner<3, 3>() += Q;
  b->head<3>() += wr_;
  b->tail<3>() += wpr_;
}

StatusOr<RegistrationResult> RegisterFrame(const HotPaths& hot,
                                           const std::vector<Eigen::Vector3f>& frame,
                                           const Candidates& c, const Pose& prior) {
  DV_ASSIGN_OR_RETURN(const std::unique_ptr<RegistrationMap> m, RegistrationMap::Build(hot, c, 1));
  return Register(hot, frame, m.get(), prior, 1);
}

RegistrationBall::RegistrationBall() = default;
RegistrationBall::~RegistrationBall() = default;

KeptBall RegistrationBall::kept() const {
  if (map_ == nullptr) return {};
  return {&map_->c, map_->grid.get()};
}

StatusOr<RegistrationResult> RegisterFrame(const HotPaths& hot,
                                           const std::vector<Eigen::Vector3f>& frame,
                                           maps::RouteMap* map, RegistrationBall* ball,
                                           const Pose& prior, double radius_m, int grid_nb,
                                           int threads) {
  const double res = map->resolution_m();
  const maps::VoxelKey centre = maps::KeyOf(prior.translation(), res);
  const int reach = BallReach(radius_m, res);
  std::unique_ptr<RegistrationMap>& m = ball->map_;
  if (m == nullptr || !m->Serves(centre, reach, res, hot.kind(), grid_nb)) {
    m.reset();  // the old one's memory goes before the new one's comes
    Candidates c;
    // Only a backend that hashes needs the candidates' index (RegistrationMap::Build).
    const unsigned parts = hot.UsesCandidateIndex() ? unsigned(kCandidateIndex) : 0u;
    DV_RETURN_IF_ERROR(DeriveCandidates(hot, map, prior.linear(), prior.translation(),
                                        radius_m + kRegistrationReuseM, &c, parts));
    DV_ASSIGN_OR_RETURN(m, RegistrationMap::Build(hot, std::move(c), grid_nb));
  }
  return Register(hot, frame, m.get(), prior, threads);
}

}  // namespace dv::codec
