// Encode and Decode: the container of docs/delta-format.md around the map section
// (map_coder.h) and the octree sections (octree_coder.h).
#include "dejaview/codec/codec.h"

#include <Eigen/Geometry>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"
#include "dejaview/base/fork_join.h"
#include "dejaview/base/kitti.h"
#include "fill.h"
#include "hot_paths.h"
#include "map_coder.h"
#include "octree_coder.h"
#include "registration.h"

namespace dv::codec {
namespace {

constexpr char kMagic[4] = {'D', 'V', 'D', 'F'};
// Version 2 added the gap sections (a version 1 decoder would skip them and break the bound).
// Version 3 changes the statistics only: kCounted models in every range-coded
// stream and a context of each face neighbour's state for the selection bits. Every delta frame of
// version 3 carries the gap sections (empty when no point is in the gap class). Versions 1 and 2
// are still decoded, with their own models. Version 4 adds the causal child-level neighbours to
// the octree sections' contexts (octree_coder.h, OctreeModel). Version 5 models the selection
// bits by the causal neighbours on the candidate's scan ring (map_coder.h). Version 6, the one
// written, adds the surface sections: gap points on the map's ground profile, coded as 2D cells
// whose height the decoder reads off the map (SurfaceProfile). Version 7, the one written, starts
// the models of the map, residual, gap and surface streams from the priors the map carries
// (TrainPriors), where it carries any. Version 8 adds the fill section. Version 9, the one
// written, codes the map section's bits in parts that decode at once (map_coder.h SelectionCoder).
constexpr uint8_t kVersionPlain = 1, kVersionGap = 2, kVersionCounted = 3, kVersionCausal = 4,
                  kVersionRing = 5, kVersionSurface = 6, kVersionPriors = 7, kVersionFill = 8,
                  kVersionParts = 9;
constexpr uint8_t kModeIntra = 0, kModeDelta = 1;
constexpr uint8_t kFlagIntensity = 1;
enum Section : uint8_t {
  kMapSelection = 1,
  kResidualGeometry = 2,
  kResidualIntensity = 3,
  kIntraGeometry = 4,
  kIntraIntensity = 5,
  kGapGeometry = 6,
  kGapIntensity = 7,
  kSurfaceGeometry = 8,
  kSurfaceIntensity = 9,
  kFill = 10,
};
constexpr int kMaxSections = 8;
// Every decision of the encoder keeps this much below the tolerance, so that float rounding of
// decoded coordinates (about 1e-5 m at 100 m) can never break the bound.
constexpr double kMarginM = 1e-4;
constexpr double kTranslationStepM = 1e-4;
constexpr double kQuaternionScale = double(1 << 30);
constexpr double kRegistrationSlackM = 3.0;
// Beyond any automotive LiDAR's range (an HDL-64E reaches 120 m).
constexpr double kMaxCandidateRadiusM = 300.0;

const char* SectionName(uint8_t id) {
  switch (id) {
    case kMapSelection:
      return "map";
    case kResidualGeometry:
      return "residual";
    case kResidualIntensity:
      return "residual_intensity";
    case kIntraGeometry:
      return "intra";
    case kIntraIntensity:
      return "intra_intensity";
    case kGapGeometry:
      return "gap";
    case kGapIntensity:
      return "gap_intensity";
    case kSurfaceGeometry:
      return "surface";
    case kSurfaceIntensity:
      return "surface_intensity";
    case kFill:
      return "fill";
    default:
      return "unknown";
  }
}

Adaptation AdaptationOf(uint8_t version) {
  return version >= kVersionCounted ? Adaptation::kCounted : Adaptation::kShift4;
}

// priors: the map's (MapPriors), empty for none.
SelectionModel SelectionModelOf(uint8_t version, const std::vector<BitModel>& priors) {
  SelectionModel m{AdaptationOf(version),
                   version >= kVersionRing      ? NeighbourContext::kRingNeighbours
                   : version >= kVersionCounted ? NeighbourContext::kFaceStates
                                                : NeighbourContext::kSelectedFaces};
  if (version >= kVersionPriors && !priors.empty()) m.start = priors.data();
  return m;
}

// The starting states of a delta frame's range-coded streams (version 7), from the map's codec
// priors (docs/map-format.md, "Codec priors"), by the section that holds each stream: empty, the
// models start at one half.
struct ModelStates {
  std::vector<BitModel> selection, residual, gap, surface;
};

// "DVCP" | u8 version 1 | u8 streams = 4 | per stream: u8 section id, u32 count, count x (u16 p,
// u8 uses), little-endian; the streams of sections map, residual, gap, surface, in that order.
constexpr char kPriorsMagic[4] = {'D', 'V', 'C', 'P'};
constexpr uint8_t kPriorsVersion = 1;
struct PriorStream {
  uint8_t section;
  size_t count;
  std::vector<BitModel> ModelStates::*states;
};
constexpr uint8_t kPriorStreams = 4;
const PriorStream kPriorStream[kPriorStreams] = {
    {kMapSelection, kSelectionModels, &ModelStates::selection},
    {kResidualGeometry, kOctreeModels, &ModelStates::residual},
    {kGapGeometry, kOctreeModels, &ModelStates::gap},
    {kSurfaceGeometry, kOctreeModels, &ModelStates::surface}};

std::vector<uint8_t> WritePriors(const ModelStates& states) {
  ByteWriter w;
  w.Bytes(reinterpret_cast<const uint8_t*>(kPriorsMagic), 4);
  w.U8(kPriorsVersion);
  w.U8(kPriorStreams);
  for (const PriorStream& stream : kPriorStream) {
    const std::vector<BitModel>& models = states.*stream.states;
    w.U8(stream.section);
    w.U32(uint32_t(models.size()));
    for (const BitModel& m : models) {
      w.U16(m.p);
      w.U8(m.uses);
    }
  }
  return w.Take();
}

Status MapPriors(const maps::RouteMap& map, ModelStates* out) {
  *out = ModelStates();
  const std::vector<uint8_t>& b = map.codec_priors();
  if (b.empty()) return Status::Ok();
  auto bad = [&](const std::string& what) {
    *out = ModelStates();
    return Status::Corruption("map " + map.version() + ": codec priors: " + what);
  };
  ByteReader r(b.data(), b.size());
  uint8_t magic[4] = {0, 0, 0, 0}, version = 0, streams = 0;
  if (!r.Bytes(magic, 4) || std::memcmp(magic, kPriorsMagic, 4) != 0) return bad("bad magic");
  if (!r.U8(&version) || version != kPriorsVersion) return bad("unsupported version");
  if (!r.U8(&streams) || streams != kPriorStreams) return bad("expected 4 streams");
  for (const PriorStream& stream : kPriorStream) {
    const std::string name = SectionName(stream.section);
    uint8_t section = 0;
    uint32_t count = 0;
    if (!r.U8(&section) || section != stream.section || !r.U32(&count) || count != stream.count ||
        r.remaining() < 3 * size_t(count)) {
      return bad("expected " + std::to_string(stream.count) + " " + name + " models");
    }
    std::vector<BitModel>& models = out->*stream.states;
    models.resize(count);
    for (BitModel& m : models) {
      // The range coder keeps p in [1, 65535] and uses in [0, 32].
      if (!r.U16(&m.p) || !r.U8(&m.uses) || m.p == 0 || m.uses > 32) {
        return bad("a " + name + " model state out of range");
      }
    }
  }
  if (r.remaining() != 0) return bad("trailing bytes");
  return Status::Ok();
}

// start: the section's priors (ModelStates), empty for none.
OctreeModel OctreeModelOf(uint8_t version, const std::vector<BitModel>& start = {}) {
  OctreeModel m{AdaptationOf(version), version >= kVersionCausal};
  if (version >= kVersionPriors && !start.empty()) m.start = start.data();
  return m;
}

uint64_t ZigZag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t UnZigZag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

// The pose as transmitted: translation in 0.1 mm, unit quaternion (w >= 0) in units of 2^-30.
struct QuantPose {
  int64_t t[3] = {0, 0, 0};
  int64_t q[4] = {1 << 30, 0, 0, 0};

