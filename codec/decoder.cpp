// The decoder, the encoder's mirror (encoder.cpp). An intra frame is one octree. A delta frame's
// stages are members of DeltaDecoder, in the order Decoder::Decode runs them:
//   ReadMapSection    the candidate radius and the selection's parts
//   ReadCells         the residual, gap and surface cells (they need no candidates)
//   DeriveCandidates  the map voxels within the radius of the frame's pose, as the encoder's
//   DecodeSelection   which candidates stand for points; beside it, the surface cells' heights
//   Assemble          the selected candidates' points, then the cells', then the fill's
// With threads the cells are read beside the candidates' derivation and the surface is placed
// beside the selection's parts; a frame decodes to the same points, or the same error, either way:
// errors are reported in the order one thread meets them.
#include <algorithm>
#include <memory>

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
#include "surface.h"

namespace dv::codec {
namespace {

// Cell sections smaller than this in all are read on the decoding thread: a second thread costs
// more than it saves on so little.
constexpr size_t kMinSplitCellBytes = 2048;

// Per point of DecodedFrame::source.
constexpr uint8_t kFromMap = 0, kFromResidual = 1, kFromGap = 2, kFromFill = 3;

void AppendCells(const CellCloud& cells, bool intensity, uint8_t source, DecodedFrame* out) {
  for (size_t i = 0; i < cells.centres.size(); ++i) {
    out->cloud.push_back(cells.centres[i],
                         intensity ? DequantizeIntensity6(cells.intensity[i]) : 0);
    out->source.push_back(source);
  }
}

Status Missing(uint8_t id) {
  return Status::Corruption(std::string("delta: missing section ") + SectionName(id));
}

// The cells of one octree section (geometry and, with intensity, its intensity section).
Status ReadCellSection(const std::vector<ParsedSection>& sections, uint8_t geometry_id,
                       uint8_t intensity_id, bool intensity, double step_m,
                       const OctreeModel& model, CellCloud* cells) {
  const ParsedSection* g = FindSection(sections, geometry_id);
  const ParsedSection* in = FindSection(sections, intensity_id);
  if (!g) return Missing(geometry_id);
  if (intensity && !in) return Missing(intensity_id);
  return DecodeCells(g->data, g->size, in ? in->data : nullptr, in ? in->size : 0, step_m,
                     intensity, model, kMaxPointsPerFrame, cells)
      .WithContext(std::string("delta: section ") + SectionName(geometry_id));
}

class DeltaDecoder {
 public:
  DeltaDecoder(const Header& h, const std::vector<ParsedSection>& sections, maps::RouteMap* map,
               const HotPaths& cpu, const ModelStates& priors, DecodedFrame* out)
      : h_(h), sections_(sections), map_(map), cpu_(cpu), priors_(priors), out_(out) {}

  // The map section: the candidate radius, the part count and each part's length but the last's.
  Status ReadMapSection() {
    const ParsedSection* ms = FindSection(sections_, kMapSelection);
    if (!ms) return Missing(kMapSelection);
    ByteReader r(ms->data, ms->size);
    if (!r.Varint(&radius_dm_) || radius_dm_ > kMaxRadiusDm) {
      return Status::Corruption("delta: bad candidate radius in the map section");
    }
    uint64_t parts = 0;
    if (!r.Varint(&parts) || parts < 1 || parts > kMaxSelectionParts) {
      return Status::Corruption("delta: bad part count in the map section");
    }
    part_size_.resize(parts);
    uint64_t sized = 0;
    for (uint64_t p = 0; p + 1 < parts; ++p) {
      if (!r.Varint(&part_size_[p]) || part_size_[p] > r.remaining() - sized) {
        return Status::Corruption("delta: bad part length in the map section");
      }
      sized += part_size_[p];
    }
    part_size_[parts - 1] = r.remaining() - sized;
    parts_ = r.position();
    return Status::Ok();
  }

