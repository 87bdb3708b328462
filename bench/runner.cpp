#include "dejaview/bench/runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "dejaview/base/kitti.h"
#include "dejaview/base/percentile.h"

namespace dv::bench {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

long PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // kilobytes on Linux
}

void AddSections(const std::vector<std::pair<std::string, size_t>>& from,
                 std::vector<std::pair<std::string, uint64_t>>* to) {
  for (const auto& section : from) {
    auto it = std::find_if(to->begin(), to->end(),
                           [&](const auto& s) { return s.first == section.first; });
    if (it == to->end()) {
      to->push_back({section.first, section.second});
    } else {
      it->second += section.second;
    }
  }
}

void Append(std::vector<double>* to, const std::vector<double>& from) {
  to->insert(to->end(), from.begin(), from.end());
}

}  // namespace

Percentiles TimingPercentiles(std::vector<double> v) {
  return {NearestRank(v, 0.5), NearestRank(v, 0.95)};
}

double Ratio(uint64_t points, uint64_t bytes, bool intensity) {
  if (bytes == 0) return 0;
  return double(points) * (intensity ? 16.0 : 12.0) / double(bytes);
}

StatusOr<std::vector<std::pair<std::string, size_t>>> AccountSections(const EncodedFrame& frame) {
  std::vector<std::pair<std::string, size_t>> sections = frame.sections;
  size_t named = 0;
  for (const auto& s : sections) named += s.second;
  if (named > frame.bytes.size()) {
    return Status::Corruption("codec reports " + std::to_string(named) + " section bytes for a " +
                              std::to_string(frame.bytes.size()) + "-byte frame");
  }
  if (named < frame.bytes.size()) {
    auto it = std::find_if(sections.begin(), sections.end(),
                           [](const auto& s) { return s.first == "header"; });
    if (it == sections.end()) {
      sections.insert(sections.begin(), {"header", frame.bytes.size() - named});
    } else {
      it->second += frame.bytes.size() - named;
    }
  }
  return sections;
}

StatusOr<SettingResult> RunSetting(Codec& codec, double knob, const Workload& workload,
                                   const RunOptions& options, PictureSample* picture) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  SettingResult r;
  r.workload = workload.name;
  r.codec = codec.name();
  r.knob_name = codec.knob_name();
  r.knob = knob;
  DV_RETURN_IF_ERROR(codec.Prepare(workload.map_drives, knob, options.scratch_dir));
  r.map_bytes = codec.map_bytes();
  std::vector<double> pq_all, qp_all, dyn_all, static_all, enc_ms, dec_ms;
  std::vector<FrameError> errors;
  for (size_t fi = 0; fi < workload.frames.size(); ++fi) {
    const BenchFrame& f = workload.frames[fi];
    say(f.name + " (" + std::to_string(fi + 1) + "/" + std::to_string(workload.frames.size()) +
        ")");
    FrameContext ctx{f.sequence, f.timestamp_ns, false};
    auto t0 = std::chrono::steady_clock::now();
    DV_ASSIGN_OR_RETURN(EncodedFrame geo, codec.Encode(f.cloud, f.T_world_sensor_prior, ctx, knob));
    const double encode_ms = MsSince(t0);
    t0 = std::chrono::steady_clock::now();
    DV_ASSIGN_OR_RETURN(DecodedCloud decoded, codec.Decode(geo.bytes));
    const double decode_ms = MsSince(t0);
    DV_ASSIGN_OR_RETURN(auto sections, AccountSections(geo));
    AddSections(sections, &r.sections);

    ctx.intensity = true;
    DV_ASSIGN_OR_RETURN(EncodedFrame with_i,
                        codec.Encode(f.cloud, f.T_world_sensor_prior, ctx, knob));
    DV_ASSIGN_OR_RETURN(DecodedCloud decoded_i, codec.Decode(with_i.bytes));
    if (decoded_i.cloud.size() != decoded.cloud.size()) {
      // The intensity run is only used for its byte count; say so when its geometry differs.
      say(f.name + ": note: intensity run decodes " + std::to_string(decoded_i.cloud.size()) +
          " points, geometry run " + std::to_string(decoded.cloud.size()));
    }

    const std::vector<double> pq = NearestDistances(f.cloud.xyz, decoded.cloud.xyz);
    const std::vector<double> qp = NearestDistances(decoded.cloud.xyz, f.cloud.xyz);
    FrameRecord rec;
    rec.name = f.name;
    rec.original_points = f.cloud.size();
    rec.decoded_points = decoded.cloud.size();
    rec.non_finite = f.non_finite;
    rec.bytes_geometry = geo.bytes.size();
    rec.bytes_intensity = with_i.bytes.size();
    rec.fallback = geo.fallback;
    rec.error.p_to_q = Summarize(pq);
    rec.error.q_to_p = Summarize(qp);
    rec.encode_ms = encode_ms;
    rec.decode_ms = decode_ms;
    if (!f.labels.empty()) {
      r.has_labels = true;
      for (size_t k = 0; k < pq.size(); ++k) {
        (IsDynamicLabel(f.labels[k], f.simulated) ? dyn_all : static_all).push_back(pq[k]);
      }
    }
    Append(&pq_all, pq);
    Append(&qp_all, qp);
    errors.push_back(rec.error);
    enc_ms.push_back(encode_ms);
    dec_ms.push_back(decode_ms);
    r.frames++;
    r.fallback_frames += geo.fallback ? 1 : 0;
    r.original_points += rec.original_points;
    r.decoded_points += rec.decoded_points;
    r.non_finite_points += rec.non_finite;
    r.bytes_geometry += rec.bytes_geometry;
    r.bytes_intensity += rec.bytes_intensity;
    r.per_frame.push_back(rec);
    if (picture != nullptr && options.keep_picture && fi == 0) {
      DV_ASSIGN_OR_RETURN(auto map_only, codec.UnselectedMapPoints(decoded, kPictureHalfWidthM));
      std::ostringstream label;
      label << r.codec << " " << r.knob_name << "=" << knob;
      *picture =
          PictureSample{f.name, label.str(), f.cloud, std::move(decoded), std::move(map_only)};
    }
  }
  r.ratio_geometry = Ratio(r.original_points, r.bytes_geometry, false);
  r.ratio_intensity = Ratio(r.original_points, r.bytes_intensity, true);
  r.cd_m = SetChamfer(errors);
  r.p_to_q = Summarize(std::move(pq_all));
  r.q_to_p = Summarize(std::move(qp_all));
  r.hausdorff_m = std::max(r.p_to_q.max_m, r.q_to_p.max_m);
  if (r.has_labels) {
    r.dynamic_p_to_q = Summarize(std::move(dyn_all));
    r.static_p_to_q = Summarize(std::move(static_all));
  }
  r.encode_ms = TimingPercentiles(enc_ms);
  r.decode_ms = TimingPercentiles(dec_ms);
  r.peak_rss_kb = PeakRssKb();
  return r;
}

}  // namespace dv::bench