  Eigen::Matrix3d R() const {
    return RotationOf(Eigen::Vector4d(double(q[0]), double(q[1]), double(q[2]), double(q[3])));
  }
  Eigen::Vector3d translation() const {
    return Eigen::Vector3d(double(t[0]), double(t[1]), double(t[2])) * kTranslationStepM;
  }
  Pose pose() const {
    Pose T = Pose::Identity();
    T.linear() = R();
    T.translation() = translation();
    return T;
  }
};

QuantPose Quantize(const Pose& T) {
  QuantPose qp;
  for (int a = 0; a < 3; ++a) qp.t[a] = std::llround(T.translation()[a] / kTranslationStepM);
  Eigen::Quaterniond q(T.linear());
  q.normalize();
  if (q.w() < 0) q.coeffs() = -q.coeffs();
  const double c[4] = {q.w(), q.x(), q.y(), q.z()};
  for (int a = 0; a < 4; ++a) qp.q[a] = std::llround(c[a] * kQuaternionScale);
  return qp;
}

// Cell side such that a cell's centre is within `bound_m` of every point inside it.
double CellStep(double bound_m) { return 2 * (bound_m - kMarginM) / std::sqrt(3.0); }

struct Header {
  uint8_t version = kVersionParts;
  uint8_t mode = kModeIntra;
  uint8_t flags = 0;
  uint64_t tolerance_um = 0;
  uint64_t residual_um = 0;
  FrameInfo info;
  uint64_t map_id = 0;
  QuantPose pose;
  std::vector<std::pair<uint8_t, std::vector<uint8_t>>> sections;
};

std::vector<uint8_t> WriteContainer(const Header& h) {
  ByteWriter w;
  w.Bytes(kMagic, 4);
  w.U8(h.version);
  w.U8(h.mode);
  w.U8(h.flags);
  w.Varint(h.tolerance_um);
  w.Varint(h.residual_um);
  w.Varint(h.info.sequence);
  w.Varint(ZigZag(h.info.timestamp_ns));
  w.Varint(h.info.sensor_id);
  if (h.mode == kModeDelta) w.U64(h.map_id);
  for (int64_t v : h.pose.t) w.Varint(ZigZag(v));
  for (int64_t v : h.pose.q) w.Varint(ZigZag(v));
  w.U8(uint8_t(h.sections.size()));
  for (const auto& [id, body] : h.sections) {
    w.U8(id);
    w.Varint(body.size());
  }
  for (const auto& s : h.sections) w.Bytes(s.second.data(), s.second.size());
  w.U32(crc32c::Mask(crc32c::Value(w.buffer().data(), w.size())));
  return w.Take();
}

// Sections point into the input (offset, length).
struct ParsedSection {
  uint8_t id;
  const uint8_t* data;
  size_t size;
};

Status ParseContainer(const uint8_t* data, size_t size, Header* h,
                      std::vector<ParsedSection>* sections) {
  auto bad = [](const std::string& what) { return Status::Corruption("delta: " + what); };
  if (size < 4 || std::memcmp(data, kMagic, 4) != 0) {
    return bad("not a dejaview delta frame (bad magic)");
  }
  ByteReader r(data, size);
  r.Skip(4);
  uint8_t nsec = 0;
  uint64_t ts = 0, sensor = 0;
  r.U8(&h->version);
  if (!r.failed() && (h->version < kVersionPlain || h->version > kVersionParts)) {
    return bad("unsupported format version " + std::to_string(h->version));
  }
  r.U8(&h->mode);
  r.U8(&h->flags);
  r.Varint(&h->tolerance_um);
  r.Varint(&h->residual_um);
  r.Varint(&h->info.sequence);
  r.Varint(&ts);
  r.Varint(&sensor);
  h->info.timestamp_ns = UnZigZag(ts);
  h->info.sensor_id = uint32_t(sensor);
  if (h->mode == kModeDelta) r.U64(&h->map_id);
  for (int64_t& v : h->pose.t) {
    uint64_t z = 0;
    r.Varint(&z);
    v = UnZigZag(z);
  }
  for (int64_t& v : h->pose.q) {
    uint64_t z = 0;
    r.Varint(&z);
    v = UnZigZag(z);
  }
  r.U8(&nsec);
  if (r.failed()) return bad("truncated header (" + std::to_string(size) + " bytes)");
  if (h->mode != kModeIntra && h->mode != kModeDelta) {
    return bad("unknown mode " + std::to_string(h->mode));
  }
  if (sensor > UINT32_MAX) return bad("sensor_id out of range");
  if (h->tolerance_um < 1000 || h->tolerance_um > 10000000) return bad("tolerance out of range");
  if (h->residual_um <= uint64_t(2 * kMarginM * 1e6) || h->residual_um > h->tolerance_um) {
    return bad("residual precision out of range");
  }
  for (int64_t v : h->pose.t) {
    if (std::llabs(v) > (int64_t(1) << 50)) return bad("pose translation out of range");
  }
  int64_t qn = 0;
  for (int64_t v : h->pose.q) {
    if (std::llabs(v) > (int64_t(1) << 31)) return bad("pose rotation out of range");
    qn = std::max<int64_t>(qn, std::llabs(v));
  }
  if (qn < (int64_t(1) << 29)) return bad("pose rotation is not a unit quaternion");
  if (nsec > kMaxSections) return bad("too many sections (" + std::to_string(nsec) + ")");
  std::vector<std::pair<uint8_t, uint64_t>> table(nsec);
  uint64_t total = 0;
  for (auto& [id, len] : table) {
    r.U8(&id);
    r.Varint(&len);
    if (len > size) {
      return bad("truncated: section of " + std::to_string(len) + " bytes in a " +
                 std::to_string(size) + "-byte input");
    }
    total += len;
  }
  if (r.failed()) return bad("truncated section table");
  if (total + 4 > r.remaining()) {
    return bad("truncated: sections need " + std::to_string(total + 4) + " bytes, " +
               std::to_string(r.remaining()) + " present");
  }
  if (total + 4 < r.remaining()) return bad("trailing bytes after the last section");
  uint32_t stored = 0;
  std::memcpy(&stored, data + size - 4, 4);
  if (crc32c::Unmask(stored) != crc32c::Value(data, size - 4)) return bad("checksum mismatch");
  sections->clear();
  const uint8_t* p = r.position();
  for (const auto& [id, len] : table) {
    for (const ParsedSection& s : *sections) {
      if (s.id == id) return bad(std::string("duplicate section ") + SectionName(id));
    }
    if ((id == kGapGeometry || id == kGapIntensity) &&
        (h->version < kVersionGap || h->mode != kModeDelta)) {
      return bad(std::string("section ") + SectionName(id) +
                 " is only valid in a delta frame of version 2 or later");
    }
    if ((id == kSurfaceGeometry || id == kSurfaceIntensity) &&
        (h->version < kVersionSurface || h->mode != kModeDelta)) {
      return bad(std::string("section ") + SectionName(id) +
                 " is only valid in a delta frame of version 6 or later");
    }
    if (id == kFill && (h->version < kVersionFill || h->mode != kModeDelta)) {
      return bad("section fill is only valid in a delta frame of version 8 or later");
    }
    sections->push_back({id, p, size_t(len)});
    p += len;
  }
  return Status::Ok();
}

const ParsedSection* FindSection(const std::vector<ParsedSection>& s, uint8_t id) {
  for (const ParsedSection& x : s) {
    if (x.id == id) return &x;
  }
  return nullptr;
}

void AppendCells(const CellCloud& cells, bool intensity, uint8_t source, DecodedFrame* out) {
  for (size_t i = 0; i < cells.centres.size(); ++i) {
    out->cloud.push_back(cells.centres[i],
                         intensity ? DequantizeIntensity6(cells.intensity[i]) : 0);
    out->source.push_back(source);
  }
}

void Report(const Header& h, EncodeReport* report) {
  report->section_bytes.clear();
  for (const auto& [id, body] : h.sections)
    report->section_bytes.emplace_back(SectionName(id), body.size());
}

Header BaseHeader(const FrameInfo& info, const EncoderParams& p, double residual_m) {
  Header h;
  h.info = info;
  h.flags = p.intensity ? kFlagIntensity : 0;
  // Rounded down: the bound stated in the header is never looser than the one asked for.
  h.tolerance_um = uint64_t(std::floor(p.tolerance_m * 1e6 + 1e-6));
  h.residual_um = uint64_t(std::floor(residual_m * 1e6 + 1e-6));
  return h;
}

Status AddCellSections(const std::vector<Eigen::Vector3f>& pts, const std::vector<float>& inten,
                       double step_m, bool intensity, uint8_t geometry_id, uint8_t intensity_id,
                       const OctreeModel& model, Header* h, size_t* cells = nullptr) {
  std::vector<uint8_t> geometry, ibytes;
  CellCloud decoded;
  DV_RETURN_IF_ERROR(EncodeCells(pts, inten, step_m, intensity, model, &geometry, &ibytes,
                                 cells ? &decoded : nullptr));
  if (cells) *cells += decoded.centres.size();
  h->sections.emplace_back(geometry_id, std::move(geometry));
  if (intensity) h->sections.emplace_back(intensity_id, std::move(ibytes));
  return Status::Ok();
}

// The second gap test, for the points the first left out: a point on a map surface between two
// of the map's samples along its azimuth -- mostly ground between the scan rings of the map's
// source frames, metres apart at 20-50 m, where the first test's radius cannot reach. Per column of
// the angular grid, the candidates' horizontal distance h and height z (sensor frame); a point is
// on the surface when candidates within gap_m of its height lie both nearer and farther than it in
// its column, each within kSurfaceWindow of its h. Something standing in front of what the map saw
// behind it -- a moving car, a pedestrian -- has no map sample at its height on its near side and
// stays residual (on KITTI 00 at T = 0.1, 12 more of the 343 moving points went to the gap class,
// BENCHMARK.md). Encoder only: the decoder reads each cell's class from the section it is in.
constexpr double kSurfaceWindow = 0.1;  // of the point's horizontal distance
// The surface profile's reach (of a point's horizontal distance) and the side of a surface cell
// (of the bound): its centre's horizontal offset leaves the profile's height error 0.14 of the
// bound at a corner and more towards the middle. Measured on KITTI 00 at T = 0.1 (BENCHMARK.md):
// sides 1.2 / 1.4 / 1.6 gave 72.6 / 73.4 / 73.2, reach 0.1 / 0.2 / 0.3 gave 73.8 / 74.1 / 74.1.
constexpr double kProfileWindow = 0.2;
constexpr double kSurfaceStepFactor = 1.4;
// Below this many bytes of surface cells the encoder also codes the gap class in one octree and
// keeps the smaller (on KITTI 00 the one octree won at T >= 0.3, where the surface is a few
// hundred bytes a frame: its section's models start from nothing).
constexpr size_t kSmallSurfaceBytes = 1024;
void MarkOnMapSurface(const std::vector<Eigen::Vector3f>& pts, const Candidates& cand, double gap_m,
                      std::vector<uint8_t>* near) {
  if (std::find(near->begin(), near->end(), 0) == near->end()) return;
  // The candidates bucketed by column and by the square of their horizontal distance, in bins of
  // a factor sqrt(2) (the float's exponent and top mantissa bit: no root, no division; a
  // counting sort), so that a point scans three buckets of its column: they hold every sample
  // within kSurfaceWindow of its distance (squares 0.81 to 1.21 times its own, less than a bin
  // either way), at any height. Bucketed by height in bins of 0.3 m instead, a point scanned
  // 180 samples (KITTI 00, T = 0.05), most of them its column's dense ground near the sensor.
  constexpr int kBins = 56;                      // squares from 2^-6 (h = 0.125 m) to 2^22
  constexpr uint32_t kFirst = (127u - 6u) << 1;  // bin 0: exponent 2^-6, top bit 0
  auto bin = [](float h2) {
    uint32_t b;
    std::memcpy(&b, &h2, 4);  // h2 >= 0 (or +inf): the bits order as the values do
    const uint32_t k = b >> 22;
    return k < kFirst ? 0u : std::min(k - kFirst, uint32_t(kBins - 1));
  };
  auto h2_of = [](const Eigen::Vector3f& p) { return p.x() * p.x() + p.y() * p.y(); };
  // Per point tested, the buckets it scans (its own and the two beside it in its column); only
  // those are filled.
  struct Tested {
    size_t i;
    uint32_t lo, hi;
  };
  std::vector<Tested> tested;
  std::vector<uint8_t> wanted(size_t(kAngularCols) * kBins, 0);
  for (size_t i = 0; i < pts.size(); ++i) {
    if ((*near)[i]) continue;
    const uint32_t b = bin(h2_of(pts[i]));
    const uint32_t column_start = uint32_t(AngularColumn(pts[i])) * kBins;
    const uint32_t lo = column_start + (b > 0 ? b - 1 : 0);
    const uint32_t hi = column_start + std::min(b + 2, uint32_t(kBins));
    std::fill(wanted.begin() + ptrdiff_t(lo), wanted.begin() + ptrdiff_t(hi), uint8_t(1));
    tested.push_back({i, lo, hi});
  }
  struct Sample {
    float h, z;
  };
  std::vector<uint32_t> start(wanted.size() + 1, 0);
  std::vector<uint32_t> where(cand.cell.size());
  for (size_t j = 0; j < cand.cell.size(); ++j) {
    // Outside the grid: bucket 0 of column 0 with nothing to count (wanted or not, never filled).
    const bool in = cand.cell[j] >= 0;
    where[j] = in ? uint32_t(cand.cell[j] % kAngularCols) * kBins + bin(h2_of(cand.sensor[j]))
                  : uint32_t(wanted.size());
  }
  wanted.push_back(0);  // the bucket of candidates outside the grid
  for (size_t j = 0; j < where.size(); ++j) start[where[j]] += wanted[where[j]];
  uint32_t sum = 0;
  for (uint32_t& s : start) sum += std::exchange(s, sum);
  std::vector<Sample> samples(sum);
  for (size_t j = 0; j < where.size(); ++j) {
    if (!wanted[where[j]]) continue;
    const Eigen::Vector3f& q = cand.sensor[j];
    samples[start[where[j]]++] = {std::sqrt(h2_of(q)), q.z()};
  }
  // start[b] is now where bucket b ends, the start of b + 1.
  const float dz = float(gap_m);
  for (const auto& [i, lo, hi] : tested) {
    const Eigen::Vector3f& p = pts[i];
    const float h = std::sqrt(h2_of(p)), z = p.z();
    const float w = float(kSurfaceWindow) * h;
    bool nearer = false, farther = false;
    for (uint32_t k = lo > 0 ? start[lo - 1] : 0; k < start[hi - 1] && !(nearer && farther); ++k) {
      const Sample& q = samples[k];
      if (std::fabs(q.z - z) > dz || std::fabs(q.h - h) > w) continue;
      (q.h < h ? nearer : farther) = true;
    }
    (*near)[i] = nearer && farther;
  }
}

// The map's ground profile along each column of the angular grid, which both sides derive from
// the candidates: per column and bin of horizontal distance h (kProfileBinM), the lowest
// representative (a bin with ground samples in it has the ground lowest; one with only a wall or
// a car, their lowest sample, often the foot). The height at (x, y) is interpolated in h between
// the nearest samples below and above it in its column, each within kSurfaceWindow of its h:
// ground between the map's scan rings, metres apart at 20-50 m. The encoder keeps a gap point
// on this profile only where the bound holds at the decoded position, so a wrong profile costs
// bits, never error. Float arithmetic in a fixed order: both sides get the same bits.
class SurfaceProfile {
 public:
  static constexpr float kProfileBinM = 0.5f;
  static constexpr int kBins = 160;  // to 80 m