  void ReadCells() {
    const bool i = out_->intensity;
    cells_read_ = ReadCellSection(sections_, kResidualGeometry, kResidualIntensity, i,
                                  CellStep(out_->residual_precision_m),
                                  OctreeModelFrom(priors_.residual), &residual_);
    if (!cells_read_.ok()) return;
    cells_read_ = ReadCellSection(sections_, kGapGeometry, kGapIntensity, i,
                                  CellStep(out_->tolerance_m), OctreeModelFrom(priors_.gap), &gap_);
    if (!cells_read_.ok()) return;
    cells_read_ = ReadCellSection(sections_, kSurfaceGeometry, kSurfaceIntensity, i,
                                  SurfaceStep(out_->tolerance_m), OctreeModelFrom(priors_.surface),
                                  &surface_);
  }

  void DeriveCandidates(int threads) {
    selection_read_ =
        codec::DeriveCandidates(cpu_, map_, h_.pose.R(), h_.pose.translation(),
                                double(radius_dm_) / 10, &cand_, kCandidateProjection, threads);
  }

  // Where the cell sections are large enough, the cells are read beside the candidates.
  Status ReadCellsAndCandidates(int threads) {
    size_t cell_bytes = 0;
    for (const ParsedSection& s : sections_) {
      if (s.id != kMapSelection && s.id != kFill) cell_bytes += s.size;
    }
    const bool beside = threads > 1 && cell_bytes >= kMinSplitCellBytes;
    RunBoth(
        beside, [&] { DeriveCandidates(beside ? 1 : threads); }, [&] { ReadCells(); });
    DV_RETURN_IF_ERROR(selection_read_);
    return cells_read_;
  }

  // The selection's parts, each on a thread of its own where threads allow; the surface cells'
  // heights on the map's profile go first, beside the first part, as they need only the
  // candidates.
  Status DecodeSelection(int threads) {
    SelectionCoder selection(cand_, SelectionModelFrom(priors_.selection), int(part_size_.size()),
                             &selected_, /*list_pairs=*/true);
    std::vector<Status> part_read(part_size_.size());
    const bool surface_beside = !surface_.centres.empty();
    RunTasks(threads, int(part_size_.size()) + surface_beside, [&](int task) {
      if (surface_beside && task == 0) return PlaceSurface();
      const size_t p = size_t(task - surface_beside);
      const uint8_t* stream = parts_;
      for (size_t q = 0; q < p; ++q) stream += part_size_[q];
      part_read[p] = selection.DecodePart(int(p), stream, part_size_[p]).WithContext("delta");
    });
    for (const Status& s : part_read) DV_RETURN_IF_ERROR(s);
    selection.TakePairs(&pairs_);
    if (!on_profile_) {
      return Status::Corruption("delta: section surface: a cell off the map's profile");
    }
    return Status::Ok();
  }

  // Every point in one allocation: the selected candidates', the cells', then at most three fill
  // points a selected pair (fill.h), so that a damaged count reserves no more than that.
  Status Assemble() {
    const ParsedSection* fill = FindSection(sections_, kFill);
    if (!fill) return Missing(kFill);
    size_t selected_count = 0;
    for (uint8_t s : selected_) selected_count += s;
    // One more for the selected points' spare slot (AppendSelected).
    size_t points = selected_count + 1 + residual_.centres.size() + gap_.centres.size() +
                    surface_.centres.size();
    ByteReader fill_reader(fill->data, fill->size);
    uint64_t frame_points = 0;
    if (fill_reader.Varint(&frame_points) && frame_points > points) {
      points += std::min(size_t(frame_points) - points, 3 * pairs_.size());
    }
    out_->cloud.reserve(points);
    out_->source.reserve(points);
    AppendSelected(selected_count);
    AppendCells(residual_, out_->intensity, kFromResidual, out_);
    AppendCells(gap_, out_->intensity, kFromGap, out_);
    const size_t first = out_->cloud.size();
    AppendCells(surface_, out_->intensity, kFromGap, out_);
    for (size_t i = 0; i < surface_z_.size(); ++i) out_->cloud.xyz[first + i].z() = surface_z_[i];
    size_t added = 0;
    DV_RETURN_IF_ERROR(
        DecodeFill(fill->data, fill->size, cand_, pairs_, out_->intensity, &out_->cloud, &added)
            .WithContext("delta"));
    out_->source.resize(out_->cloud.size(), kFromFill);
    return Status::Ok();
  }

