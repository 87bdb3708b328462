// The dejaview frame codec: a LiDAR frame coded as a delta against a route map (or intra when
// there is no map or no coverage), with a guaranteed bound: every original point has a decoded
// point within tolerance_m and every decoded point an original point within it (Hausdorff).
// Container format: docs/delta-format.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dejaview/base/drive.h"
#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/maps/route_map.h"

namespace dv::codec {

// Where the encoder's per-frame hot paths run (point transforms, voxel look-ups, candidate
// projection, registration correspondences). The bitstream does not depend on it.
enum class Backend { kCpu, kCuda };

// Ok when `backend` can run here; for kCuda the error says whether this build lacks CUDA
// (configure with -DDEJAVIEW_CUDA=ON) or the machine has no usable CUDA device.
Status CheckBackend(Backend backend);
// "cpu" or "cuda".
StatusOr<Backend> ParseBackend(const std::string& name);

struct EncoderParams {
  double tolerance_m = 0.1;  // the guaranteed maximum error, both ways
  // Maximum error of points the map does not explain (clamped to tolerance_m).
  double residual_precision_m = 0.02;
  // Residual points with a map representative within gap_factor * tolerance_m (static surface
  // between the map's scan rings, mostly), or lying on a map surface between two of its samples
  // along their azimuth (within gap_factor * tolerance_m of their height: far ground between the
  // rings), are coded at the tolerance instead, in the `gap` sections; the rest (moving objects,
  // scene changes) keep residual_precision_m. 0 turns the split off (the gap sections are
  // empty). In [0, 4].
  double gap_factor = 2.0;
  // Of the points left (far from the map), those within still_m of such a point of the same
  // sensor's frame before (at most 0.25 s earlier, the same map; both in the map frame) have
  // moved less than still_m since: scene changes standing still, which are coded at the
  // tolerance in the gap sections too. residual_precision_m is then the bound of the points that
  // moved (codec/still.h). Frames coded alone, or each by a fresh Encoder, are never compared.
  // 0 turns it off. In [0, 1].
  double still_m = 0.1;
  // Which map voxels stand for the explained points: each point's nearest within the tolerance,
  // and every one within select_factor * tolerance_m of a point. 1 selects every voxel within
  // the tolerance of a point; lower selects fewer, and the decoded points lie nearer the
  // originals (lower Chamfer distance at the same tolerance). In [0, 1].
  // The other voxels within the tolerance of a point follow their bits' models where these are
  // sure (map_section.h EncodeSelection).
  double select_factor = 0.6;
  // The map voxels within this range of the sensor are the candidates the map section selects
  // from; the frame's points beyond it are tested against the map all the same, and those near it
  // (static background) are coded at the tolerance in the gap sections. Far away the frame's
  // rings sample the map's surfaces sparsely: there every selected voxel costs the decoder and
  // the encoder as much work as a thousand candidates left unselected. 0: the frame's whole
  // range. In [0, 1000] m.
  double selection_radius_m = 0;
  bool intensity = true;  // false: geometry only, decoded intensity is 0
  // Delta frames explaining less than this fraction of points are also coded intra, and the
  // smaller of the two is kept.
  double min_explained_fraction = 0.5;
  Backend backend = Backend::kCpu;
  // Threads one frame's encoding may use (the CPU's hot paths split their points; selection and
  // cell coding run side by side). The bytes are the same with any number. In [1, 16]: each
  // thread of the classification keeps its own marks of every candidate (about 1 MB at T = 0.1).
  int threads = 1;
  // The map section's bits are coded in this many parts, each decodable on a thread
  // of its own: more parts, more threads for the decoder, and each part's models learn afresh
  // (docs/delta-format.md). The bytes depend on it, not on threads. In [1, 16].
  int selection_parts = 2;
};
constexpr int kMaxEncoderThreads = 16;

struct FrameInfo {
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  uint32_t sensor_id = 0;
};

struct EncodeReport {
  bool intra_fallback = false;
  size_t points_in = 0;  // finite input points (non-finite ones are dropped and counted below)
  size_t non_finite_points = 0;
  size_t explained_points = 0;
  size_t residual_points = 0;  // original points coded by the residual (or intra) octree
  size_t gap_points = 0;       // original points coded at the tolerance (gap class)
  size_t surface_points = 0;   // of which on the map's ground profile (the surface sections)
  size_t still_points = 0;     // of the gap points, far from the map but still (still_m)
  size_t candidates = 0;       // map voxels the decoder derives from (map, pose)
  size_t selected_voxels = 0;
  size_t fill_points = 0;  // points the decoder adds between selected voxels (fill section)
  std::vector<std::pair<std::string, size_t>> section_bytes;
  Pose T_map_sensor = Pose::Identity();  // the refined, quantised pose written in the payload
  size_t registration_correspondences = 0;
  // Wall-clock milliseconds of each stage of a delta encode, in order (empty for intra): where a
  // backend's time goes (tests/codec/cuda_timing.cpp prints them).
  std::vector<std::pair<std::string, double>> stage_ms;
};

// What encoders remember of each sensor's latest frame for EncoderParams::still_m (still.h).
class StillMemory;
std::shared_ptr<StillMemory> NewStillMemory();

// Codes frames against one map (null: every frame intra). The map must outlive the encoder, which
// loads its tiles as frames need them and keeps what it derives from it: the codec priors, and
// registration's ball of map voxels, rebuilt only as the vehicle moves on. One thread at a time.
class Encoder {
 public:
  // Encoders given the same `still` memory (an agent's encoder threads) compare a frame with the
  // sensor's latest frame any of them coded; null: the encoder's own.
  explicit Encoder(maps::RouteMap* map, std::shared_ptr<StillMemory> still = nullptr);
  ~Encoder();
  Encoder(Encoder&&) noexcept;
  Encoder& operator=(Encoder&&) noexcept;