  // Holds what Height needs at the points (x, y) of `at`, the cells to be placed: the bins of each
  // of their columns within the window of any of them (Height finds the same there as in a full
  // profile, and nothing outside its window counts), so only those candidates are binned.
  SurfaceProfile(const Candidates& cand, const std::vector<Eigen::Vector3f>& at)
      : bins_(size_t(kAngularCols) * kBins, kEmpty),
        lo_(kAngularCols, std::numeric_limits<float>::infinity()),
        hi_(kAngularCols, -std::numeric_limits<float>::infinity()) {
    at_column_.resize(at.size());
    at_h_.resize(at.size());
    for (size_t i = 0; i < at.size(); ++i) {
      const float h = std::sqrt(at[i].x() * at[i].x() + at[i].y() * at[i].y());
      const int32_t c = AngularColumn(Eigen::Vector3f(at[i].x(), at[i].y(), 0));
      at_column_[i] = c;
      at_h_[i] = h;
      lo_[size_t(c)] = std::min(lo_[size_t(c)], h - float(kProfileWindow) * h);
      hi_[size_t(c)] = std::max(hi_[size_t(c)], h + float(kProfileWindow) * h);
    }
    // Whole bins around each column's span, with a bin to spare against rounding.
    for (size_t c = 0; c < lo_.size(); ++c) {
      if (lo_[c] > hi_[c]) continue;
      lo_[c] = std::max(lo_[c] - 2 * kProfileBinM, 0.0f);
      hi_[c] += 2 * kProfileBinM;
      lo_[c] *= lo_[c];
      hi_[c] *= hi_[c];
    }
    for (size_t j = 0; j < cand.cell.size(); ++j) {
      // Only samples below the sensor: the ground under a vehicle's LiDAR.
      if (cand.cell[j] < 0 || !(cand.sensor[j].z() < 0)) continue;
      const size_t c = size_t(cand.cell[j] % kAngularCols);
      const Eigen::Vector3f& q = cand.sensor[j];
      const float h2 = q.x() * q.x() + q.y() * q.y();
      if (!(h2 >= lo_[c] && h2 <= hi_[c])) continue;
      const float h = std::sqrt(h2);
      const int b = int(h / kProfileBinM);
      if (b >= kBins) continue;
      // Lowest first; the nearer among equals, so the result is free of the candidates' order.
      uint64_t& s = bins_[c * kBins + size_t(b)];
      s = std::min(s, Pack(h, q.z()));
    }
  }

