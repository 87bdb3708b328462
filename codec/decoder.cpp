// The decoder, the encoder's mirror (encoder.cpp).
#include <algorithm>
#include <memory>

#include "container.h"
#include "dejaview/base/bytes.h"
#include "dejaview/base/fork_join.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"
#include "fill.h"
#include "hot_paths.h"
#include "map_coder.h"
#include "octree_coder.h"
#include "priors.h"
#include "surface.h"

namespace dv::codec {
namespace {

void AppendCells(const CellCloud& cells, bool intensity, uint8_t source, DecodedFrame* out) {
  for (size_t i = 0; i < cells.centres.size(); ++i) {
    out->cloud.push_back(cells.centres[i],
                         intensity ? DequantizeIntensity6(cells.intensity[i]) : 0);
    out->source.push_back(source);
  }
}

// Cell sections smaller than this in all are read on the decoding thread: at T = 0.4 on KITTI 00
// (about 900 bytes a frame) a second thread made decoding 0-0.7 ms slower, not faster.
constexpr size_t kMinSplitCellBytes = 2048;

}  // namespace

struct Decoder::State {
  maps::RouteMap* map = nullptr;
  std::unique_ptr<HotPaths> cpu = MakeCpuHotPaths();  // the candidates' projection
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
  maps::RouteMap* map = state_->map;
  Header h;
  std::vector<ParsedSection> sections;
  DV_RETURN_IF_ERROR(ParseContainer(data, size, &h, &sections));
  DV_ASSIGN_OR_RETURN(DecodedFrame out, DecodeHeader(data, size));
  const bool intensity = out.intensity;
  static const ModelStates kNoPriors;
  const ModelStates& priors = h.version >= kVersionPriors ? state_->priors : kNoPriors;
  auto decode_cells = [&](uint8_t gid, uint8_t iid, double step_m, CellCloud* c) -> Status {
    static const std::vector<BitModel> kNone;
    const std::vector<BitModel>& start = gid == kResidualGeometry  ? priors.residual
                                         : gid == kGapGeometry     ? priors.gap
                                         : gid == kSurfaceGeometry ? priors.surface
                                                                   : kNone;
    const ParsedSection* g = FindSection(sections, gid);
    const ParsedSection* in = FindSection(sections, iid);
    if (!g) return Status::Corruption(std::string("delta: missing section ") + SectionName(gid));
    if (intensity && !in) {
      return Status::Corruption(std::string("delta: missing section ") + SectionName(iid));
    }
    return DecodeCells(g->data, g->size, in ? in->data : nullptr, in ? in->size : 0, step_m,
                       intensity, OctreeModelOf(h.version, start), kMaxPointsPerFrame, c)
        .WithContext(std::string("delta: section ") + SectionName(gid));
  };
  if (out.intra) {
    CellCloud c;
    DV_RETURN_IF_ERROR(
        decode_cells(kIntraGeometry, kIntraIntensity, CellStep(out.tolerance_m), &c));
    AppendCells(c, intensity, 1, &out);
    return out;
  }
  if (map == nullptr) {
    return Status::InvalidArgument("delta: frame was coded against map " + out.map_version +
                                   "; no map given");
  }
  if (map->version_id() != h.map_id) {
    return Status::InvalidArgument("delta: frame was coded against map " + out.map_version +
                                   ", the map given is " + map->version());
  }
  const ParsedSection* ms = FindSection(sections, kMapSelection);
  if (!ms) return Status::Corruption("delta: missing section map");
  ByteReader r(ms->data, ms->size);
  uint64_t radius_dm = 0;
  if (!r.Varint(&radius_dm) || radius_dm > 100000) {
    return Status::Corruption("delta: bad candidate radius in the map section");
  }
  // The selection's parts (one before version 9): each part's stream, the last to the end.
  uint64_t parts = 1;
  if (h.version >= kVersionParts &&
      (!r.Varint(&parts) || parts < 1 || parts > kMaxSelectionParts)) {
    return Status::Corruption("delta: bad part count in the map section");
  }
  std::vector<uint64_t> part_size(parts);
  uint64_t sized = 0;
  for (uint64_t p = 0; p + 1 < parts; ++p) {
    if (!r.Varint(&part_size[p]) || part_size[p] > r.remaining() - sized) {
      return Status::Corruption("delta: bad part length in the map section");
    }
    sized += part_size[p];
  }
  part_size[parts - 1] = r.remaining() - sized;
  if (h.version >= kVersionPriors) DV_RETURN_IF_ERROR(state_->priors_read);
  // With threads: the cell sections (residual, gap, surface), which need neither the candidates
  // nor the selection, are decoded beside the candidates' derivation; then the surface cells are
  // placed on the map's profile, which needs the candidates, beside the selection's decoding.
  // Errors are reported in the order one thread meets them: the selection's first.
  Candidates cand;
  std::vector<uint8_t> selected;
  std::vector<SelectedPair> pairs;
  CellCloud residual, gap, surface;
  Status selection_read, cells_read;
  auto read_cells = [&] {
    cells_read = decode_cells(kResidualGeometry, kResidualIntensity,
                              CellStep(out.residual_precision_m), &residual);
    if (cells_read.ok() && h.version >= kVersionGap) {
      cells_read = decode_cells(kGapGeometry, kGapIntensity, CellStep(out.tolerance_m), &gap);
    }
    if (cells_read.ok() && h.version >= kVersionSurface) {
      cells_read =
          decode_cells(kSurfaceGeometry, kSurfaceIntensity, SurfaceStep(out.tolerance_m), &surface);
    }
  };
  // Where the cell sections are small (T >= 0.4 on KITTI) a second thread cost more than it saved.
  size_t cell_bytes = 0;
  for (const ParsedSection& s : sections) {
    if (s.id != kMapSelection && s.id != kFill) cell_bytes += s.size;
  }
  const bool cells_beside = threads > 1 && cell_bytes >= kMinSplitCellBytes;
  RunBoth(
      cells_beside,
      [&] {
        selection_read = DeriveCandidates(*state_->cpu, map, h.pose.R(), h.pose.translation(),
                                          double(radius_dm) / 10, &cand, kCandidateProjection,
                                          cells_beside ? 1 : threads);
      },
      read_cells);
  // The surface cells' heights on the map's profile (z), false where a cell is off it.
  std::vector<float> surface_z(surface.centres.size());
  bool on_profile = true;
  // Read before the selection's decoding, which may run beside and writes selection_read.
  const bool placeable = selection_read.ok() && cells_read.ok();
  auto place_surface = [&] {
    if (!placeable || surface.centres.empty()) return;
    const SurfaceProfile profile(cand, surface.centres);
    for (size_t i = 0; i < surface_z.size() && on_profile; ++i) {
      on_profile = profile.HeightAt(i, &surface_z[i]);
    }
  };
  const SelectionModel selection_model = SelectionModelOf(h.version, priors.selection);
  SelectionCoder selection(cand, selection_model, int(parts), &selected, h.version >= kVersionFill);
  std::vector<Status> part_read(parts);
  // The profile's cost is mostly binning the candidates (1.3 ms at T = 0.1 on KITTI 00), whatever
  // the number of surface cells; it goes first, and the other thread takes the first part.
  const bool beside = !surface.centres.empty();
  if (selection_read.ok()) {
    RunTasks(threads, int(parts) + beside, [&](int task) {
      if (beside && task == 0) return place_surface();
      const size_t p = size_t(task - beside);
      const uint8_t* stream = r.position();
      for (size_t q = 0; q < p; ++q) stream += part_size[q];
      part_read[p] = selection.DecodePart(int(p), stream, part_size[p]).WithContext("delta");
    });
  }
  for (const Status& s : part_read) {
    if (selection_read.ok()) selection_read = s;
  }
  if (selection_read.ok()) selection.TakePairs(&pairs);
  DV_RETURN_IF_ERROR(selection_read);
  DV_RETURN_IF_ERROR(cells_read);
  // The frame's points in one allocation: growing the arrays point by point cost 0.75 ms a frame
  // (KITTI 00, T = 0.1). The fill adds up to the section's count of the original points, and at
  // most three points a selected pair (fill.h): a damaged count reserves no more than that.
  size_t selected_count = 0;
  for (uint8_t s : selected) selected_count += s;
  // One more for the selected points' spare slot (below).
  size_t decoded_points =
      selected_count + 1 + residual.centres.size() + gap.centres.size() + surface.centres.size();
  const ParsedSection* fill = FindSection(sections, kFill);
  if (fill) {
    ByteReader fill_reader(fill->data, fill->size);
    uint64_t frame_points = 0;
    if (fill_reader.Varint(&frame_points) && frame_points > decoded_points) {
      decoded_points += std::min(size_t(frame_points) - decoded_points, 3 * pairs.size());
    }
  }
  out.cloud.reserve(decoded_points);
  out.source.reserve(decoded_points);
  // The selected candidates' points without a branch: every candidate's point is written to the
  // next slot, and only a selected one moves on from it (the last candidate's may write the spare
  // slot). A branch a candidate mispredicted on about a fifth of them: 5.8% of the decoder's time
  // at T = 0.1 (KITTI 00). The intensities from a table of the same divisions.
  float voxel_intensity[256];
  for (int v = 0; v < 256; ++v) voxel_intensity[v] = intensity ? float(v) / 255.0f : 0.0f;
  out.cloud.xyz.resize(selected_count + 1);
  out.cloud.intensity.resize(selected_count + 1);
  Eigen::Vector3f* xyz = out.cloud.xyz.data();
  float* point_intensity = out.cloud.intensity.data();
  for (size_t i = 0, n = 0; i < selected.size(); ++i) {
    xyz[n] = cand.sensor[i];
    point_intensity[n] = voxel_intensity[cand.voxels[i].intensity];
    n += selected[i];
  }
  out.cloud.xyz.resize(selected_count);
  out.cloud.intensity.resize(selected_count);
  out.source.assign(selected_count, 0);
  AppendCells(residual, intensity, 1, &out);
  AppendCells(gap, intensity, 2, &out);
  if (!on_profile) {
    return Status::Corruption("delta: section surface: a cell off the map's profile");
  }
  const size_t first = out.cloud.size();
  AppendCells(surface, intensity, 2, &out);
  for (size_t i = 0; i < surface_z.size(); ++i) out.cloud.xyz[first + i].z() = surface_z[i];
  if (h.version >= kVersionFill) {
    if (!fill) return Status::Corruption("delta: missing section fill");
    size_t added = 0;
    DV_RETURN_IF_ERROR(
        DecodeFill(fill->data, fill->size, cand, pairs, intensity, &out.cloud, &added)
            .WithContext("delta"));
    out.source.resize(out.cloud.size(), 3);
  }
  return out;
}

}  // namespace dv::codec
