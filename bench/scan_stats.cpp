#include "dejaview/bench/scan_stats.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <optional>

#include "cloud_tree.h"
#include "dejaview/base/kitti.h"
#include "dejaview/bench/metrics.h"

namespace dv::bench {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Nearest-rank percentile of an already sorted sample.
double Pct(const std::vector<float>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p * double(sorted.size()));
  return sorted[size_t(std::clamp(rank, 1.0, double(sorted.size()))) - 1];
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

using XyTree = CloudTree<2>;  // on x and y only

// Median over query points of the RMS residual of the plane z = a + b x + c y fitted to the
// ground points within 0.5 m horizontally.
double GroundRoughness(const std::vector<Eigen::Vector3f>& ground) {
  if (ground.size() < 100) return 0;
  CloudAdaptor adaptor{ground};
  XyTree tree(2, adaptor, nanoflann::KDTreeSingleIndexAdaptorParams(16));
  tree.buildIndex();
  std::vector<double> rms;
  std::vector<std::pair<uint32_t, float>> found;
  for (size_t i = 0; i < ground.size(); i += 16) {
    const float r = ground[i].head<2>().norm();
    if (r < 5 || r > 20) continue;
    found.clear();
    tree.radiusSearch(ground[i].data(), 0.25f, found, nanoflann::SearchParams());  // squared radius
    if (found.size() < 8) continue;
    Eigen::Matrix3d A = Eigen::Matrix3d::Zero();
    Eigen::Vector3d b = Eigen::Vector3d::Zero();
    const Eigen::Vector3d c = ground[i].cast<double>();
    for (const auto& f : found) {
      const Eigen::Vector3d q = ground[f.first].cast<double>() - c;
      const Eigen::Vector3d row(1, q.x(), q.y());
      A += row * row.transpose();
      b += row * q.z();
    }
    const Eigen::Vector3d x = A.ldlt().solve(b);
    double ss = 0;
    for (const auto& f : found) {
      const Eigen::Vector3d q = ground[f.first].cast<double>() - c;
      const double e = q.z() - (x[0] + x[1] * q.x() + x[2] * q.y());
      ss += e * e;
    }
    rms.push_back(std::sqrt(ss / double(found.size())));
  }
  return Median(std::move(rms));
}

// Beams as peaks of the elevation histogram of the points beyond 4 m (0.02 deg bins, smoothed
// over 0.1 deg), at least 0.1 deg apart.
std::vector<double> ElevationPeaks(const std::vector<double>& elevations_deg) {
  constexpr double kLo = -40, kBin = 0.02;
  constexpr int kBins = 4000;
  std::vector<double> h(kBins, 0), s(kBins, 0);
  for (double e : elevations_deg) {
    const int b = int(std::floor((e - kLo) / kBin));
    if (b >= 0 && b < kBins) h[size_t(b)] += 1;
  }
  for (int b = 2; b + 2 < kBins; ++b) {
    for (int k = -2; k <= 2; ++k) s[size_t(b)] += h[size_t(b + k)];
  }
  const double floor_count = std::max(10.0, 1e-4 * double(elevations_deg.size()));
  std::vector<double> peaks;
  for (int b = 5; b + 5 < kBins; ++b) {
    if (s[size_t(b)] < floor_count) continue;
    bool top = true;
    for (int k = -5; k <= 5 && top; ++k) {
      // Ties go to the lowest bin of a plateau so that a flat top yields one peak.
      top = k < 0 ? s[size_t(b + k)] < s[size_t(b)] : s[size_t(b + k)] <= s[size_t(b)];
    }
    if (!top) continue;
    double w = 0, m = 0;
    for (int k = -3; k <= 3; ++k) {
      w += h[size_t(b + k)];
      m += h[size_t(b + k)] * (kLo + (b + k + 0.5) * kBin);
    }
    peaks.push_back(m / w);
  }
  return peaks;
}

// Ring medians of elevation (degrees, top first) for a cloud stored ring after ring, each
// counter-clockwise from azimuth 0; empty when the order does not look like that.
std::vector<double> RingsFromOrder(const PointCloud& cloud) {
  std::vector<double> rings;
  std::vector<double> el;
  size_t start = 0;
  double prev_az = 0;
  const auto close = [&] {
    if (el.size() >= 20) rings.push_back(Median(el));
    el.clear();
  };
  for (size_t i = 0; i < cloud.size(); ++i) {
    const Eigen::Vector3f& p = cloud.xyz[i];
    const double az = std::atan2(double(p.y()), double(p.x()));
    if (i > 0 && prev_az < 0 && az >= 0 && i - start > 500) {
      close();
      start = i;
    }
    prev_az = az;
    const double rh = double(p.head<2>().norm());
    if (p.norm() > 4) el.push_back(std::atan2(double(p.z()), rh) * 180 / kPi);
  }
  close();
  if (rings.size() < 16 || rings.size() > 256) return {};
  return rings;
}

}  // namespace

