// The encoder: a frame's finite points, then either an intra frame (one octree) or a delta frame
// in named stages, each a member of DeltaEncoder, in the order Encoder::Encode runs them:
//   Register          the prior refined against the map, then quantised as the header carries it
//   DeriveCandidates  the map voxels the decoder derives from (map, pose, radius), in map order
//   Classify          which points a candidate explains, and which candidates may be selected
//   CodeSelectionPart the map section: which candidates stand for the explained points
//   CodeCells         the points the map does not explain: the residual, gap and surface sections
//   Finish            the fill section and the container (EncodeFrame then tries intra)
// The selection's parts and the cells are coded beside each other when threads allow; the bytes
// are the same either way. The decoder (decoder.cpp) mirrors these stages.
#include <Eigen/Geometry>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <utility>

#include "container.h"
#include "dejaview/base/bytes.h"
#include "dejaview/base/fork_join.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"
#include "fill.h"
#include "hot_paths.h"
#include "map_section.h"
#include "octree_coder.h"
#include "priors.h"
#include "registration.h"
#include "still.h"
#include "surface.h"

namespace dv::codec {
namespace {

// Registration's ball reaches this much beyond the frame's farthest point: the refined pose may
// move the frame that far.
constexpr double kRegistrationSlackM = 3.0;
// Beyond any automotive LiDAR's range (an HDL-64E reaches 120 m).
constexpr double kMaxCandidateRadiusM = 300.0;
// Below this many bytes of surface cells the encoder also codes the gap class in one octree and
// keeps the smaller: a small surface section pays its models' start-up cost for little.
constexpr size_t kSmallSurfaceBytes = 1024;

using SectionList = std::vector<std::pair<uint8_t, std::vector<uint8_t>>>;

Status CheckParams(const EncoderParams& p) {
  if (!(p.tolerance_m >= 0.001 && p.tolerance_m <= 10)) {
    return Status::InvalidArgument("encode: tolerance_m must be in [0.001, 10] m");
  }
  if (!(p.residual_precision_m >= 0.001)) {
    return Status::InvalidArgument("encode: residual_precision_m must be >= 0.001 m");
  }
  if (!(p.gap_factor >= 0 && p.gap_factor <= 4)) {
    return Status::InvalidArgument("encode: gap_factor must be in [0, 4]");
  }
  if (!(p.still_m >= 0 && p.still_m <= 1)) {
    return Status::InvalidArgument("encode: still_m must be in [0, 1] m");
  }
  if (!(p.selection_radius_m >= 0 && p.selection_radius_m <= 1000)) {
    return Status::InvalidArgument("encode: selection_radius_m must be in [0, 1000] m");
  }
  if (!(p.select_factor >= 0 && p.select_factor <= 1)) {
    return Status::InvalidArgument("encode: select_factor must be in [0, 1]");
  }
  if (!(p.threads >= 1 && p.threads <= kMaxEncoderThreads)) {
    return Status::InvalidArgument("encode: threads must be in [1, " +
                                   std::to_string(kMaxEncoderThreads) + "]");
  }
  if (!(p.selection_parts >= 1 && p.selection_parts <= kMaxSelectionParts)) {
    return Status::InvalidArgument("encode: selection_parts must be in [1, " +
                                   std::to_string(kMaxSelectionParts) + "]");
  }
  return Status::Ok();
}

// The frame's finite points and the farthest one's range. A frame's points are all finite as a
// rule, and then its own arrays are coded as they are, without a copy.
class FinitePoints {
 public:
  explicit FinitePoints(const PointCloud& frame) {
    // The farthest range as the root of the greatest square (the root is monotonic: the same
    // float as the greatest root), with four partial maxima free of each other.
    float most[4] = {0, 0, 0, 0};
    size_t finite = 0;
    auto take = [&](size_t i, float* m) {
      const bool ok = Finite(frame.xyz[i]);
      finite += ok;
      *m = std::max(*m, ok ? frame.xyz[i].squaredNorm() : 0.0f);
    };
    size_t head = 0;
    for (; head + 4 <= frame.size(); head += 4) {
      for (size_t k = 0; k < 4; ++k) take(head + k, &most[k]);
    }
    for (; head < frame.size(); ++head) take(head, &most[0]);
    max_range_m_ =
        double(std::sqrt(std::max(std::max(most[0], most[1]), std::max(most[2], most[3]))));
    non_finite_ = frame.size() - finite;
    if (non_finite_ > 0) {
      xyz_.reserve(finite);
      intensity_.reserve(finite);
      for (size_t i = 0; i < frame.size(); ++i) {
        if (!Finite(frame.xyz[i])) continue;
        xyz_.push_back(frame.xyz[i]);
        intensity_.push_back(frame.intensity[i]);
      }
    }
    pts_ = non_finite_ > 0 ? &xyz_ : &frame.xyz;
    inten_ = non_finite_ > 0 ? &intensity_ : &frame.intensity;
  }
  const std::vector<Eigen::Vector3f>& xyz() const { return *pts_; }
  const std::vector<float>& intensity() const { return *inten_; }
  double max_range_m() const { return max_range_m_; }
  size_t non_finite() const { return non_finite_; }