  // The profile's height at the i-th point (x, y) given to the constructor; false where its
  // column has no sample on either side within the window.
  bool HeightAt(size_t i, float* z) const { return HeightIn(at_column_[i], at_h_[i], z); }

 private:
  bool HeightIn(int32_t column, float h, float* z) const {
    const float w = float(kProfileWindow) * h;
    const int b = int(h / kProfileBinM);
    if (b >= kBins) return false;
    const uint64_t* col = &bins_[size_t(column) * kBins];
    float below_h = 0, below_z = 0, above_h = 0, above_z = 0;
    bool below = false, above = false;
    for (int k = b; k >= 0; --k) {
      if (col[k] == kEmpty) continue;
      const float sh = H(col[k]);
      if (sh >= h) continue;
      if (h - sh <= w) below = true, below_h = sh, below_z = Z(col[k]);
      break;
    }
    for (int k = b; k < kBins; ++k) {
      if (col[k] == kEmpty) continue;
      const float sh = H(col[k]);
      if (sh < h) continue;
      if (sh - h <= w) above = true, above_h = sh, above_z = Z(col[k]);
      break;
    }
    if (!below || !above) return false;
    // below_h < h <= above_h: a positive span.
    *z = below_z + (above_z - below_z) * ((h - below_h) / (above_h - below_h));
    return true;
  }