bool IsGroundLabel(uint32_t label, bool simulated) {
  if (simulated) return LabelClass(label) == 0 && LabelInstance(label) == 0;
  const uint16_t c = LabelClass(label);
  return c == 40 || c == 44 || c == 48 || c == 49 || c == 60 || c == 72;
}

FrameStats FrameStatsOf(const PointCloud& cloud) {
  FrameStats f;
  f.points = cloud.size();
  if (cloud.empty()) return f;
  std::vector<int64_t> cm;
  cm.reserve(cloud.size());
  for (const auto& p : cloud.xyz) cm.push_back(int64_t(std::floor(double(p.z()) * 100)));
  std::sort(cm.begin(), cm.end());
  size_t best1 = 0, best10 = 0;
  for (size_t i = 0; i < cm.size();) {
    size_t j = i;
    while (j < cm.size() && cm[j] == cm[i]) ++j;
    best1 = std::max(best1, j - i);
    i = j;
  }
  for (auto& v : cm) v = v >= 0 ? v / 10 : -((-v + 9) / 10);  // floor division to 10 cm bands
  for (size_t i = 0; i < cm.size();) {
    size_t j = i;
    while (j < cm.size() && cm[j] == cm[i]) ++j;
    best10 = std::max(best10, j - i);
    i = j;
  }
  f.top_band_1cm = double(best1) / double(cloud.size());
  f.top_band_10cm = double(best10) / double(cloud.size());
  return f;
}