 private:
  // |v| <= FLT_MAX on each axis: false for infinities and NaN, without a branch.
  static bool Finite(const Eigen::Vector3f& p) {
    return (int(std::fabs(p.x()) <= FLT_MAX) & int(std::fabs(p.y()) <= FLT_MAX) &
            int(std::fabs(p.z()) <= FLT_MAX)) != 0;
  }
  std::vector<Eigen::Vector3f> xyz_;
  std::vector<float> intensity_;
  const std::vector<Eigen::Vector3f>* pts_ = nullptr;
  const std::vector<float>* inten_ = nullptr;
  double max_range_m_ = 0;
  size_t non_finite_ = 0;
};

Header BaseHeader(const FrameInfo& info, const EncoderParams& p) {
  Header h;
  h.info = info;
  h.flags = p.intensity ? kFlagIntensity : 0;
  // Rounded down: the bound stated in the header is never looser than the one asked for.
  h.tolerance_um = uint64_t(std::floor(p.tolerance_m * 1e6 + 1e-6));
  h.residual_um =
      uint64_t(std::floor(std::min(p.residual_precision_m, p.tolerance_m) * 1e6 + 1e-6));
  return h;
}

// Codes `pts` as cells of side step_m into a geometry section (and an intensity section when
// intensity is on); *cells, when given, grows by the number of cells the decoder will read.
Status AddCellSections(const std::vector<Eigen::Vector3f>& pts, const std::vector<float>& inten,
                       double step_m, bool intensity, uint8_t geometry_id, uint8_t intensity_id,
                       const OctreeModel& model, SectionList* sections, size_t* cells = nullptr) {
  std::vector<uint8_t> geometry, ibytes;
  CellCloud decoded;
  DV_RETURN_IF_ERROR(EncodeCells(pts, inten, step_m, intensity, model, &geometry, &ibytes,
                                 cells ? &decoded : nullptr));
  if (cells) *cells += decoded.centres.size();
  sections->emplace_back(geometry_id, std::move(geometry));
  if (intensity) sections->emplace_back(intensity_id, std::move(ibytes));
  return Status::Ok();
}

size_t Bytes(const SectionList& sections) {
  size_t bytes = 0;
  for (const auto& section : sections) bytes += section.second.size();
  return bytes;
}

// An intra frame: the points in one octree at the tolerance, the prior as its pose. Cells whose
// every point a neighbouring cell's centre covers are left out, as for gap cells.
StatusOr<std::vector<uint8_t>> EncodeIntra(const FinitePoints& points, const Pose& prior, Header h,
                                           bool intensity, EncodeReport* rep) {
  const double tol = double(h.tolerance_um) / 1e6;
  h.mode = kModeIntra;
  h.pose = Quantize(prior);
  std::vector<Eigen::Vector3f> cell_pts = points.xyz();
  std::vector<float> cell_inten = points.intensity();
  DropCoveredCells(CellStep(tol), tol - kMarginM, &cell_pts, &cell_inten);
  SectionList sections;
  DV_RETURN_IF_ERROR(AddCellSections(cell_pts, cell_inten, CellStep(tol), intensity, kIntraGeometry,
                                     kIntraIntensity, OctreeModelFrom(), &sections));
  const size_t points_in = rep->points_in, non_finite = rep->non_finite_points;
  *rep = EncodeReport();
  rep->intra_fallback = true;
  rep->points_in = points_in;
  rep->non_finite_points = non_finite;
  rep->residual_points = points.xyz().size();
  rep->T_map_sensor = h.pose.pose();
  for (const auto& [id, body] : sections)
    rep->section_bytes.emplace_back(SectionName(id), body.size());
  return WriteContainer(h, sections);
}

// The encoder's backend objects (hot_paths.h), one per backend kind, each made when a frame first
// asks for it and kept for the frames after: the CPU variants and the CUDA device are looked for
// once, not per frame. A kind that cannot run here is asked again (and refused) each time.
class Backends {
 public:
  StatusOr<const HotPaths*> Get(Backend kind) {
    std::unique_ptr<HotPaths>& made = made_[kind == Backend::kCuda ? 1 : 0];
    if (made == nullptr) {
      DV_ASSIGN_OR_RETURN(made, MakeHotPaths(kind));
    }
    return made.get();
  }