  // A bin's sample (h, z) packed so that the lowest z, then the least h, is the least integer:
  // the bins fill by std::min, without the branch the comparisons took on each candidate, which
  // the candidates' order leaves unpredictable (the profile took 3.8 ms with it, 2.2 without, at
  // T = 0.05 on KITTI 00). z < 0 here: its sign-magnitude bits, inverted, ascend with z; h >= +0:
  // its bits ascend with h. kEmpty is no sample's key (it would be z = +0).
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint64_t Pack(float h, float z) {
    uint32_t hb, zb;
    std::memcpy(&hb, &h, 4);
    std::memcpy(&zb, &z, 4);
    return uint64_t(~zb) << 32 | hb;
  }
  static float H(uint64_t key) {
    const uint32_t hb = uint32_t(key);
    float h;
    std::memcpy(&h, &hb, 4);
    return h;
  }
  static float Z(uint64_t key) {
    const uint32_t zb = ~uint32_t(key >> 32);
    float z;
    std::memcpy(&z, &zb, 4);
    return z;
  }

  std::vector<uint64_t> bins_;
  std::vector<float> lo_, hi_;  // per column, the squared span of horizontal distances kept
  std::vector<int32_t> at_column_;
  std::vector<float> at_h_;
};

double SurfaceStep(double bound_m) { return kSurfaceStepFactor * (bound_m - kMarginM); }

float SurfaceCentre(double v, double step_m) {
  return float((std::floor(v / step_m) + 0.5) * step_m);
}

// Moves the gap points whose surface cell, at the profile's height, lies within the bound of them
// to *surface, and their intensities to *surface_i; then leaves out the surface cells whose every
// point another one's decoded point covers (DropCoveredCells), and sets the rest's z to 0 (the
// cells are 2D).
void SplitSurface(const Candidates& cand, double tol, std::vector<Eigen::Vector3f>* gap,
                  std::vector<float>* gap_i, std::vector<Eigen::Vector3f>* surface,
                  std::vector<float>* surface_i) {
  const double step = SurfaceStep(tol), bound2 = (tol - kMarginM) * (tol - kMarginM);
  std::vector<Eigen::Vector3f> centres(gap->size());
  for (size_t i = 0; i < gap->size(); ++i) {
    const Eigen::Vector3f& p = (*gap)[i];
    centres[i] = {SurfaceCentre(double(p.x()), step), SurfaceCentre(double(p.y()), step), 0};
  }
  const SurfaceProfile profile(cand, centres);
  size_t kept = 0;
  std::vector<float> heights;  // each surface point's cell's, for DropCoveredCells
  for (size_t i = 0; i < gap->size(); ++i) {
    const Eigen::Vector3f p = (*gap)[i];
    const float cx = centres[i].x(), cy = centres[i].y();
    float z = 0;
    if (profile.HeightAt(i, &z)) {
      const double dx = double(cx) - p.x(), dy = double(cy) - p.y(), dz = double(z) - p.z();
      if (dx * dx + dy * dy + dz * dz <= bound2) {
        surface->push_back(p);
        surface_i->push_back((*gap_i)[i]);
        heights.push_back(z);
        continue;
      }
    }
    (*gap)[kept] = p;
    (*gap_i)[kept++] = (*gap_i)[i];
  }
  gap->resize(kept);
  gap_i->resize(kept);
  // A cell's height is the profile's at its centre, which HeightAt found at each of its points.
  DropCoveredCells(step, tol - kMarginM, surface, surface_i, &heights);
  for (Eigen::Vector3f& p : *surface) p.z() = 0;
}

// train (TrainPriors): the models start from these states, not the map's, and leave their final
// states in them.
StatusOr<std::vector<uint8_t>> EncodeFrame(const PointCloud& frame, const Pose& prior,
                                           const FrameInfo& info, const EncoderParams& params,
                                           maps::RouteMap* map, EncodeReport* report,
                                           ModelStates* train) {
  if (!frame.consistent()) return Status::InvalidArgument("encode: inconsistent point cloud");
  if (!(params.tolerance_m >= 0.001 && params.tolerance_m <= 10)) {
    return Status::InvalidArgument("encode: tolerance_m must be in [0.001, 10] m");
  }
  if (!(params.residual_precision_m >= 0.001)) {
    return Status::InvalidArgument("encode: residual_precision_m must be >= 0.001 m");
  }
  if (!(params.gap_factor >= 0 && params.gap_factor <= 4)) {
    return Status::InvalidArgument("encode: gap_factor must be in [0, 4]");
  }
  if (!(params.select_factor >= 0 && params.select_factor <= 1)) {
    return Status::InvalidArgument("encode: select_factor must be in [0, 1]");
  }
  if (!(params.threads >= 1 && params.threads <= kMaxEncoderThreads)) {
    return Status::InvalidArgument("encode: threads must be in [1, " +
                                   std::to_string(kMaxEncoderThreads) + "]");
  }
  if (!(params.selection_parts >= 1 && params.selection_parts <= kMaxSelectionParts)) {
    return Status::InvalidArgument("encode: selection_parts must be in [1, " +
                                   std::to_string(kMaxSelectionParts) + "]");
  }
  if (frame.size() > kMaxPointsPerFrame) return Status::InvalidArgument("encode: frame too large");
  DV_RETURN_IF_ERROR(CheckBackend(params.backend).WithContext("encode"));
  EncodeReport local;
  EncodeReport* rep = report ? report : &local;
  *rep = EncodeReport();
  const auto t_entry = std::chrono::steady_clock::now();
  // Finite: |v| <= FLT_MAX on each axis, false for infinities and NaN (Eigen's allFinite).
  auto finite_at = [&](size_t i) {
    const Eigen::Vector3f& p = frame.xyz[i];
    return (int(std::fabs(p.x()) <= FLT_MAX) & int(std::fabs(p.y()) <= FLT_MAX) &
            int(std::fabs(p.z()) <= FLT_MAX)) != 0;
  };
  // The farthest point's range as the root of the greatest square: the root is monotonic, so
  // the same float as the greatest of the roots, for one root, not one a point. Four partial
  // maxima, free of each other: one running maximum made each point wait on the last.
  float most[4] = {0, 0, 0, 0};
  size_t finite = 0;
  auto take = [&](size_t i, float* m) {
    const bool ok = finite_at(i);
    finite += ok;
    *m = std::max(*m, ok ? frame.xyz[i].squaredNorm() : 0.0f);
  };
  size_t head = 0;
  for (; head + 4 <= frame.size(); head += 4) {
    for (size_t k = 0; k < 4; ++k) take(head + k, &most[k]);
  }
  for (; head < frame.size(); ++head) take(head, &most[0]);
  const float max_range2 = std::max(std::max(most[0], most[1]), std::max(most[2], most[3]));
  // A frame's points are all finite as a rule (KITTI's are), and then its own arrays are coded as
  // they are. Copied point by point past a test each, with one running maximum, they took
  // 0.49 ms a frame; now 0.2 (KITTI 00).
  std::vector<Eigen::Vector3f> finite_pts;
  std::vector<float> finite_inten;
  if (finite < frame.size()) {
    finite_pts.reserve(finite);
    finite_inten.reserve(finite);
    for (size_t i = 0; i < frame.size(); ++i) {
      if (!finite_at(i)) continue;
      finite_pts.push_back(frame.xyz[i]);
      finite_inten.push_back(frame.intensity[i]);
    }
  }
  const std::vector<Eigen::Vector3f>& pts = finite < frame.size() ? finite_pts : frame.xyz;
  const std::vector<float>& inten = finite < frame.size() ? finite_inten : frame.intensity;
  rep->non_finite_points = frame.size() - finite;
  const double max_range = double(std::sqrt(max_range2));
  rep->points_in = pts.size();
  const Header base =
      BaseHeader(info, params, std::min(params.residual_precision_m, params.tolerance_m));
  // The bounds as the decoder reads them from the header: both sides derive cell steps from these.
  const double tol = double(base.tolerance_um) / 1e6;
  const double residual_m = double(base.residual_um) / 1e6;

  auto intra = [&]() -> StatusOr<std::vector<uint8_t>> {
    Header h = base;
    h.mode = kModeIntra;
    h.pose = Quantize(prior);
    // As for gap cells: on KITTI 00, 16-25% more ratio at T = 0.05-0.2 for 2.4-4.3% more CD.
    std::vector<Eigen::Vector3f> cell_pts = pts;
    std::vector<float> cell_inten = inten;
    DropCoveredCells(CellStep(tol), tol - kMarginM, &cell_pts, &cell_inten);
    DV_RETURN_IF_ERROR(AddCellSections(cell_pts, cell_inten, CellStep(tol), params.intensity,
                                       kIntraGeometry, kIntraIntensity, OctreeModelOf(h.version),
                                       &h));
    return WriteContainer(h);
  };
  if (map == nullptr || pts.empty()) {
    rep->intra_fallback = true;
    rep->residual_points = pts.size();
    rep->T_map_sensor = Quantize(prior).pose();
    DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, intra());
    Header h;
    std::vector<ParsedSection> s;
    DV_RETURN_IF_ERROR(ParseContainer(bytes.data(), bytes.size(), &h, &s));
    for (const ParsedSection& x : s) rep->section_bytes.emplace_back(SectionName(x.id), x.size);
    return bytes;
  }