  StatusOr<std::vector<uint8_t>> Encode(const PointCloud& frame, const Pose& T_map_sensor_prior,
                                        const FrameInfo& info, const EncoderParams& params,
                                        EncodeReport* report = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct DecodedFrame {
  PointCloud cloud;  // sensor frame
  Pose T_map_sensor = Pose::Identity();
  FrameInfo info;
  double tolerance_m = 0;
  double residual_precision_m = 0;
  bool intra = false;
  bool intensity = false;
  std::string map_version;  // empty for intra frames
  // Per point: 0 map voxel, 1 residual (or intra) octree, 2 gap class (gap or surface sections),
  // 3 fill (a midpoint or quarter point of two neighbouring selected map voxels).
  std::vector<uint8_t> source;
  std::vector<std::pair<std::string, size_t>> section_bytes;
};

// Decodes frames coded against one map (null: intra frames only; a delta frame needs the map
// version it was coded against). The map must outlive the decoder. One thread at a time.
class Decoder {
 public:
  explicit Decoder(maps::RouteMap* map);
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;

  // With threads > 1 the cell sections are decoded beside the map selection: the same frame,
  // the same errors.
  StatusOr<DecodedFrame> Decode(const uint8_t* data, size_t size, int threads = 1);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The map's codec priors (maps::RouteMap::codec_priors, docs/map-format.md): the states of the
// models of the map, residual, gap and surface sections after coding frames of the map's own
// drives against it at its resolution, in turn, each starting where the one before ended (the
// frames of BuildOptions::every, at most kMaxPriorFrames of them spread evenly, the drives' poses
// as priors). Delta frames start those models there: a context then codes its first
// bits at the odds of the route, not at one half.
constexpr size_t kMaxPriorFrames = 24;
StatusOr<std::vector<uint8_t>> TrainPriors(const std::vector<Drive>& drives, int every,
                                           maps::RouteMap* map);
// maps::BuildMap, then TrainPriors on the map just built, written into its manifest.
Status BuildMapWithPriors(const std::vector<Drive>& drives, const maps::BuildOptions& options,
                          const std::string& dir, maps::BuildReport* report = nullptr);

// Parses the container only (header and section table, CRC checked): for `dejaview inspect`.
StatusOr<DecodedFrame> DecodeHeader(const uint8_t* data, size_t size);

}  // namespace dv::codec