 private:
  std::unique_ptr<HotPaths> made_[2];
};

// One delta frame's encoding. Each stage reads what the ones before it left in the members and
// leaves what the ones after it need. In priors training (`train` set) the models start from
// *train and leave their end states there, and nothing but the models' states is wanted: one
// selection part, no fill.
class DeltaEncoder {
 public:
  DeltaEncoder(const HotPaths& hot, const FinitePoints& points, const Header& base,
               const EncoderParams& params, maps::RouteMap* map, RegistrationBall* ball,
               StillMemory* still, const ModelStates& start, ModelStates* train, EncodeReport* rep)
      : hot_(hot),
        pts_(points.xyz()),
        inten_(points.intensity()),
        params_(params),
        map_(map),
        ball_(ball),
        still_(still),
        start_(start),
        train_(train),
        rep_(rep),
        h_(base),
        tol_(double(base.tolerance_um) / 1e6),
        residual_m_(double(base.residual_um) / 1e6),
        parallel_(params.threads > 1),
        parts_(train ? 1 : params.selection_parts) {
    // The candidate ball, in decimetres: everything the frame can touch, up to
    // kMaxCandidateRadiusM. A spurious return kilometres away would otherwise load every map tile
    // within its range; points beyond the ball are coded by the octrees like anything else the
    // map cannot explain.
    const double reach_m = std::min(points.max_range_m() + tol_, kMaxCandidateRadiusM);
    radius_dm_ = uint64_t(std::ceil(
        (params.selection_radius_m > 0 ? std::min(reach_m, params.selection_radius_m) : reach_m) *
        10));
    radius_m_ = double(radius_dm_) / 10;
    capped_ = radius_m_ < reach_m;
    // Registration matches the whole frame, and its ball holds the map the points beyond the
    // candidates' ball are tested against (MarkNearBeyond).
    registration_radius_m_ = std::max(reach_m, radius_m_) + kRegistrationSlackM;
    // The classification's search radii, in voxels: within the bound, and the gap test's.
    res_ = map->resolution_m();
    nb_ = int(std::ceil((tol_ - kMarginM) / res_));
    gap_m_ = params.gap_factor * tol_;
    gap_nb_ = int(std::ceil(gap_m_ / res_));
    // The classification ends the first gap test for the points with a candidate within gap_m
    // among those it looks at, where its neighbourhood lies within the test's.
    known_near_ = params.gap_factor > 0 && gap_nb_ >= nb_;
    h_.mode = kModeDelta;
    h_.map_id = map->version_id();
    part_bits_.resize(size_t(parts_));
    parts_left_ = parts_;
  }

  Status Register(const Pose& prior) {
    DV_ASSIGN_OR_RETURN(const RegistrationResult reg,
                        RegisterFrame(hot_, pts_, map_, ball_, prior, registration_radius_m_,
                                      std::max(nb_, gap_nb_), params_.threads));
    rep_->registration_correspondences = reg.correspondences;
    h_.pose = Quantize(reg.T_map_sensor);
    rep_->T_map_sensor = h_.pose.pose();
    R_ = h_.pose.R();
    t_ = h_.pose.translation();
    return Status::Ok();
  }

  // The candidates come from the ball registration keeps where it holds theirs (it does unless
  // registration moved the pose metres): its voxels filtered and, where the backend sorts keys
  // (the CPU), its grid of keys copied and thinned (SortedGrid::Keep) rather than sorted afresh.
  // A backend that hashes (the CUDA kernels) looks keys up in cand_.index instead.
  Status DeriveCandidates() {
    const KeptBall ball = ball_->kept();
    const bool hashed = hot_.UsesCandidateIndex();
    std::vector<int32_t> to_cand;
    DV_RETURN_IF_ERROR(DeriveCandidatesWithin(
        hot_, map_, ball.candidates, R_, t_, radius_m_, &cand_, &to_cand,
        (hashed ? unsigned(kCandidateIndex) : 0u) | kCandidateProjection, params_.threads));
    if (!hashed) {
      const int grid_nb = std::max(nb_, gap_nb_);
      if (!to_cand.empty() && ball.grid && ball.grid->max_nb() >= grid_nb) {
        grid_ = std::make_unique<SortedGrid>(*ball.grid);
        grid_->Keep(to_cand);
      } else {
        grid_ = std::make_unique<SortedGrid>(VoxelKeys(cand_.voxels), grid_nb, 0);
      }
    }
    rep_->candidates = cand_.voxels.size();
    return Status::Ok();
  }

  // A point is explained when a candidate's decoded representative is within the tolerance. Its
  // nearest such candidate is marked, and so is every candidate within select_factor of the
  // tolerance of a point: the selection chooses among those only, so each selected candidate
  // has an original point within the tolerance and each explained point a selected one.
  Status Classify() {
    const double bound2 = (tol_ - kMarginM) * (tol_ - kMarginM);
    const double select_m = params_.select_factor * (tol_ - kMarginM);
    DV_RETURN_IF_ERROR(hot_.ClassifyPoints(
        Search(&pts_, nb_, params_.threads), {bound2, select_m * select_m, gap_m_ * gap_m_},
        {&explained_, &marks_, known_near_ ? &near_known_ : nullptr}));
    if (!train_) {
      ListByNearest(marks_.point_nearest, cand_.voxels.size(), &marks_.nearest_start,
                    &marks_.nearest_points, &marks_.point_second, &marks_.nearest_seconds);
    }
    if (!train_) fill_ = std::make_unique<FillEncoder>(cand_, pts_, tol_ - kMarginM);
    return Status::Ok();
  }

  // The map section's part `part`. The coder is set up by the first part to start; whichever
  // thread codes the last part writes the section and orders the fill's midpoints.
  void CodeSelectionPart(int part, const std::function<void(const char*)>& lap) {
    std::call_once(selection_ready_, [&] {
      SelectionModel model = SelectionModelFrom(start_.selection);
      if (train_) model.end = train_->selection.data();
      selection_ = std::make_unique<SelectionCoder>(cand_, model, parts_, &selected_, !train_);
      selection_->SetMarks(marks_);
    });
    part_bits_[size_t(part)] = selection_->EncodePart(part);
    if (parts_left_.fetch_sub(1) != 1) return;
    ByteWriter w;
    w.Varint(radius_dm_);
    w.Varint(uint64_t(parts_));
    for (int p = 0; p + 1 < parts_; ++p) w.Varint(part_bits_[size_t(p)].size());
    for (const auto& bits : part_bits_) w.Bytes(bits.data(), bits.size());
    selection_section_ = w.Take();
    if (!parallel_) lap("selection coding");
    if (fill_) {
      selection_->TakePairs(&pairs_);
      fill_->Order(pairs_);
      if (!parallel_) lap("fill order");
    }
  }