StatusOr<ScanStats> DriveStats(const Drive& drive, const ScanStatsOptions& options) {
  if (drive.size() == 0) return Status::InvalidArgument("the drive has no frames");
  ScanStats st;
  const size_t n = std::min(std::max<size_t>(1, options.max_frames), drive.size());
  std::vector<size_t> pick;
  for (size_t k = 0; k < n; ++k) pick.push_back(n == 1 ? 0 : k * (drive.size() - 1) / (n - 1));

  std::optional<Drive> other;
  if (!options.other_drive.empty()) {
    DV_ASSIGN_OR_RETURN(Drive o, OpenDrive(options.other_drive));
    if (o.poses.empty() || drive.poses.empty())
      return Status::InvalidArgument("comparing two drives needs poses in both");
    other = std::move(o);
  }

  std::vector<float> ranges, intensities, ground_z, ground_int;
  std::vector<double> ring_counts, top, bottom, order_spacing;
  std::vector<double> elevations, points, changed_next, step_next, changed_other, offset_other;
  st.below_hist.assign(20, 0);
  double zero_int = 0, total = 0;
  std::vector<std::vector<double>> azimuths_by_frame;
  std::vector<std::vector<double>> elev_by_frame;
  size_t ground_frames = 0;
  for (size_t i : pick) {
    DV_ASSIGN_OR_RETURN(PointCloud cloud, ReadPointCloudFile(drive.frame_paths[i]));
    RemoveNonFinite(&cloud);
    const FrameStats f = FrameStatsOf(cloud);
    points.push_back(double(f.points));
    st.top_band_1cm += f.top_band_1cm / double(n);
    st.top_band_10cm += f.top_band_10cm / double(n);
    std::vector<uint32_t> labels;
    if (!drive.labels_dir.empty()) {
      auto l = ReadLabels(drive.LabelPath(i), cloud.size());
      if (l.ok()) labels = std::move(*l);
    }
    std::vector<Eigen::Vector3f> ground;
    std::vector<double> az, el;
    for (size_t k = 0; k < cloud.size(); ++k) {
      const Eigen::Vector3f& p = cloud.xyz[k];
      const float r = p.norm(), rh = p.head<2>().norm();
      ranges.push_back(r);
      intensities.push_back(cloud.intensity[k]);
      zero_int += cloud.intensity[k] == 0.0f;
      total += 1;
      const int band = int(std::floor((double(p.z()) - st.below_lo_m) / 0.1));
      if (band >= 0 && band < 20) st.below_hist[size_t(band)] += 1;
      if (r > 4) {
        el.push_back(std::atan2(double(p.z()), double(rh)) * 180 / kPi);
        az.push_back(std::atan2(double(p.y()), double(p.x())));
      }
      if (!labels.empty() && IsGroundLabel(labels[k], drive.simulated())) {
        ground_z.push_back(p.z());
        ground.push_back(p);
        if (rh >= 5 && rh <= 15) ground_int.push_back(cloud.intensity[k]);
      }
    }
    elevations.insert(elevations.end(), el.begin(), el.end());
    const std::vector<double> rings = RingsFromOrder(cloud);
    if (!rings.empty()) {
      ring_counts.push_back(double(rings.size()));
      std::vector<double> sorted = rings;
      std::sort(sorted.begin(), sorted.end());
      top.push_back(sorted.back());
      bottom.push_back(sorted.front());
      for (size_t k = 1; k < sorted.size(); ++k) order_spacing.push_back(sorted[k] - sorted[k - 1]);
    }
    elev_by_frame.push_back(std::move(el));
    azimuths_by_frame.push_back(std::move(az));
    if (!ground.empty()) {
      st.ground_roughness_m += GroundRoughness(ground);
      ++ground_frames;
    }
    // Change to the next frame of the same drive, aligned by the poses.
    if (!drive.poses.empty() && drive.size() > 1) {
      const size_t a = i + 1 < drive.size() ? i : i - 1, b = a + 1;
      DV_ASSIGN_OR_RETURN(PointCloud ca, ReadPointCloudFile(drive.frame_paths[a]));
      DV_ASSIGN_OR_RETURN(PointCloud cb, ReadPointCloudFile(drive.frame_paths[b]));
      RemoveNonFinite(&ca);
      RemoveNonFinite(&cb);
      const Pose rel = drive.poses[a].inverse() * drive.poses[b];
      std::vector<Eigen::Vector3f> qa, qb;
      for (size_t k = 0; k < ca.size(); k += 4) qa.push_back(ca.xyz[k]);
      for (const auto& p : cb.xyz) qb.push_back((rel * p.cast<double>()).cast<float>());
      const auto d = NearestDistances(qa, qb);
      changed_next.push_back(
          double(std::count_if(d.begin(), d.end(), [](double x) { return x > 0.1; })) /
          double(std::max<size_t>(1, d.size())));
      step_next.push_back(rel.translation().norm());
    }
    if (other) {
      size_t j = 0;
      double best = 1e300;
      for (size_t k = 0; k < other->poses.size(); ++k) {
        const double dist = (other->poses[k].translation() - drive.poses[i].translation()).norm();
        if (dist < best) best = dist, j = k;
      }
      DV_ASSIGN_OR_RETURN(PointCloud co, ReadPointCloudFile(other->frame_paths[j]));
      RemoveNonFinite(&co);
      const Pose rel = drive.poses[i].inverse() * other->poses[j];
      std::vector<Eigen::Vector3f> qa, qb;
      for (size_t k = 0; k < cloud.size(); k += 4) qa.push_back(cloud.xyz[k]);
      for (const auto& p : co.xyz) qb.push_back((rel * p.cast<double>()).cast<float>());
      const auto d = NearestDistances(qa, qb);
      changed_other.push_back(
          double(std::count_if(d.begin(), d.end(), [](double x) { return x > 0.1; })) /
          double(std::max<size_t>(1, d.size())));
      offset_other.push_back(best);
    }
  }
  st.frames = n;
  double sum = 0;
  for (double p : points) sum += p;
  st.points_mean = sum / double(n);
  st.points_min = *std::min_element(points.begin(), points.end());
  st.points_max = *std::max_element(points.begin(), points.end());
  for (auto& b : st.below_hist) b /= std::max(1.0, total);

  std::sort(ranges.begin(), ranges.end());
  st.range_p5 = Pct(ranges, 0.05);
  st.range_p25 = Pct(ranges, 0.25);
  st.range_p50 = Pct(ranges, 0.5);
  st.range_p75 = Pct(ranges, 0.75);
  st.range_p95 = Pct(ranges, 0.95);
  st.range_max = ranges.empty() ? 0 : ranges.back();
  double isum = 0;
  for (float v : intensities) isum += v;
  st.intensity_mean = intensities.empty() ? 0 : isum / double(intensities.size());
  std::sort(intensities.begin(), intensities.end());
  st.intensity_p10 = Pct(intensities, 0.1);
  st.intensity_p50 = Pct(intensities, 0.5);
  st.intensity_p90 = Pct(intensities, 0.9);
  st.intensity_zero = zero_int / std::max(1.0, total);
  std::sort(ground_int.begin(), ground_int.end());
  st.ground_intensity_p50 = Pct(ground_int, 0.5);

  st.ground_points = ground_z.size();
  std::sort(ground_z.begin(), ground_z.end());
  st.ground_z_p5 = Pct(ground_z, 0.05);
  st.ground_z_p50 = Pct(ground_z, 0.5);
  st.ground_z_p95 = Pct(ground_z, 0.95);
  if (ground_frames) st.ground_roughness_m /= double(ground_frames);

  const std::vector<double> peaks = ElevationPeaks(elevations);
  std::vector<double> spacing;
  if (ring_counts.size() * 2 > n) {
    st.rings_from_order = true;
    st.beams = int(std::lround(Median(ring_counts)));
    st.elevation_top_deg = Median(top);
    st.elevation_bottom_deg = Median(bottom);
    spacing = order_spacing;
  } else {
    st.beams = int(peaks.size());
    if (!peaks.empty()) {
      st.elevation_bottom_deg = peaks.front();
      st.elevation_top_deg = peaks.back();
    }
    for (size_t k = 1; k < peaks.size(); ++k) spacing.push_back(peaks[k] - peaks[k - 1]);
  }
  if (!spacing.empty()) {
    std::vector<float> sorted(spacing.begin(), spacing.end());
    std::sort(sorted.begin(), sorted.end());
    st.spacing_p5_deg = Pct(sorted, 0.05);
    st.spacing_median_deg = Pct(sorted, 0.5);
    st.spacing_p95_deg = Pct(sorted, 0.95);
  }
  // Azimuth steps: along each beam (points within a quarter spacing of its peak), the median gap
  // between neighbouring azimuths of one frame.
  std::vector<double> steps;
  if (!peaks.empty()) {
    const double tol = std::max(0.02, st.spacing_median_deg / 4);
    for (size_t f = 0; f < elev_by_frame.size(); ++f) {
      std::vector<std::vector<double>> by_beam(peaks.size());
      for (size_t k = 0; k < elev_by_frame[f].size(); ++k) {
        const double e = elev_by_frame[f][k];
        const size_t b = size_t(std::lower_bound(peaks.begin(), peaks.end(), e) - peaks.begin());
        size_t best = b;
        if (b == peaks.size() || (b > 0 && e - peaks[b - 1] < peaks[b] - e)) best = b - 1;
        if (std::abs(peaks[best] - e) <= tol) by_beam[best].push_back(azimuths_by_frame[f][k]);
      }
      for (auto& az : by_beam) {
        if (az.size() < 200) continue;
        std::sort(az.begin(), az.end());
        std::vector<double> gaps;
        for (size_t k = 1; k < az.size(); ++k) {
          const double g = az[k] - az[k - 1];
          if (g > 1e-5 && g < 0.02) gaps.push_back(g);
        }
        if (gaps.size() > 100) steps.push_back(2 * kPi / Median(gaps));
      }
    }
  }
  st.azimuth_steps = int(std::lround(Median(steps)));
  const int beams = options.beams > 0 ? options.beams : st.beams;
  const int az_steps = options.azimuth_steps > 0 ? options.azimuth_steps : st.azimuth_steps;
  if (beams > 0 && az_steps > 0)
    st.missing = 1.0 - st.points_mean / (double(beams) * double(az_steps));
  if (!changed_next.empty()) {
    st.next_frame_changed = 0;
    for (size_t k = 0; k < changed_next.size(); ++k) {
      st.next_frame_changed += changed_next[k] / double(changed_next.size());
      st.next_frame_step_m += step_next[k] / double(step_next.size());
    }
  }
  if (!changed_other.empty()) {
    st.other_day_changed = 0;
    for (size_t k = 0; k < changed_other.size(); ++k) {
      st.other_day_changed += changed_other[k] / double(changed_other.size());
      st.other_day_offset_m += offset_other[k] / double(offset_other.size());
    }
  }
  return st;
}

}  // namespace dv::bench