  // Radius of the candidate ball, in decimetres: everything the frame can touch, up to
  // kMaxCandidateRadiusM. A spurious return kilometres away would otherwise make the encoder
  // load every map tile within its range, and write a radius the decoder refuses (over 10 km);
  // points beyond the ball are coded by the octrees like anything else the map cannot explain.
  const uint64_t radius_dm =
      uint64_t(std::ceil(std::min(max_range + tol, kMaxCandidateRadiusM) * 10));
  const double radius_m = double(radius_dm) / 10;
  // Only the CUDA kernels look voxel keys up in a hash; the CPU sorts them (sorted_grid.h).
  const unsigned hashed = params.backend == Backend::kCuda ? unsigned(kCandidateIndex) : 0u;
  auto lap_start = t_entry;
  auto lap = [&](const char* stage) {
    const auto now = std::chrono::steady_clock::now();
    rep->stage_ms.emplace_back(stage,
                               std::chrono::duration<double, std::milli>(now - lap_start).count());
    lap_start = now;
  };
  lap("points");  // the finite points and their farthest range
  // Classification's search radii, in voxels: within the bound, and the gap test's.
  const double res = map->resolution_m();
  const int nb = int(std::ceil((tol - kMarginM) / res));
  const double gap_m = params.gap_factor * tol;
  const int gap_nb = int(std::ceil(gap_m / res));
  const int grid_nb = std::max(nb, gap_nb);
  DV_ASSIGN_OR_RETURN(const RegistrationResult reg,
                      RegisterFrame(pts, map, prior, radius_m + kRegistrationSlackM, params.backend,
                                    grid_nb, params.threads));
  lap("registration");
  rep->registration_correspondences = reg.correspondences;
  Header h = base;
  h.mode = kModeDelta;
  h.map_id = map->version_id();
  h.pose = Quantize(reg.T_map_sensor);
  rep->T_map_sensor = h.pose.pose();
  const Eigen::Matrix3d R = h.pose.R();
  const Eigen::Vector3d t = h.pose.translation();
  // The candidates, and on the CPU one sorted grid of their keys for the classification and the
  // gap test, come from the ball registration keeps where it holds theirs (it does unless
  // registration moved the pose metres): its voxels filtered, its grid copied and thinned
  // (SortedGrid::Keep). Sorting the keys took 3.6-3.9 ms a frame (KITTI 00, T = 0.1). The CUDA
  // kernels look keys up in cand.index instead.
  const KeptBall ball = KeptRegistrationBall(map);
  Candidates cand;
  std::vector<int32_t> to_cand;
  DV_RETURN_IF_ERROR(DeriveCandidatesWithin(map, ball.candidates, R, t, radius_m, &cand, &to_cand,
                                            hashed | kCandidateProjection, params.backend,
                                            params.threads));
  std::unique_ptr<SortedGrid> grid;
  if (params.backend == Backend::kCpu) {
    if (!to_cand.empty() && ball.grid && ball.grid->max_nb() >= grid_nb) {
      grid = std::make_unique<SortedGrid>(*ball.grid);
      grid->Keep(to_cand);
    } else {
      grid = std::make_unique<SortedGrid>(VoxelKeys(cand.voxels), grid_nb, 0);
    }
  }
  rep->candidates = cand.voxels.size();
  lap("candidates");