  // The points no candidate explains: those near the map (the gap class: static surface between
  // the map's samples) at the tolerance, the rest (moving objects, scene changes) in the
  // residual at its precision.
  Status CodeCells(const std::function<void(const char*)>& lap) {
    std::vector<Eigen::Vector3f> residual, gap;
    std::vector<float> residual_i, gap_i;
    DV_RETURN_IF_ERROR(SplitUnexplained(&residual, &residual_i, &gap, &gap_i));
    rep_->residual_points = residual.size();
    rep_->gap_points = gap.size();
    SectionList gap_sections;
    DV_RETURN_IF_ERROR(CodeGapClass(std::move(gap), std::move(gap_i), &gap_sections));
    if (!parallel_) lap("gap tests and gap coding");
    OctreeModel rm = OctreeModelFrom(start_.residual);
    if (train_) rm.end = train_->residual.data();
    DV_RETURN_IF_ERROR(AddCellSections(residual, residual_i, CellStep(residual_m_),
                                       params_.intensity, kResidualGeometry, kResidualIntensity, rm,
                                       &cell_sections_, &cell_count_));
    for (auto& section : gap_sections) cell_sections_.push_back(std::move(section));
    if (!parallel_) lap("octree coding");
    if (fill_) {
      fill_->Index(marks_.nearest_start, marks_.nearest_points);
      if (!parallel_) lap("fill index");
    }
    return Status::Ok();
  }

  // The container: the map section, the cell sections, then the fill, which lets through only
  // points with an original within the bound and knows how many points the others decode to.
  std::vector<uint8_t> Finish(const std::function<void(const char*)>& lap) {
    for (uint8_t s : selected_) rep_->selected_voxels += s;
    SectionList sections;
    sections.emplace_back(kMapSelection, std::move(selection_section_));
    for (auto& section : cell_sections_) sections.push_back(std::move(section));
    if (fill_) {
      sections.emplace_back(kFill,
                            fill_->Encode(rep_->selected_voxels + cell_count_, &rep_->fill_points));
      lap("fill");
    }
    rep_->section_bytes.clear();
    for (const auto& [id, body] : sections) {
      rep_->section_bytes.emplace_back(SectionName(id), body.size());
    }
    return WriteContainer(h_, sections);
  }

  int parts() const { return parts_; }
  // This frame's far unexplained points, for the sensor's frame after (null when not tested).
  std::unique_ptr<StillFrame> TakeStillFrame() { return std::move(still_frame_); }

 private:
  // The unexplained points into the residual and the gap class. A point is in the gap class
  // when a candidate lies within gap_m of it (the first test, a search the classification has
  // mostly done already) or it lies on a map surface (the second, MarkOnMapSurface); the cheaper
  // surface test goes first, and the search takes only the points it leaves. The decoder never
  // repeats the tests: it reads which octree a cell is in.
  Status SplitUnexplained(std::vector<Eigen::Vector3f>* residual, std::vector<float>* residual_i,
                          std::vector<Eigen::Vector3f>* gap, std::vector<float>* gap_i) {
    std::vector<Eigen::Vector3f> unexplained;
    std::vector<float> unexplained_i;
    std::vector<uint8_t> unexplained_known;
    for (size_t i = 0; i < pts_.size(); ++i) {
      if (explained_[i]) {
        ++rep_->explained_points;
      } else {
        unexplained.push_back(pts_[i]);
        unexplained_i.push_back(inten_[i]);
        if (known_near_) unexplained_known.push_back(near_known_[i]);
      }
    }
    std::vector<uint8_t> near_map(unexplained.size(), 0);
    if (params_.gap_factor > 0) {
      std::vector<uint8_t> decided =
          known_near_ ? unexplained_known : std::vector<uint8_t>(unexplained.size(), 0);
      MarkOnMapSurface(unexplained, cand_, gap_m_, &decided);
      DV_RETURN_IF_ERROR(
          hot_.MarkNearCandidates(Search(&unexplained, gap_nb_, std::max(params_.threads - 1, 1)),
                                  gap_m_ * gap_m_, &near_map, &decided));
      // The search takes the surface's points as known and marks them as it marks the
      // classification's; the surface's marks hold whatever their keys.
      for (size_t u = 0; u < unexplained.size(); ++u) {
        near_map[u] |= uint8_t(decided[u] && !(known_near_ && unexplained_known[u]));
      }
      MarkNearBeyond(unexplained, &near_map);
    }
    MarkStill(unexplained, &near_map);
    for (size_t i = 0; i < unexplained.size(); ++i) {
      (near_map[i] ? gap : residual)->push_back(unexplained[i]);
      (near_map[i] ? gap_i : residual_i)->push_back(unexplained_i[i]);
    }
    return Status::Ok();
  }

