// Runs one codec at one knob over a workload and measures it exactly as BENCHMARK.md defines.
// Every frame is coded twice: geometry only (the geometry-only ratio, the errors and the
// timings come from this run) and with intensity (the xyz+intensity ratio). Encode and decode
// run on the calling thread, one frame at a time, so the timings are single-thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dejaview/bench/codec.h"
#include "dejaview/bench/metrics.h"
#include "dejaview/bench/protocol.h"

namespace dv::bench {

struct Percentiles {
  double median = 0;
  double p95 = 0;
};
// Nearest-rank percentiles; empty input gives zeros.
Percentiles TimingPercentiles(std::vector<double> values_ms);

struct FrameRecord {
  std::string name;
  size_t original_points = 0, decoded_points = 0, non_finite = 0;
  size_t bytes_geometry = 0, bytes_intensity = 0;
  bool fallback = false;
  FrameError error;
  double encode_ms = 0, decode_ms = 0;
};

// One explained/residual sample for the top-down picture: the decoded cloud in the sensor frame.
struct PictureSample {
  std::string frame;
  std::string codec_label;  // "dejaview T_m=0.1"
  PointCloud original;
  DecodedCloud decoded;
  std::vector<Eigen::Vector3f> map_only;  // Codec::UnselectedMapPoints, sensor frame
};

// Half-width of the top-down picture around the sensor (x and y, metres).
constexpr double kPictureHalfWidthM = 40;

struct SettingResult {
  std::string workload, codec, knob_name;
  double knob = 0;
  size_t frames = 0, fallback_frames = 0;
  size_t original_points = 0, decoded_points = 0, non_finite_points = 0;
  uint64_t bytes_geometry = 0, bytes_intensity = 0, map_bytes = 0;
  double ratio_geometry = 0;   // 12 * sum N / sum bytes (intensity off)
  double ratio_intensity = 0;  // 16 * sum N / sum bytes (intensity on)
  // Summed over the frames of the geometry-only run; "header" holds what the codec did not name.
  std::vector<std::pair<std::string, uint64_t>> sections;
  double cd_m = 0;             // SetChamfer over the frames
  OneWayError p_to_q, q_to_p;  // pooled over every point of every frame
  double hausdorff_m = 0;
  // Labelled workloads only: nn from the original dynamic (moving-class) / static points to the
  // whole reconstruction, pooled over the frames.
  bool has_labels = false;
  OneWayError dynamic_p_to_q, static_p_to_q;
  Percentiles encode_ms, decode_ms;
  long peak_rss_kb = 0;  // process high-water mark (getrusage) after this setting
  std::vector<FrameRecord> per_frame;
};

struct RunOptions {
  std::string scratch_dir;                           // for map-based codecs' maps
  std::function<void(const std::string&)> progress;  // one line per step, may be empty
  bool keep_picture = false;                         // fill *picture from the first frame
};

StatusOr<SettingResult> RunSetting(Codec& codec, double knob, const Workload& workload,
                                   const RunOptions& options, PictureSample* picture = nullptr);

// 12 * points / bytes (or 16 with intensity): the ratio of BENCHMARK.md; 0 bytes gives 0.
double Ratio(uint64_t points, uint64_t bytes, bool intensity);

// Adds "header" for bytes the named sections leave out; a codec naming more bytes than it
// produced is an error (its report cannot be trusted).
StatusOr<std::vector<std::pair<std::string, size_t>>> AccountSections(const EncodedFrame& frame);

}  // namespace dv::bench
