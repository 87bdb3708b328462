// The codec interface the bench measures: dejaview's delta codec and the peers a user would pick
// instead, each driven through its own library API. Every codec is a knob sweep: one
// number that trades bytes for error (tolerance, grid step, quantisation bits, level).
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

namespace dv::bench {

struct FrameContext {
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  bool intensity = true;  // false: geometry only (the geometry-only ratio)
};

struct EncodedFrame {
  // Every byte the decoder needs for this frame (a map, where used, is reported separately).
  std::vector<uint8_t> bytes;
  // Named parts of bytes. The runner adds whatever they leave unaccounted as "header", so the
  // ratio always counts every byte whatever a codec reports here.
  std::vector<std::pair<std::string, size_t>> sections;
  bool fallback = false;  // coded without the map (intra), for map-based codecs
};

struct DecodedCloud {
  PointCloud cloud;                      // sensor frame
  std::vector<uint8_t> source;           // empty, or per point: 0 explained by the map, 1 residual
  Pose T_map_sensor = Pose::Identity();  // the pose the frame was decoded at (map-based codecs)
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual std::string name() const = 0;
  virtual std::string knob_name() const = 0;  // "bits", "step_m", "T_m", "level"
  virtual std::vector<double> DefaultKnobs() const = 0;
  // Called once per knob before that knob's frames: a map-based codec builds and opens its map
  // from map_drives under scratch_dir. Peers need nothing.
  virtual Status Prepare(const std::vector<Drive>& map_drives, double knob,
                         const std::string& scratch_dir) {
    (void)map_drives;
    (void)knob;
    (void)scratch_dir;
    return Status::Ok();
  }
  // Bytes of the map on disk after Prepare (0 for single-frame codecs).
  virtual uint64_t map_bytes() const { return 0; }
  virtual StatusOr<EncodedFrame> Encode(const PointCloud& frame, const Pose& T_map_sensor_prior,
                                        const FrameContext& context, double knob) = 0;
  // Decoding reads every parameter from the bytes, like a real receiver.
  virtual StatusOr<DecodedCloud> Decode(const std::vector<uint8_t>& bytes) = 0;
  // For the top-down picture: map points within half_width_m (x, y) of the decoded frame's pose
  // that explain none of its points, in the sensor frame. Empty for codecs without a map.
  virtual StatusOr<std::vector<Eigen::Vector3f>> UnselectedMapPoints(const DecodedCloud& decoded,
                                                                     double half_width_m) {
    (void)decoded;
    (void)half_width_m;
    return std::vector<Eigen::Vector3f>{};
  }
};

// Names accepted by MakeCodec, in report order; draco and dejaview only when built in.
std::vector<std::string> AvailableCodecs();
StatusOr<std::unique_ptr<Codec>> MakeCodec(const std::string& name);

// Peers (codec_peers.cpp, draco_codec.cpp) and the dejaview adapter (dejaview_codec.cpp).
std::unique_ptr<Codec> MakeZstdCodec();
std::unique_ptr<Codec> MakeLz4Codec();
std::unique_ptr<Codec> MakeGridZstdCodec();
std::unique_ptr<Codec> MakeDracoCodec();  // nullptr when built without Draco
// nullptr when built without dejaview_codec. With selection_radius_m > 0 it is named
// "dejaview-rR" (R the radius in metres): EncoderParams::selection_radius_m.
std::unique_ptr<Codec> MakeDejaviewCodec(double selection_radius_m = 0);

}  // namespace dv::bench