  // The first gap test for the points whose neighbourhood reaches beyond the candidates' ball
  // (EncoderParams::selection_radius_m), against the map voxels of registration's ball, which
  // holds the whole frame: a map voxel's representative within gap_m of the point. In the map
  // frame, on the host for every backend: an encoder's decision, never repeated by the decoder,
  // which reads each cell's class from the section it is in.
  void MarkNearBeyond(const std::vector<Eigen::Vector3f>& unexplained,
                      std::vector<uint8_t>* near_map) const {
    const KeptBall ball = ball_->kept();
    if (!capped_ || ball.candidates == nullptr || ball.candidates->resolution_m != res_) return;
    const Candidates& around = *ball.candidates;
    const int64_t inner = int64_t(cand_.reach) - gap_nb_ - 1;
    std::vector<int32_t> keys;
    std::vector<Eigen::Vector3d> at;
    std::vector<size_t> which;
    for (size_t u = 0; u < unexplained.size(); ++u) {
      if ((*near_map)[u]) continue;
      const Eigen::Vector3d p = R_ * unexplained[u].cast<double>() + t_;
      const maps::VoxelKey k = maps::KeyOf(p, res_);
      if (!KeyInRange(k)) continue;
      const int64_t d2 = (k - cand_.centre).cast<int64_t>().squaredNorm();
      if (inner >= 0 && d2 <= inner * inner) continue;  // the search above covered it
      keys.insert(keys.end(), {k.x(), k.y(), k.z()});
      at.push_back(p);
      which.push_back(u);
    }
    if (which.empty()) return;
    const double near2 = gap_m_ * gap_m_;
    auto close = [&](size_t q, int32_t voxel) {
      return (maps::Representative(around.voxels[size_t(voxel)], res_) - at[q]).squaredNorm() <=
             near2;
    };
    if (ball.grid != nullptr && ball.grid->max_nb() >= gap_nb_) {
      const std::vector<uint8_t> valid(which.size(), 1);
      ball.grid->ForEachQuery(keys, valid, gap_nb_,
                              [&](uint32_t q, const SortedGrid::Items& items) {
                                for (int32_t v : items) {
                                  if (close(q, v)) {
                                    (*near_map)[which[q]] = 1;
                                    break;
                                  }
                                }
                              });
    } else if (around.index.size() > 0) {
      SearchIndex(around, keys, which, close, near_map);
    }
    MarkOnSurfaceBeyond(around, unexplained, which, near_map);
  }

  template <typename Close>
  void SearchIndex(const Candidates& around, const std::vector<int32_t>& keys,
                   const std::vector<size_t>& which, Close&& close,
                   std::vector<uint8_t>* near_map) const {
    for (size_t q = 0; q < which.size(); ++q) {
      const int32_t* k = &keys[3 * q];
      bool found = false;
      for (int dx = -gap_nb_; dx <= gap_nb_ && !found; ++dx) {
        for (int dy = -gap_nb_; dy <= gap_nb_ && !found; ++dy) {
          for (int dz = -gap_nb_; dz <= gap_nb_ && !found; ++dz) {
            const int32_t v = around.index.Find(kernels::PackKey(k[0] + dx, k[1] + dy, k[2] + dz));
            found = v >= 0 && close(q, v);
          }
        }
      }
      if (found) (*near_map)[which[q]] = 1;
    }
  }

  // The second gap test (MarkOnMapSurface: far ground between the map's rings) for the points
  // beyond the candidates' ball that the first left, against registration's voxels beyond the
  // ball's inner part: every sample the test could take for them lies within kSurfaceWindow of
  // their horizontal distance, which is beyond (1 - kSurfaceWindow) of the inner radius.
  void MarkOnSurfaceBeyond(const Candidates& around,
                           const std::vector<Eigen::Vector3f>& unexplained,
                           const std::vector<size_t>& which, std::vector<uint8_t>* near_map) const {
    std::vector<Eigen::Vector3f> pts;
    std::vector<size_t> at;
    for (size_t u : which) {
      if ((*near_map)[u]) continue;
      pts.push_back(unexplained[u]);
      at.push_back(u);
    }
    if (pts.empty()) return;
    const double inner_m =
        std::max(0.0, (double(cand_.reach) - gap_nb_ - 2) * res_ * (1 - kSurfaceWindow));
    const int64_t from = int64_t(inner_m / res_);
    // Only the voxels on the points' radial strips are projected: a flag per square of kStripM
    // in the map's x-y plane, set along each point's strip (within kSurfaceWindow of its
    // horizontal distance, with a margin) and around it.
    constexpr double kStripM = 2.0;
    const double half_m = (around.reach + 2) * res_;
    const int side = int(std::ceil(2 * half_m / kStripM)) + 1;
    std::vector<uint8_t> strip(size_t(side) * size_t(side), 0);
    const double ox = t_.x() - half_m, oy = t_.y() - half_m;
    auto square = [&](double x, double y, int* sx, int* sy) {
      *sx = int(std::floor((x - ox) / kStripM));
      *sy = int(std::floor((y - oy) / kStripM));
      return *sx >= 0 && *sy >= 0 && *sx < side && *sy < side;
    };
    for (const Eigen::Vector3f& p : pts) {
      const Eigen::Vector3d m = R_ * p.cast<double>() + t_;
      const Eigen::Vector2d d = (m - t_).head<2>();
      const double h = d.norm();
      if (!(h > 0)) continue;
      const double lo = h * (1 - 1.5 * kSurfaceWindow), hi = h * (1 + 1.5 * kSurfaceWindow);
      for (double r = lo; r <= hi + kStripM; r += kStripM / 2) {
        const Eigen::Vector2d q = t_.head<2>() + d * (std::min(r, hi) / h);
        int sx, sy;
        if (!square(q.x(), q.y(), &sx, &sy)) continue;
        for (int y = std::max(sy - 1, 0); y <= std::min(sy + 1, side - 1); ++y) {
          for (int x = std::max(sx - 1, 0); x <= std::min(sx + 1, side - 1); ++x) {
            strip[size_t(y) * size_t(side) + size_t(x)] = 1;
          }
        }
      }
    }
    Candidates samples;
    const Eigen::Matrix3d Rt = R_.transpose();
    for (const maps::MapVoxel& v : around.voxels) {
      if ((v.key - cand_.centre).cast<int64_t>().squaredNorm() < from * from) continue;
      int sx, sy;
      if (!square((v.key.x() + 0.5) * res_, (v.key.y() + 0.5) * res_, &sx, &sy) ||
          !strip[size_t(sy) * size_t(side) + size_t(sx)]) {
        continue;
      }
      const Eigen::Vector3f q = (Rt * (maps::Representative(v, res_) - t_)).cast<float>();
      samples.sensor.push_back(q);
      samples.cell.push_back(AngularColumn(q));  // the test reads only the column
    }
    std::vector<uint8_t> near(pts.size(), 0);
    MarkOnMapSurface(pts, samples, gap_m_, &near);
    for (size_t k = 0; k < pts.size(); ++k) (*near_map)[at[k]] |= near[k];
  }