  // A point is explained when a candidate's decoded representative is within the tolerance. Its
  // nearest such candidate is selected, and so is every candidate within select_factor of the
  // tolerance of a point: each selected one has an original point within the tolerance, and each
  // explained point a selected one.
  const double bound2 = (tol - kMarginM) * (tol - kMarginM);
  const double select_m = params.select_factor * (tol - kMarginM);
  std::vector<uint8_t> explained;
  CandidateMarks marks;
  // The classification also ends the first gap test (below) for the points with a candidate
  // within gap_m among those it looks at, where its neighbourhood lies within the test's: on
  // KITTI 00 at T = 0.05 to 0.4, 87-89% of the points the test marks, 60-73% of those it tests.
  const bool known_near = params.gap_factor > 0 && gap_nb >= nb;
  std::vector<uint8_t> near_known;
  DV_RETURN_IF_ERROR(ClassifyPoints(params.backend, pts, RigidOf(R, t), grid.get(), &cand.index,
                                    cand.sensor, res, nb, bound2, select_m * select_m, &explained,
                                    &marks, params.threads, gap_m * gap_m,
                                    known_near ? &near_known : nullptr));
  if (!train) {
    ListByNearest(marks.point_nearest, cand.voxels.size(), &marks.nearest_start,
                  &marks.nearest_points, &marks.point_second, &marks.nearest_seconds);
  }
  lap("classification");
  // The models' start: the map's priors, or in training the states so far. A trial coding of the
  // gap class leaves its models' end states in its own copy (in training), and the kept one's
  // become the states so far.
  ModelStates priors;
  if (!train) DV_RETURN_IF_ERROR(MapPriors(*map, &priors).WithContext("encode"));
  const ModelStates& start = train ? *train : priors;
  // The selection and the cells are coded from the classification alone, each into its own
  // sections and models: with threads, at once (the bytes are the same either way).
  const bool parallel = params.threads > 1;
  std::vector<uint8_t> selected, selection_section;
  std::vector<SelectedPair> pairs;
  // Priors training codes the map's own frames only for the end states of the models: no fill.
  std::unique_ptr<FillEncoder> fill;
  if (!train) fill = std::make_unique<FillEncoder>(cand, pts, tol - kMarginM);
  // Priors training learns the models' states over whole frames: one part.
  const int parts = train || h.version < kVersionParts ? 1 : params.selection_parts;
  SelectionModel model = SelectionModelOf(h.version, start.selection);
  if (train) model.end = train->selection.data();
  std::unique_ptr<SelectionCoder> selection;
  std::once_flag selection_ready;
  std::vector<std::vector<uint8_t>> part_bits(static_cast<size_t>(parts));
  std::atomic<int> parts_left{parts};
  // The coder is set up by the first part to start, beside the cells; whichever thread codes the
  // last part writes the section and orders the fill's midpoints.
  auto code_part = [&](int part) {
    std::call_once(selection_ready, [&] {
      selection = std::make_unique<SelectionCoder>(cand, model, parts, &selected, !train);
      selection->SetMarks(marks);
    });
    part_bits[size_t(part)] = selection->EncodePart(part);
    if (parts_left.fetch_sub(1) != 1) return;
    ByteWriter map_section;
    map_section.Varint(radius_dm);
    if (h.version >= kVersionParts) {
      map_section.Varint(uint64_t(parts));
      for (int p = 0; p + 1 < parts; ++p) map_section.Varint(part_bits[size_t(p)].size());
    }
    for (const auto& bits : part_bits) map_section.Bytes(bits.data(), bits.size());
    selection_section = map_section.Take();
    if (!parallel) lap("selection coding");
    if (fill) {
      selection->TakePairs(&pairs);
      fill->Order(pairs);
      if (!parallel) lap("fill order");
    }
  };
  Header cell_sections;  // residual, then the gap class's
  size_t cell_count = 0;
  auto code_cells = [&]() -> Status {
    std::vector<Eigen::Vector3f> unexplained;
    std::vector<float> unexplained_i;
    std::vector<uint8_t> unexplained_known;
    for (size_t i = 0; i < pts.size(); ++i) {
      if (explained[i]) {
        ++rep->explained_points;
      } else {
        unexplained.push_back(pts[i]);
        unexplained_i.push_back(inten[i]);
        if (known_near) unexplained_known.push_back(near_known[i]);
      }
    }
    // The decoder never repeats the gap test: it reads which octree a cell is in.
    // The first gap test: a candidate representative within gap_m of the point.
    std::vector<uint8_t> near_map(unexplained.size(), 0);
    if (params.gap_factor > 0) {
      // A point is in the gap class when either test marks it, so the cheaper one goes first:
      // the surface test, on every point the classification's marks leave, then the search, on
      // those it leaves. On KITTI 00 at T = 0.12, of the 2.3-4.1 k points the marks leave, the
      // surface test marks 1.7-2.7 k and the search 0.5-0.9 k (0.4-0.6 k of them both); searching
      // them all first took about 1 ms a frame (BENCHMARK.md).
      std::vector<uint8_t> decided =
          known_near ? unexplained_known : std::vector<uint8_t>(unexplained.size(), 0);
      MarkOnMapSurface(unexplained, cand, gap_m, &decided);
      DV_RETURN_IF_ERROR(MarkNearCandidates(params.backend, unexplained, RigidOf(R, t), grid.get(),
                                            &cand.index, cand.sensor, res, gap_nb, gap_m * gap_m,
                                            &near_map, std::max(params.threads - 1, 1), &decided));
      // The search takes the surface's points as known and marks them as it marks the
      // classification's; the surface's marks hold whatever their keys.
      for (size_t u = 0; u < unexplained.size(); ++u) {
        near_map[u] |= uint8_t(decided[u] && !(known_near && unexplained_known[u]));
      }
    }
    std::vector<Eigen::Vector3f> residual, gap;
    std::vector<float> residual_i, gap_i;
    for (size_t i = 0; i < unexplained.size(); ++i) {
      (near_map[i] ? gap : residual).push_back(unexplained[i]);
      (near_map[i] ? gap_i : residual_i).push_back(unexplained_i[i]);
    }
    rep->residual_points = residual.size();
    rep->gap_points = gap.size();
    // The gap class coded two ways, the smaller kept: all in the 3D octree, or the points on the
    // map's ground profile in the surface sections and the rest in 3D. The surface's 2D cells win
    // where much ground lies between the map's rings (KITTI 00 at T <= 0.2) and lose to a second
    // section's start-up costs where the gap class is a few hundred cells (T >= 0.3).
    // A gap cell costs about a byte, and on KITTI 12-23% of them have every point within the
    // tolerance of a neighbour's centre (BENCHMARK.md). Residual cells gain next to nothing: they
    // are few, at 2 cm.
    std::vector<Eigen::Vector3f> rest = gap, surface;
    std::vector<float> rest_i = gap_i, surface_i;
    if (!gap.empty()) SplitSurface(cand, tol, &rest, &rest_i, &surface, &surface_i);
    auto gap_sections = [&](const std::vector<Eigen::Vector3f>& g, const std::vector<float>& gi,
                            const std::vector<Eigen::Vector3f>& sf, const std::vector<float>& si,
                            Header* out, ModelStates* ends, size_t* cells) -> StatusOr<size_t> {
      // Each gap cell holds an original point and its centre is within T of every point in it, as
      // for intra cells: the bound holds whatever the classification decided. So does each surface
      // cell's decoded point for the points SplitSurface put in it.
      OctreeModel gm = OctreeModelOf(h.version, start.gap),
                  sm = OctreeModelOf(h.version, start.surface);
      if (ends) {
        ends->gap.resize(kOctreeModels);
        ends->surface.resize(kOctreeModels);
        gm.end = ends->gap.data();
        sm.end = ends->surface.data();
      }
      DV_RETURN_IF_ERROR(AddCellSections(g, gi, CellStep(tol), params.intensity, kGapGeometry,
                                         kGapIntensity, gm, out, cells));
      DV_RETURN_IF_ERROR(AddCellSections(sf, si, SurfaceStep(tol), params.intensity,
                                         kSurfaceGeometry, kSurfaceIntensity, sm, out, cells));
      size_t bytes = 0;
      for (const auto& section : out->sections) bytes += section.second.size();
      return bytes;
    };
    Header gap_only, split;
    ModelStates split_ends, gap_only_ends;
    size_t split_bytes = SIZE_MAX, gap_only_bytes = SIZE_MAX;
    size_t split_cells = 0, gap_only_cells = 0;
    if (!surface.empty()) {
      DropCoveredCells(CellStep(tol), tol - kMarginM, &rest, &rest_i);
      DV_ASSIGN_OR_RETURN(split_bytes, gap_sections(rest, rest_i, surface, surface_i, &split,
                                                    train ? &split_ends : nullptr, &split_cells));
    }
    // Coding the gap class twice would cost as much again as coding it once (9 ms at T = 0.05 on
    // KITTI 00), and the one octree wins only where the surface section is small.
    size_t surface_bytes = 0;
    for (const auto& section : split.sections) {
      if (section.first == kSurfaceGeometry) surface_bytes = section.second.size();
    }
    if (surface.empty() || surface_bytes < kSmallSurfaceBytes) {
      DropCoveredCells(CellStep(tol), tol - kMarginM, &gap, &gap_i);
      DV_ASSIGN_OR_RETURN(gap_only_bytes,
                          gap_sections(gap, gap_i, {}, {}, &gap_only,
                                       train ? &gap_only_ends : nullptr, &gap_only_cells));
    }
    const bool use_split = split_bytes < gap_only_bytes;
    rep->surface_points = use_split ? surface.size() : 0;
    if (train) {
      ModelStates& kept = use_split ? split_ends : gap_only_ends;
      train->gap = std::move(kept.gap);
      train->surface = std::move(kept.surface);
    }
    if (!parallel) lap("gap tests and gap coding");

    OctreeModel rm = OctreeModelOf(h.version, start.residual);
    if (train) rm.end = train->residual.data();
    cell_count += use_split ? split_cells : gap_only_cells;
    DV_RETURN_IF_ERROR(AddCellSections(residual, residual_i, CellStep(residual_m), params.intensity,
                                       kResidualGeometry, kResidualIntensity, rm, &cell_sections,
                                       &cell_count));
    for (auto& section : (use_split ? split : gap_only).sections) {
      cell_sections.sections.push_back(std::move(section));
    }
    if (!parallel) lap("octree coding");
    if (fill) {
      fill->Index(marks.nearest_start, marks.nearest_points);
      if (!parallel) lap("fill index");
    }
    return Status::Ok();
  };
  // The cells (and the fill's index) first, on the calling thread: on two threads they take as
  // long as the selection's parts together or longer (KITTI, T <= 0.1), which the other thread
  // codes meanwhile. The index as a task of its own, taken by the thread free first, gained 2.7 ms
  // at T = 0.05 and lost 1.7 ms at 0.2 (BENCHMARK.md).
  Status cells_coded;
  RunTasks(params.threads, 1 + parts, [&](int task) {
    if (task == 0) {
      cells_coded = code_cells();
    } else {
      code_part(task - 1);
    }
  });
  DV_RETURN_IF_ERROR(cells_coded);
  if (parallel) lap("gap tests, selection and octree coding");
  for (uint8_t s : selected) rep->selected_voxels += s;
  h.sections.emplace_back(kMapSelection, std::move(selection_section));
  for (auto& section : cell_sections.sections) h.sections.push_back(std::move(section));
  const size_t decoded = rep->selected_voxels + cell_count;
  // Priors training codes the map's own frames only for the end states of the models above.
  if (fill) {
    h.sections.emplace_back(kFill, fill->Encode(decoded, &rep->fill_points));
    lap("fill");
  }
  std::vector<uint8_t> bytes = WriteContainer(h);
  Report(h, rep);
  if (double(rep->explained_points) < params.min_explained_fraction * double(pts.size())) {
    DV_ASSIGN_OR_RETURN(std::vector<uint8_t> fallback, intra());
    if (fallback.size() < bytes.size()) {
      EncodeReport intra_rep;
      intra_rep.intra_fallback = true;
      intra_rep.points_in = rep->points_in;
      intra_rep.non_finite_points = rep->non_finite_points;
      intra_rep.residual_points = pts.size();
      intra_rep.T_map_sensor = Quantize(prior).pose();
      intra_rep.registration_correspondences = rep->registration_correspondences;
      *rep = intra_rep;
      Header ih;
      std::vector<ParsedSection> s;
      DV_RETURN_IF_ERROR(ParseContainer(fallback.data(), fallback.size(), &ih, &s));
      for (const ParsedSection& x : s) rep->section_bytes.emplace_back(SectionName(x.id), x.size);
      return fallback;
    }
  }
  return bytes;
}

}  // namespace

