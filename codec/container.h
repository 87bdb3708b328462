// The container of docs/delta-format.md: the constants the writer and the reader share (as
// LevelDB's log_format.h), the header with its quantised pose, and the section table with its
// checksum. The sections' bodies are the coders' (map_section.h, octree_coder.h, surface.h,
// fill.h).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"

namespace dv::codec {

constexpr char kMagic[4] = {'D', 'V', 'D', 'F'};
// The one version written and read. Until the format's first release a change replaces the
// format (and the golden files that pin it); it does not add a version.
constexpr uint8_t kFormatVersion = 1;
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
// "map", "residual", ...: the names `dejaview inspect` and the encoder's report use.
const char* SectionName(uint8_t id);

// Every decision of the encoder keeps this much below the tolerance, so that float rounding of
// decoded coordinates (about 1e-5 m at 100 m) can never break the bound.
constexpr double kMarginM = 1e-4;
// Cell side such that a cell's centre is within `bound_m` of every point inside it.
double CellStep(double bound_m);
// The candidate ball's radius is written in decimetres, up to this many.
constexpr uint64_t kMaxRadiusDm = 100000;

// The pose as transmitted: translation in 0.1 mm, unit quaternion (w >= 0) in units of 2^-30.
constexpr double kTranslationStepM = 1e-4;
constexpr double kQuaternionScale = double(1 << 30);
struct QuantPose {
  int64_t t[3] = {0, 0, 0};
  int64_t q[4] = {1 << 30, 0, 0, 0};

  Eigen::Matrix3d R() const;
  Eigen::Vector3d translation() const;
  Pose pose() const;
};
QuantPose Quantize(const Pose& T);

struct Header {
  uint8_t version = kFormatVersion;
  uint8_t mode = kModeIntra;
  uint8_t flags = 0;
  uint64_t tolerance_um = 0;
  uint64_t residual_um = 0;
  FrameInfo info;
  uint64_t map_id = 0;
  QuantPose pose;
};

// A section of a parsed frame: it points into the input.
struct ParsedSection {
  uint8_t id;
  const uint8_t* data;
  size_t size;
};

// The header, every section's body in the order given, and the masked CRC32C of all before it.
std::vector<uint8_t> WriteContainer(
    const Header& h, const std::vector<std::pair<uint8_t, std::vector<uint8_t>>>& sections);
// Checks everything the container alone can say: magic, version, mode, ranges of the header's
// fields, section ids (each once, each valid in the frame's mode and version), lengths, checksum.
Status ParseContainer(const uint8_t* data, size_t size, Header* h,
                      std::vector<ParsedSection>* sections);
const ParsedSection* FindSection(const std::vector<ParsedSection>& sections, uint8_t id);
// A parsed frame's header as DecodeHeader reports it (no points yet).
DecodedFrame HeaderFields(const Header& h, const std::vector<ParsedSection>& sections);

}  // namespace dv::codec