 private:
  // The surface cells' heights (z) on the map's profile; on_profile_ false where a cell is off it.
  void PlaceSurface() {
    surface_z_.resize(surface_.centres.size());
    const SurfaceProfile profile(cand_, surface_.centres);
    for (size_t i = 0; i < surface_z_.size() && on_profile_; ++i) {
      on_profile_ = profile.HeightAt(i, &surface_z_[i]);
    }
  }

  // The selected candidates' points without a branch: every candidate's point is written to the
  // next slot, and only a selected one moves on from it (the last candidate's may write the spare
  // slot); a branch a candidate would be mispredicted often. The intensities from a table.
  void AppendSelected(size_t selected_count) {
    float voxel_intensity[256];
    for (int v = 0; v < 256; ++v) voxel_intensity[v] = out_->intensity ? float(v) / 255.0f : 0.0f;
    out_->cloud.xyz.resize(selected_count + 1);
    out_->cloud.intensity.resize(selected_count + 1);
    Eigen::Vector3f* xyz = out_->cloud.xyz.data();
    float* point_intensity = out_->cloud.intensity.data();
    for (size_t i = 0, n = 0; i < selected_.size(); ++i) {
      xyz[n] = cand_.sensor[i];
      point_intensity[n] = voxel_intensity[cand_.voxels[i].intensity];
      n += selected_[i];
    }
    out_->cloud.xyz.resize(selected_count);
    out_->cloud.intensity.resize(selected_count);
    out_->source.assign(selected_count, kFromMap);
  }

  const Header& h_;
  const std::vector<ParsedSection>& sections_;
  maps::RouteMap* map_;
  const HotPaths& cpu_;  // the candidates' projection
  const ModelStates& priors_;
  DecodedFrame* out_;
  // ReadMapSection
  uint64_t radius_dm_ = 0;
  std::vector<uint64_t> part_size_;
  const uint8_t* parts_ = nullptr;  // the first part's stream, the others after it
  // ReadCells
  CellCloud residual_, gap_, surface_;
  Status cells_read_;
  // DeriveCandidates
  Candidates cand_;
  Status selection_read_;
  // DecodeSelection
  std::vector<uint8_t> selected_;
  std::vector<SelectedPair> pairs_;
  std::vector<float> surface_z_;
  bool on_profile_ = true;
};

}  // namespace

struct Decoder::State {
  maps::RouteMap* map = nullptr;
  std::unique_ptr<HotPaths> cpu = MakeCpuHotPaths();
  ModelStates priors;
  Status priors_read;
};

Decoder::Decoder(maps::RouteMap* map) : state_(std::make_unique<State>()) {
  state_->map = map;
  if (map) state_->priors_read = ReadPriors(*map, &state_->priors).WithContext("delta");
}

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

StatusOr<DecodedFrame> Decoder::Decode(const uint8_t* data, size_t size, int threads) {
  Header h;
  std::vector<ParsedSection> sections;
  DV_RETURN_IF_ERROR(ParseContainer(data, size, &h, &sections));
  DecodedFrame out = HeaderFields(h, sections);
  if (out.intra) {
    CellCloud cells;
    DV_RETURN_IF_ERROR(ReadCellSection(sections, kIntraGeometry, kIntraIntensity, out.intensity,
                                       CellStep(out.tolerance_m), OctreeModelFrom(), &cells));
    AppendCells(cells, out.intensity, kFromResidual, &out);
    return out;
  }
  maps::RouteMap* map = state_->map;
  if (map == nullptr) {
    return Status::InvalidArgument("delta: frame was coded against map " + out.map_version +
                                   "; no map given");
  }
  if (map->version_id() != h.map_id) {
    return Status::InvalidArgument("delta: frame was coded against map " + out.map_version +
                                   ", the map given is " + map->version());
  }
  DV_RETURN_IF_ERROR(state_->priors_read);
  DeltaDecoder delta(h, sections, map, *state_->cpu, state_->priors, &out);
  DV_RETURN_IF_ERROR(delta.ReadMapSection());
  DV_RETURN_IF_ERROR(delta.ReadCellsAndCandidates(threads));
  DV_RETURN_IF_ERROR(delta.DecodeSelection(threads));
  DV_RETURN_IF_ERROR(delta.Assemble());
  return out;
}

}  // namespace dv::codec