  // The unexplained points far from the map (near_map 0) that stood still since the sensor's
  // frame before join the gap class (still.h); this frame's are kept for the frame after.
  void MarkStill(const std::vector<Eigen::Vector3f>& unexplained, std::vector<uint8_t>* near_map) {
    if (!still_ || params_.still_m <= 0) return;
    const std::shared_ptr<const StillFrame> before =
        still_->Before(h_.info.sensor_id, h_.map_id, h_.info.timestamp_ns, params_.still_m);
    std::vector<Eigen::Vector3d> far;
    for (size_t u = 0; u < unexplained.size(); ++u) {
      if ((*near_map)[u]) continue;
      const Eigen::Vector3d p = R_ * unexplained[u].cast<double>() + t_;
      far.push_back(p);
      if (before && before->Near(p)) {
        (*near_map)[u] = 1;
        ++rep_->still_points;
      }
    }
    still_frame_ = std::make_unique<StillFrame>(h_.map_id, h_.info.timestamp_ns, params_.still_m,
                                                std::move(far));
  }

  // The gap class coded two ways, the smaller kept: all in the 3D octree, or the points on the
  // map's ground profile as 2D surface cells (SplitSurface) and the rest in 3D. The surface wins
  // where much ground lies between the map's rings; a small surface section loses to its models'
  // start-up cost, so only then is the one octree tried too. Each gap cell holds an original
  // point and its centre is within T of every point in it, as for intra cells, and so does each
  // surface cell's decoded point for the points SplitSurface put in it: the bound holds whatever
  // the gap tests decided.
  Status CodeGapClass(std::vector<Eigen::Vector3f> gap, std::vector<float> gap_i,
                      SectionList* out) {
    std::vector<Eigen::Vector3f> rest = gap, surface;
    std::vector<float> rest_i = gap_i, surface_i;
    if (!gap.empty()) SplitSurface(cand_, tol_, &rest, &rest_i, &surface, &surface_i);
    auto code = [&](const std::vector<Eigen::Vector3f>& g, const std::vector<float>& gi,
                    const std::vector<Eigen::Vector3f>& sf, const std::vector<float>& si,
                    SectionList* sections, ModelStates* ends, size_t* cells) -> Status {
      OctreeModel gm = OctreeModelFrom(start_.gap), sm = OctreeModelFrom(start_.surface);
      if (ends) {
        ends->gap.resize(kOctreeModels);
        ends->surface.resize(kOctreeModels);
        gm.end = ends->gap.data();
        sm.end = ends->surface.data();
      }
      DV_RETURN_IF_ERROR(AddCellSections(g, gi, CellStep(tol_), params_.intensity, kGapGeometry,
                                         kGapIntensity, gm, sections, cells));
      return AddCellSections(sf, si, SurfaceStep(tol_), params_.intensity, kSurfaceGeometry,
                             kSurfaceIntensity, sm, sections, cells);
    };
    SectionList split, one_octree;
    ModelStates split_ends, one_octree_ends;
    size_t split_bytes = SIZE_MAX, one_octree_bytes = SIZE_MAX;
    size_t split_cells = 0, one_octree_cells = 0;
    size_t surface_bytes = 0;
    if (!surface.empty()) {
      DropCoveredCells(CellStep(tol_), tol_ - kMarginM, &rest, &rest_i);
      DV_RETURN_IF_ERROR(code(rest, rest_i, surface, surface_i, &split,
                              train_ ? &split_ends : nullptr, &split_cells));
      split_bytes = Bytes(split);
      for (const auto& section : split) {
        if (section.first == kSurfaceGeometry) surface_bytes = section.second.size();
      }
    }
    if (surface.empty() || surface_bytes < kSmallSurfaceBytes) {
      DropCoveredCells(CellStep(tol_), tol_ - kMarginM, &gap, &gap_i);
      DV_RETURN_IF_ERROR(code(gap, gap_i, {}, {}, &one_octree, train_ ? &one_octree_ends : nullptr,
                              &one_octree_cells));
      one_octree_bytes = Bytes(one_octree);
    }
    const bool use_split = split_bytes < one_octree_bytes;
    rep_->surface_points = use_split ? surface.size() : 0;
    if (train_) {
      ModelStates& kept = use_split ? split_ends : one_octree_ends;
      train_->gap = std::move(kept.gap);
      train_->surface = std::move(kept.surface);
    }
    cell_count_ += use_split ? split_cells : one_octree_cells;
    *out = std::move(use_split ? split : one_octree);
    return Status::Ok();
  }

