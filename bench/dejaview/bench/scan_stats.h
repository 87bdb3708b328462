// Statistics of a drive's frames that decide whether codec figures measured on one kind of frame
// (simulated) carry over to another (real): the shape of the ground, the beam pattern, ranges,
// intensities, missing returns and how much changes from one view of a place to the next.
// `dejaview stats` prints them; docs/simulator.md compares the simulator with KITTI.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dejaview/base/drive.h"
#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv::bench {

// One frame's statistics; ScanStatsOf(frames) pools them.
struct FrameStats {
  size_t points = 0;
  // Largest fraction of the frame's points in one height band of the sensor frame, bands of
  // 1 cm and 10 cm aligned to multiples of the band: a flat simulated ground puts most of the
  // ground in one band, a real road (camber, slopes, pitch, roughness) spreads it.
  double top_band_1cm = 0;
  double top_band_10cm = 0;
};

struct ScanStats {
  size_t frames = 0;
  double points_mean = 0, points_min = 0, points_max = 0;
  double top_band_1cm = 0, top_band_10cm = 0;  // means over the frames
  // Heights (sensor frame z) of the points below the sensor: fractions of all points in 10 cm
  // bands from below_lo_m upward (the last band also holds everything up to -0.5 m).
  double below_lo_m = -2.5;
  std::vector<double> below_hist;
  // Ground points (labelled road/sidewalk/terrain; the simulator's road surface id 0): z
  // percentiles, and the RMS residual of a plane fitted to each ground point's neighbours within
  // 0.5 m horizontally (points 5-20 m away): the surface's small-scale roughness plus range noise.
  size_t ground_points = 0;
  double ground_z_p5 = 0, ground_z_p50 = 0, ground_z_p95 = 0;
  double ground_roughness_m = 0;
  // Beams and their spacing in degrees (5th percentile, median, 95th percentile of the
  // elevation differences of neighbouring beams). A frame stored ring after ring, each
  // counter-clockwise from the front (KITTI), is cut into rings where the azimuth passes 0; each
  // ring's elevation is the median over its points beyond 4 m. Otherwise (the simulator writes
  // azimuth after azimuth) beams are the peaks of the elevation histogram of the points beyond
  // 4 m, pooled over the frames.
  int beams = 0;
  bool rings_from_order = false;
  double elevation_top_deg = 0, elevation_bottom_deg = 0;
  double spacing_p5_deg = 0, spacing_median_deg = 0, spacing_p95_deg = 0;
  int azimuth_steps = 0;  // estimated from the median azimuth gap along a beam
  // 1 - points / (beams x azimuth steps); the caller may override beams and steps.
  double missing = 0;
  double range_p5 = 0, range_p25 = 0, range_p50 = 0, range_p75 = 0, range_p95 = 0, range_max = 0;
  double intensity_mean = 0, intensity_p10 = 0, intensity_p50 = 0, intensity_p90 = 0;
  double intensity_zero = 0;        // fraction of points with intensity exactly 0
  double ground_intensity_p50 = 0;  // ground points 5-15 m away
  // Consecutive frames aligned by their poses: the fraction of frame i's points farther than
  // 0.1 m from every point of frame i+1, and the mean distance between the two sensor positions.
  double next_frame_changed = -1, next_frame_step_m = 0;
  // Against another drive of the same route (another day): each frame against the other drive's
  // nearest frame by position, both in the world by their poses; -1 when not measured.
  double other_day_changed = -1, other_day_offset_m = 0;
};

struct ScanStatsOptions {
  size_t max_frames = 10;   // evenly spaced over the drive
  int beams = 0;            // 0: as found in the data
  int azimuth_steps = 0;    // 0: as estimated from the data
  std::string other_drive;  // another day of the same route, for other_day_changed
};

// True for a label that marks ground: SemanticKITTI road, parking, sidewalk, other-ground,
// lane marking and terrain; the simulator's static road surface (object id 0).
bool IsGroundLabel(uint32_t label, bool simulated);

FrameStats FrameStatsOf(const PointCloud& cloud);
StatusOr<ScanStats> DriveStats(const Drive& drive, const ScanStatsOptions& options);

}  // namespace dv::bench