StatusOr<std::vector<uint8_t>> Encode(const PointCloud& frame, const Pose& prior,
                                      const FrameInfo& info, const EncoderParams& params,
                                      maps::RouteMap* map, EncodeReport* report) {
  return EncodeFrame(frame, prior, info, params, map, report, nullptr);
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
  ModelStates models;
  for (const PriorStream& stream : kPriorStream) (models.*stream.states).resize(stream.count);
  for (size_t k = 0; k < n; ++k) {
    const auto [d, i] = frames[k * frames.size() / n];
    DV_ASSIGN_OR_RETURN(PointCloud cloud, ReadPointCloudFile(drives[d].frame_paths[i]));
    DV_RETURN_IF_ERROR(
        EncodeFrame(cloud, drives[d].poses[i], {i, 0, 0}, params, map, nullptr, &models)
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

StatusOr<DecodedFrame> DecodeHeader(const uint8_t* data, size_t size) {
  Header h;
  std::vector<ParsedSection> sections;
  DV_RETURN_IF_ERROR(ParseContainer(data, size, &h, &sections));
  DecodedFrame out;
  out.T_map_sensor = h.pose.pose();
  out.info = h.info;
  out.tolerance_m = double(h.tolerance_um) / 1e6;
  out.residual_precision_m = double(h.residual_um) / 1e6;
  out.intra = h.mode == kModeIntra;
  out.intensity = (h.flags & kFlagIntensity) != 0;
  if (!out.intra) {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016" PRIx64, h.map_id);
    out.map_version = hex;
  }
  for (const ParsedSection& s : sections) out.section_bytes.emplace_back(SectionName(s.id), s.size);
  return out;
}

// Cell sections smaller than this in all are read on the decoding thread: at T = 0.4 on KITTI 00
// (about 900 bytes a frame) a second thread made decoding 0-0.7 ms slower, not faster.
constexpr size_t kMinSplitCellBytes = 2048;

StatusOr<DecodedFrame> Decode(const uint8_t* data, size_t size, maps::RouteMap* map, int threads) {
  Header h;
  std::vector<ParsedSection> sections;
  DV_RETURN_IF_ERROR(ParseContainer(data, size, &h, &sections));
  DV_ASSIGN_OR_RETURN(DecodedFrame out, DecodeHeader(data, size));
  const bool intensity = out.intensity;
  ModelStates priors;  // read once the map is known to be the frame's (version 7)
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
  if (h.version >= kVersionPriors)
    DV_RETURN_IF_ERROR(MapPriors(*map, &priors).WithContext("delta"));
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
        selection_read =
            DeriveCandidates(map, h.pose.R(), h.pose.translation(), double(radius_dm) / 10, &cand,
                             kCandidateProjection, Backend::kCpu, cells_beside ? 1 : threads);
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