  // The classification's and the gap test's search: `pts` against the candidates, nb voxels
  // around each point's, in the grid or the index (whichever the backend reads).
  CandidateSearch Search(const std::vector<Eigen::Vector3f>* pts, int nb, int threads) const {
    CandidateSearch search;
    search.pts = pts;
    search.T_map_sensor = RigidOf(R_, t_);
    search.candidates = &cand_.sensor;
    search.grid = grid_.get();
    search.index = &cand_.index;
    search.voxel_m = res_;
    search.nb = nb;
    search.threads = threads;
    return search;
  }

  const HotPaths& hot_;
  const std::vector<Eigen::Vector3f>& pts_;
  const std::vector<float>& inten_;
  const EncoderParams& params_;
  maps::RouteMap* map_;
  RegistrationBall* ball_;
  StillMemory* still_;        // null: no still test (priors training)
  const ModelStates& start_;  // the models' start: the map's priors, or in training the states
  ModelStates* train_;
  EncodeReport* rep_;
  Header h_;
  const double tol_, residual_m_;  // the bounds as the decoder reads them from the header
  const bool parallel_;
  const int parts_;
  uint64_t radius_dm_ = 0;
  double radius_m_ = 0, registration_radius_m_ = 0, res_ = 0, gap_m_ = 0;
  int nb_ = 0, gap_nb_ = 0;
  bool known_near_ = false;
  bool capped_ = false;  // the candidates' ball is selection_radius_m, short of the frame's reach
  Eigen::Matrix3d R_;
  Eigen::Vector3d t_;
  // DeriveCandidates
  Candidates cand_;
  std::unique_ptr<SortedGrid> grid_;
  // Classify
  std::vector<uint8_t> explained_, near_known_;
  CandidateMarks marks_;
  std::unique_ptr<FillEncoder> fill_;
  // CodeSelectionPart
  std::once_flag selection_ready_;
  std::unique_ptr<SelectionCoder> selection_;
  std::vector<uint8_t> selected_;
  std::vector<std::vector<uint8_t>> part_bits_;
  std::atomic<int> parts_left_{0};
  std::vector<uint8_t> selection_section_;
  std::vector<SelectedPair> pairs_;  // the fill encoder keeps a reference
  // CodeCells
  SectionList cell_sections_;  // residual, then the gap class's
  size_t cell_count_ = 0;
  std::unique_ptr<StillFrame> still_frame_;
};

// The whole frame: intra without a map (or points), else the delta frame's stages, and intra
// after all where the map explains less than min_explained_fraction of the points and the intra
// frame is smaller.
StatusOr<std::vector<uint8_t>> EncodeFrame(const PointCloud& frame, const Pose& prior,
                                           const FrameInfo& info, const EncoderParams& params,
                                           maps::RouteMap* map, Backends* backends,
                                           RegistrationBall* ball, StillMemory* still,
                                           const ModelStates& start, ModelStates* train,
                                           EncodeReport* report) {
  if (!frame.consistent()) return Status::InvalidArgument("encode: inconsistent point cloud");
  DV_RETURN_IF_ERROR(CheckParams(params));
  if (frame.size() > kMaxPointsPerFrame) return Status::InvalidArgument("encode: frame too large");
  const StatusOr<const HotPaths*> hot = backends->Get(params.backend);
  if (!hot.ok()) return hot.status().WithContext("encode");
  EncodeReport local;
  EncodeReport* rep = report ? report : &local;
  *rep = EncodeReport();
  auto lap_start = std::chrono::steady_clock::now();
  const std::function<void(const char*)> lap = [&](const char* stage) {
    const auto now = std::chrono::steady_clock::now();
    rep->stage_ms.emplace_back(stage,
                               std::chrono::duration<double, std::milli>(now - lap_start).count());
    lap_start = now;
  };
  const FinitePoints points(frame);
  rep->non_finite_points = points.non_finite();
  rep->points_in = points.xyz().size();
  const Header base = BaseHeader(info, params);
  if (map == nullptr || points.xyz().empty()) {
    return EncodeIntra(points, prior, base, params.intensity, rep);
  }
  DeltaEncoder delta(**hot, points, base, params, map, ball, still, start, train, rep);
  lap("points");
  DV_RETURN_IF_ERROR(delta.Register(prior));
  lap("registration");
  DV_RETURN_IF_ERROR(delta.DeriveCandidates());
  lap("candidates");
  DV_RETURN_IF_ERROR(delta.Classify());
  lap("classification");
  // The cells first, on the calling thread: on two threads they take about as long as the
  // selection's parts together, which the other thread codes meanwhile.
  Status cells_coded;
  RunTasks(params.threads, 1 + delta.parts(), [&](int task) {
    if (task == 0) {
      cells_coded = delta.CodeCells(lap);
    } else {
      delta.CodeSelectionPart(task - 1, lap);
    }
  });
  DV_RETURN_IF_ERROR(cells_coded);
  if (params.threads > 1) lap("gap tests, selection and octree coding");
  std::vector<uint8_t> bytes = delta.Finish(lap);
  if (std::unique_ptr<StillFrame> kept = delta.TakeStillFrame()) {
    still->Keep(info.sensor_id, std::move(kept));
  }
  if (double(rep->explained_points) < params.min_explained_fraction * double(rep->points_in)) {
    EncodeReport intra_rep;
    intra_rep.points_in = rep->points_in;
    intra_rep.non_finite_points = rep->non_finite_points;
    DV_ASSIGN_OR_RETURN(std::vector<uint8_t> fallback,
                        EncodeIntra(points, prior, base, params.intensity, &intra_rep));
    if (fallback.size() < bytes.size()) {
      intra_rep.registration_correspondences = rep->registration_correspondences;
      *rep = std::move(intra_rep);
      return fallback;
    }
  }
  return bytes;
}

}  // namespace

struct Encoder::State {
  maps::RouteMap* map = nullptr;
  Backends backends;
  RegistrationBall ball;
  std::shared_ptr<StillMemory> still;
  ModelStates priors;
  Status priors_read;
};

std::shared_ptr<StillMemory> NewStillMemory() { return std::make_shared<StillMemory>(); }

Encoder::Encoder(maps::RouteMap* map, std::shared_ptr<StillMemory> still)
    : state_(std::make_unique<State>()) {
  state_->map = map;
  state_->still = still ? std::move(still) : NewStillMemory();
  if (map) state_->priors_read = ReadPriors(*map, &state_->priors).WithContext("encode");
}

Encoder::~Encoder() = default;
Encoder::Encoder(Encoder&&) noexcept = default;
Encoder& Encoder::operator=(Encoder&&) noexcept = default;

StatusOr<std::vector<uint8_t>> Encoder::Encode(const PointCloud& frame,
                                               const Pose& T_map_sensor_prior,
                                               const FrameInfo& info, const EncoderParams& params,
                                               EncodeReport* report) {
  DV_RETURN_IF_ERROR(state_->priors_read);
  return EncodeFrame(frame, T_map_sensor_prior, info, params, state_->map, &state_->backends,
                     &state_->ball, state_->still.get(), state_->priors, nullptr, report);
}

StatusOr<std::vector<uint8_t>> TrainPriors(const std::vector<Drive>& drives, int every,
                                           maps::RouteMap* map) {
  if (every < 1) return Status::InvalidArgument("train priors: every must be >= 1");
  std::vector<std::pair<size_t, size_t>> frames;  // (drive, frame)
  for (size_t d = 0; d < drives.size(); ++d) {
    if (drives[d].poses.size() != drives[d].size()) {
      return Status::InvalidArgument("train priors: " + drives[d].root + " has no poses");
    }
    for (size_t i = 0; i < drives[d].size(); i += size_t(every)) frames.emplace_back(d, i);
  }
  if (frames.empty()) return Status::InvalidArgument("train priors: no frames");
  // Evenly spread over the drives: the statistics settle within a few frames.
  const size_t n = std::min(frames.size(), kMaxPriorFrames);
  EncoderParams params;
  params.tolerance_m = map->resolution_m();
  params.intensity = false;
  ModelStates models = FreshModelStates();
  Backends backends;
  RegistrationBall ball;
  for (size_t k = 0; k < n; ++k) {
    const auto [d, i] = frames[k * frames.size() / n];
    DV_ASSIGN_OR_RETURN(PointCloud cloud, ReadPointCloudFile(drives[d].frame_paths[i]));
    // Each frame's models start where the last one's ended.
    const ModelStates start = models;
    DV_RETURN_IF_ERROR(EncodeFrame(cloud, drives[d].poses[i], {i, 0, 0}, params, map, &backends,
                                   &ball, nullptr, start, &models, nullptr)
                           .status()
                           .WithContext("train priors: " + drives[d].frame_paths[i]));
  }
  return WritePriors(models);
}

Status BuildMapWithPriors(const std::vector<Drive>& drives, const maps::BuildOptions& options,
                          const std::string& dir, maps::BuildReport* report) {
  DV_RETURN_IF_ERROR(maps::BuildMap(drives, options, dir, report));
  DV_ASSIGN_OR_RETURN(auto map, maps::OpenMap(dir, 0));
  DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> priors,
                      TrainPriors(drives, options.every, map.get()));
  return maps::SetCodecPriors(dir, priors);
}

}  // namespace dv::codec
