#include "dejaview/bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dejaview/base/file_util.h"

namespace dv::bench {
namespace {

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}
std::string M(double v) { return std::isfinite(v) ? Fmt("%.3f", v) : "inf"; }
std::string R(double v) { return Fmt(v >= 100 ? "%.0f" : "%.1f", v); }
std::string Knob(const SettingResult& s) { return s.knob_name + "=" + Fmt("%g", s.knob); }
std::string Triple(const OneWayError& e) {
  return M(e.mean_m) + " / " + M(e.p99_m) + " / " + M(e.max_m);
}

// Curve of one codec inside one workload's settings.
std::vector<std::pair<double, double>> Curve(const std::vector<SettingResult>& settings,
                                             const std::string& codec) {
  std::vector<std::pair<double, double>> c;
  for (const auto& s : settings) {
    if (s.codec == codec) c.push_back({s.cd_m, s.ratio_geometry});
  }
  return c;
}

std::vector<std::string> Codecs(const std::vector<SettingResult>& settings) {
  std::vector<std::string> names;
  for (const auto& s : settings) {
    if (std::find(names.begin(), names.end(), s.codec) == names.end()) names.push_back(s.codec);
  }
  return names;
}

// The setting of a lossy codec whose CD is nearest 0.10 m: the one the section chart shows.
std::vector<const SettingResult*> NearTenCentimetres(const std::vector<SettingResult>& settings) {
  std::vector<const SettingResult*> out;
  for (const auto& name : Codecs(settings)) {
    const SettingResult* best = nullptr;
    for (const auto& s : settings) {
      if (s.codec != name || s.cd_m <= 0) continue;
      if (!best || std::fabs(s.cd_m - 0.1) < std::fabs(best->cd_m - 0.1)) best = &s;
    }
    if (best) out.push_back(best);
  }
  return out;
}

std::string Opt(const std::optional<double>& v) { return v ? R(*v) : "n/a"; }

std::string Slug(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

nlohmann::json OneWayJson(const OneWayError& e) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"mean_m", num(e.mean_m)},
          {"p99_m", num(e.p99_m)},
          {"max_m", num(e.max_m)},
          {"rmse_m", num(e.rmse_m)},
          {"points", e.points}};
}

Status WriteText(const std::string& path, const std::string& text,
                 std::vector<std::string>* notes) {
  DV_RETURN_IF_ERROR(WriteFileAtomic(path, text));
  notes->push_back("wrote " + path);
  return Status::Ok();
}

bool HaveGnuplot() { return std::system("gnuplot --version >/dev/null 2>&1") == 0; }

Status RunGnuplot(const std::string& script_path, const std::string& png,
                  std::vector<std::string>* notes) {
  // Paths come from --out; refuse a quote rather than build a broken shell line.
  if (script_path.find('\'') != std::string::npos) {
    return Status::InvalidArgument(script_path + ": path contains a quote");
  }
  const std::string cmd = "gnuplot '" + script_path + "'";
  if (std::system(cmd.c_str()) != 0) return Status::IoError("gnuplot failed on " + script_path);
  notes->push_back("wrote " + png);
  return Status::Ok();
}

Status PlotRd(const std::string& w, const std::vector<SettingResult>& settings,
              const std::string& dir, std::vector<std::string>* notes) {
  const std::string base = dir + "/rd_" + Slug(w);
  std::ostringstream dat, gp;
  const auto codecs = Codecs(settings);
  for (const auto& name : codecs) {
    auto curve = Curve(settings, name);
    std::sort(curve.begin(), curve.end());
    dat << "# " << name << "\n";
    for (const auto& [cd, ratio] : curve) dat << cd << " " << ratio << "\n";
    dat << "\n\n";
  }
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".dat", dat.str()));
  gp << "set terminal pngcairo noenhanced size 1000,700 font 'sans,12'\n"
     << "set output '" << base << ".png'\n"
     << "set title 'Rate-distortion, " << w << " (geometry-only ratio vs DejaView CD)'\n"
     << "set xlabel 'CD (m)'\nset ylabel 'geometry-only ratio 12N / bytes'\n"
     << "set logscale y\nset grid\nset key outside right\nset xrange [-0.01:*]\n";
  for (double cd : kEqualErrorCdM) {
    gp << "set arrow from " << cd << ", graph 0 to " << cd
       << ", graph 1 nohead dt 2 lc rgb 'gray'\n";
  }
  gp << "plot ";
  for (size_t i = 0; i < codecs.size(); ++i) {
    gp << (i ? ", " : "") << "'" << base << ".dat' index " << i
       << " using 1:2 with linespoints lw 2 pt " << (i + 4) << " title '" << codecs[i] << "'";
  }
  gp << "\n";
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".gp", gp.str()));
  return RunGnuplot(base + ".gp", base + ".png", notes);
}

Status PlotSections(const std::string& w, const std::vector<SettingResult>& settings,
                    const std::string& dir, std::vector<std::string>* notes) {
  const auto bars = NearTenCentimetres(settings);
  if (bars.empty()) return Status::Ok();
  std::vector<std::string> names;
  for (const auto* s : bars) {
    for (const auto& sec : s->sections) {
      if (std::find(names.begin(), names.end(), sec.first) == names.end())
        names.push_back(sec.first);
    }
  }
  const std::string base = dir + "/sections_" + Slug(w);
  std::ostringstream dat, gp;
  dat << "# setting";
  for (const auto& n : names) dat << " " << n;
  dat << "\n";
  for (const auto* s : bars) {
    dat << '"' << s->codec << "\\n" << Knob(*s) << "\\nCD " << M(s->cd_m) << '"';
    for (const auto& n : names) {
      uint64_t b = 0;
      for (const auto& sec : s->sections) b += sec.first == n ? sec.second : 0;
      dat << " " << double(b) / double(std::max<size_t>(1, s->frames));
    }
    dat << "\n";
  }
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".dat", dat.str()));
  gp << "set terminal pngcairo noenhanced size 1000,700 font 'sans,12'\n"
     << "set output '" << base << ".png'\n"
     << "set title 'Bytes per frame by section, " << w
     << " (lossy codecs at the setting nearest CD 0.10 m)'\n"
     << "set ylabel 'bytes per frame'\nset style data histograms\n"
     << "set style histogram rowstacked\nset style fill solid 0.8 border -1\nset boxwidth 0.6\n"
     << "set key outside right\nset grid ytics\nset yrange [0:*]\nset bmargin 6\n"
     << "set xrange [-0.6:" << double(bars.size()) - 0.4 << "]\n"
     << "plot ";
  for (size_t i = 0; i < names.size(); ++i) {
    gp << (i ? ", " : "") << "'" << base << ".dat' using " << (i + 2) << (i == 0 ? ":xtic(1)" : "")
       << " title '" << names[i] << "'";
  }
  gp << "\n";
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".gp", gp.str()));
  return RunGnuplot(base + ".gp", base + ".png", notes);
}

// Top-down (x, y in the sensor frame) within 40 m: explained / residual / gap / fill points when
// the codec reports each point's source, else every decoded point coloured by its error to the
// original.
Status PlotTopDown(const std::string& w, const PictureSample& pic, const std::string& dir,
                   std::vector<std::string>* notes) {
  constexpr double kHalfWidthM = kPictureHalfWidthM;
  const std::string base = dir + "/topdown_" + Slug(w);
  const auto& q = pic.decoded.cloud.xyz;
  const bool by_source = pic.decoded.source.size() == q.size() && !q.empty();
  std::vector<double> err;
  if (!by_source) err = NearestDistances(q, pic.original.xyz);
  std::ostringstream dat, gp;
  auto inside = [&](const Eigen::Vector3f& p) {
    return std::fabs(p.x()) <= kHalfWidthM && std::fabs(p.y()) <= kHalfWidthM;
  };
  // Category 4 (after the codec's sources 0-3): map-only points, drawn first so that the
  // frame's own points stay on top.
  for (const auto& p : pic.map_only) {
    if (by_source && inside(p)) dat << p.x() << " " << p.y() << " 4\n";
  }
  for (size_t i = 0; i < q.size(); ++i) {
    if (!inside(q[i])) continue;
    dat << q[i].x() << " " << q[i].y() << " "
        << (by_source ? double(pic.decoded.source[i]) : err[i]) << "\n";
  }
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".dat", dat.str()));
  gp << "set terminal pngcairo noenhanced size 1000,1000 font 'sans,12'\n"
     << "set output '" << base << ".png'\n"
     << "set size ratio -1\nset xlabel 'x (m, sensor frame)'\nset ylabel 'y (m)'\n"
     << "set xrange [" << -kHalfWidthM << ":" << kHalfWidthM << "]\nset yrange [" << -kHalfWidthM
     << ":" << kHalfWidthM << "]\nset key top right opaque\n";
  if (by_source) {
    gp << "set title 'Frame " << pic.frame << ", " << pic.codec_label
       << ": explained by the map / fill / residual / gap / map only'\n"
       << "plot '" << base << ".dat' using 1:($3==4?$2:1/0) with points pt 7 ps 0.15 lc rgb "
       << "'#bbbbbb' title 'map only (not selected)', "
       << "'' using 1:($3==0?$2:1/0) with points pt 7 ps 0.15 lc rgb '#1f77b4' title "
       << "'explained by the map', "
       << "'' using 1:($3==3?$2:1/0) with points pt 7 ps 0.15 lc rgb '#9ecae1' title "
       << "'fill (between selected map voxels)', "
       << "'' using 1:($3==2?$2:1/0) with points pt 7 ps 0.15 lc rgb '#2ca02c' title "
       << "'gap (coded within T)', "
       << "'' using 1:($3==1?$2:1/0) with points pt 7 ps 0.3 lc rgb '#d62728' title 'residual'\n";
  } else {
    gp << "set title 'Frame " << pic.frame << ", " << pic.codec_label
       << ": decoded points by error to the original (m)'\n"
       << "set palette rgb 33,13,10\nset cblabel 'nn error (m)'\n"
       << "plot '" << base << ".dat' using 1:2:3 with points pt 7 ps 0.15 palette notitle\n";
  }
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".gp", gp.str()));
  return RunGnuplot(base + ".gp", base + ".png", notes);
}

// The codec issue's targets for dejaview, checked on this run's numbers; empty when it did not run.
std::string TargetsTable(const std::vector<SettingResult>& settings) {
  constexpr std::array<double, 3> kTargetRatio = {90, 250, 500};
  constexpr double kEncodeMs = 30, kDecodeMs = 15;
  std::vector<const SettingResult*> dv;
  for (const auto& s : settings) {
    if (s.codec == "dejaview") dv.push_back(&s);
  }
  if (dv.empty()) return "";
  std::ostringstream o;
  auto row = [&](const std::string& target, const std::string& measured, bool met) {
    o << "| " << target << " | " << measured << " | " << (met ? "yes" : "**no**") << " |\n";
  };
  o << "dejaview against the codec issue's targets (from the rows above):\n\n"
       "| target | measured | met |\n|---|---|---|\n";
  const auto curve = Curve(settings, "dejaview");
  for (size_t i = 0; i < kEqualErrorCdM.size(); ++i) {
    const auto r = RatioAtCd(curve, kEqualErrorCdM[i]);
    row("geometry-only ratio at CD " + Fmt("%.2f", kEqualErrorCdM[i]) +
            " m >= " + Fmt("%.0f", kTargetRatio[i]),
        Opt(r), r && *r >= kTargetRatio[i]);
  }
  double worst_margin = -INFINITY, worst_dyn_margin = -INFINITY, enc = 0, dec = 0;
  size_t fallback = 0;
  bool labels = false;
  for (const auto* s : dv) {
    worst_margin = std::max(worst_margin, s->hausdorff_m - s->knob);
    if (s->has_labels && s->dynamic_p_to_q.points > 0) {
      labels = true;
      worst_dyn_margin = std::max(worst_dyn_margin, s->dynamic_p_to_q.max_m - s->knob);
    }
    enc = std::max(enc, s->encode_ms.median);
    dec = std::max(dec, s->decode_ms.median);
    fallback += s->fallback_frames;
  }
  row("Hausdorff <= T at every T (exact)",
      "max(Hausdorff - T) = " + Fmt("%+.2e", worst_margin) + " m", worst_margin <= 0);
  if (labels) {
    row("dynamic points: max P->Q <= T",
        "max(dynamic max - T) = " + Fmt("%+.2e", worst_dyn_margin) + " m", worst_dyn_margin <= 0);
  }
  row("every frame coded (none skipped)",
      std::to_string(dv.size()) + " settings x " + std::to_string(dv.front()->frames) +
          " frames coded, " + std::to_string(fallback) + " frame codings in intra fallback",
      true);
  row("encode <= 30 ms per frame (median, every T)", "worst median " + Fmt("%.1f", enc) + " ms",
      enc <= kEncodeMs);
  row("decode <= 15 ms per frame (median, every T)", "worst median " + Fmt("%.1f", dec) + " ms",
      dec <= kDecodeMs);
  // The same targets where each ratio target is read: at the two settings whose CD brackets it
  // (the equal-error ratio lies between theirs), the error a user picking that target runs at.
  for (double cd : kEqualErrorCdM) {
    const SettingResult *below = nullptr, *above = nullptr;
    for (const auto* s : dv) {
      if (s->cd_m <= cd && (!below || s->cd_m > below->cd_m)) below = s;
      if (s->cd_m >= cd && (!above || s->cd_m < above->cd_m)) above = s;
    }
    const std::string target =
        "encode <= 30 and decode <= 15 ms per frame (median) at CD " + Fmt("%.2f", cd) + " m";
    if (!below || !above) {
      row(target, "n/a: the sweep does not reach CD " + Fmt("%.2f", cd) + " m", false);
      continue;
    }
    const std::string at = below == above ? Fmt("%g", below->knob)
                                          : Fmt("%g", below->knob) + ", " + Fmt("%g", above->knob);
    const double e = std::max(below->encode_ms.median, above->encode_ms.median);
    const double d = std::max(below->decode_ms.median, above->decode_ms.median);
    row(target,
        below->knob_name + " " + at + ": worst encode " + Fmt("%.1f", e) + ", decode " +
            Fmt("%.1f", d) + " ms",
        e <= kEncodeMs && d <= kDecodeMs);
  }
  o << "\n";
  return o.str();
}

}  // namespace

// Every frame drawn with the same axes and colour scales, so that a simulated frame can be judged
// next to a real one: top-down coloured by height, and the sensor's own view (azimuth x
// elevation) coloured by range and by intensity, which shows the beam pattern and dropouts.
Status RenderFramesPng(const std::vector<RenderedFrame>& frames, const std::string& png) {
  if (frames.empty()) return Status::InvalidArgument("render: no frame to draw");
  if (png.find('\'') != std::string::npos) {
    return Status::InvalidArgument(png + ": path contains a quote");
  }
  if (!HaveGnuplot()) return Status::Unavailable("gnuplot is not installed; no " + png);
  constexpr double kDeg = 180.0 / 3.14159265358979323846;
  std::ostringstream dat, gp;
  for (const RenderedFrame& f : frames) {
    for (size_t i = 0; i < f.cloud->size(); ++i) {
      const Eigen::Vector3f& p = f.cloud->xyz[i];
      const double range = p.norm();
      if (!p.allFinite() || range < 1e-3) continue;
      dat << p.x() << ' ' << p.y() << ' ' << p.z() << ' ' << std::atan2(p.y(), p.x()) * kDeg << ' '
          << std::asin(p.z() / range) * kDeg << ' ' << range << ' ' << f.cloud->intensity[i]
          << '\n';
    }
    dat << "\n\n";  // one gnuplot data block per frame
  }
  const std::string base = png + ".render";
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".dat", dat.str()));
  gp << "set terminal pngcairo noenhanced size 2400," << 560 * frames.size() << " font 'sans,11'\n"
     << "set output '" << png << "'\nset multiplot layout " << frames.size() << ",3\n"
     << "set palette rgb 33,13,10\nunset key\n";
  for (size_t k = 0; k < frames.size(); ++k) {
    const std::string d = "'" + base + ".dat' index " + std::to_string(k);
    std::string name;  // inside gnuplot's single quotes, where a quote is written twice
    for (char c : frames[k].title) name += c == '\'' ? std::string("''") : std::string(1, c);
    name += " (" + std::to_string(frames[k].cloud->size()) + " points)";
    gp << "set size ratio -1\nset xrange [-40:40]\nset yrange [-40:40]\n"
       << "set xlabel 'x (m)'\nset ylabel 'y (m)'\nset cbrange [-3:3]\nset cblabel 'z (m)'\n"
       << "set title '" << name << ": top-down, by height'\n"
       << "plot " << d << " using 1:2:3 with dots palette\n"
       << "set size noratio\nset xrange [-180:180]\nset yrange [-26:4]\n"
       << "set xlabel 'azimuth (deg)'\nset ylabel 'elevation (deg)'\nset cbrange [0:60]\n"
       << "set cblabel 'range (m)'\nset title '" << name << ": sensor view, by range'\n"
       << "plot " << d << " using 4:5:6 with dots palette\n"
       << "set cbrange [0:1]\nset cblabel 'intensity'\n"
       << "set title '" << name << ": sensor view, by intensity'\n"
       << "plot " << d << " using 4:5:7 with dots palette\n";
  }
  gp << "unset multiplot\n";
  DV_RETURN_IF_ERROR(WriteFileAtomic(base + ".gp", gp.str()));
  std::vector<std::string> notes;
  const Status s = RunGnuplot(base + ".gp", png, &notes);
  std::filesystem::remove(base + ".dat");
  std::filesystem::remove(base + ".gp");
  return s;
}

std::optional<double> RatioAtCd(std::vector<std::pair<double, double>> curve, double cd_m) {
  std::optional<double> exact;
  for (const auto& [c, r] : curve) {
    if (c == cd_m) exact = std::max(exact.value_or(r), r);
  }
  if (exact) return exact;
  std::sort(curve.begin(), curve.end());
  for (size_t i = 0; i + 1 < curve.size(); ++i) {
    const auto [c0, r0] = curve[i];
    const auto [c1, r1] = curve[i + 1];
    if (!(c0 < cd_m && cd_m < c1)) continue;
    if (r0 <= 0 || r1 <= 0) return std::nullopt;
    const double t = (cd_m - c0) / (c1 - c0);
    return std::exp(std::log(r0) + t * (std::log(r1) - std::log(r0)));
  }
  return std::nullopt;
}

ResultsByWorkload Group(const std::vector<SettingResult>& results) {
  ResultsByWorkload out;
  for (const auto& s : results) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == s.workload; });
    if (it == out.end()) {
      out.push_back({s.workload, {s}});
    } else {
      it->second.push_back(s);
    }
  }
  return out;
}

std::string MarkdownTables(const std::vector<SettingResult>& results) {
  std::ostringstream o;
  for (const auto& [w, settings] : Group(results)) {
    const SettingResult& first = settings.front();
    o << "### " << w << ": " << first.frames << " coded frames, " << first.original_points
      << " points (" << first.non_finite_points << " non-finite removed)\n\n";
    o << "| codec | setting | geometry ratio | xyz+i ratio | CD m | P→Q mean / p99 / max m | "
         "Q→P mean / p99 / max m | Hausdorff m | decoded / original | fallback | encode ms "
         "med / p95 | decode ms med / p95 | map bytes | peak RSS MB |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& s : settings) {
      o << "| " << s.codec << " | " << Knob(s) << " | " << R(s.ratio_geometry) << " | "
        << R(s.ratio_intensity) << " | " << Fmt("%.4f", s.cd_m) << " | " << Triple(s.p_to_q)
        << " | " << Triple(s.q_to_p) << " | " << M(s.hausdorff_m) << " | " << s.decoded_points
        << " / " << s.original_points << " | " << s.fallback_frames << "/" << s.frames << " | "
        << Fmt("%.1f", s.encode_ms.median) << " / " << Fmt("%.1f", s.encode_ms.p95) << " | "
        << Fmt("%.1f", s.decode_ms.median) << " / " << Fmt("%.1f", s.decode_ms.p95) << " | "
        << s.map_bytes << " | " << Fmt("%.0f", double(s.peak_rss_kb) / 1024.0) << " |\n";
    }
    if (first.has_labels) {
      o << "\nDynamic (SemanticKITTI moving classes; simulated days: class dynamic) vs static "
           "original points, nn to the "
           "reconstruction (P→Q):\n\n"
        << "| codec | setting | dynamic points | dynamic mean / p99 / max m | static mean / p99 "
           "/ max m |\n|---|---|---|---|---|\n";
      for (const auto& s : settings) {
        o << "| " << s.codec << " | " << Knob(s) << " | " << s.dynamic_p_to_q.points << " | "
          << (s.dynamic_p_to_q.points ? Triple(s.dynamic_p_to_q) : "n/a") << " | "
          << Triple(s.static_p_to_q) << " |\n";
      }
    }
    o << "\nBytes per frame by section (geometry-only run):\n\n| codec | setting | sections |\n"
         "|---|---|---|\n";
    for (const auto& s : settings) {
      std::string secs;
      for (const auto& [name, bytes] : s.sections) {
        secs += (secs.empty() ? "" : ", ") + name + " " +
                Fmt("%.0f", double(bytes) / double(std::max<size_t>(1, s.frames)));
      }
      o << "| " << s.codec << " | " << Knob(s) << " | " << secs << " |\n";
    }
    o << "\nRatio at equal error (geometry-only, interpolated on each codec's curve; n/a: "
         "outside its swept CD range):\n\n| codec | at CD 0.05 m | at 0.10 m | at 0.15 m | "
         "worst one-way error m (sweep) | encode ms median (sweep) |\n|---|---|---|---|---|---|\n";
    for (const auto& name : Codecs(settings)) {
      const auto curve = Curve(settings, name);
      double hmin = INFINITY, hmax = 0, emin = INFINITY, emax = 0;
      for (const auto& s : settings) {
        if (s.codec != name) continue;
        hmin = std::min(hmin, s.hausdorff_m);
        hmax = std::max(hmax, s.hausdorff_m);
        emin = std::min(emin, s.encode_ms.median);
        emax = std::max(emax, s.encode_ms.median);
      }
      o << "| " << name;
      for (double cd : kEqualErrorCdM) o << " | " << Opt(RatioAtCd(curve, cd));
      o << " | " << M(hmin) << "–" << M(hmax) << " | " << Fmt("%.1f", emin) << "–"
        << Fmt("%.1f", emax) << " |\n";
    }
    o << "\n" << TargetsTable(settings);
  }
  return o.str();
}

nlohmann::json ResultsJson(const std::vector<SettingResult>& results) {
  nlohmann::json settings = nlohmann::json::array();
  for (const auto& s : results) {
    nlohmann::json j = {{"workload", s.workload},
                        {"codec", s.codec},
                        {"knob_name", s.knob_name},
                        {"knob", s.knob},
                        {"frames", s.frames},
                        {"fallback_frames", s.fallback_frames},
                        {"original_points", s.original_points},
                        {"decoded_points", s.decoded_points},
                        {"non_finite_points", s.non_finite_points},
                        {"bytes_geometry", s.bytes_geometry},
                        {"bytes_intensity", s.bytes_intensity},
                        {"map_bytes", s.map_bytes},
                        {"ratio_geometry", s.ratio_geometry},
                        {"ratio_intensity", s.ratio_intensity},
                        {"cd_m", s.cd_m},
                        {"p_to_q", OneWayJson(s.p_to_q)},
                        {"q_to_p", OneWayJson(s.q_to_p)},
                        {"hausdorff_m", std::isfinite(s.hausdorff_m) ? nlohmann::json(s.hausdorff_m)
                                                                     : nlohmann::json()},
                        {"encode_ms", {{"median", s.encode_ms.median}, {"p95", s.encode_ms.p95}}},
                        {"decode_ms", {{"median", s.decode_ms.median}, {"p95", s.decode_ms.p95}}},
                        {"peak_rss_kb", s.peak_rss_kb}};
    nlohmann::json sections = nlohmann::json::object();
    for (const auto& [name, bytes] : s.sections) sections[name] = bytes;
    j["section_bytes"] = sections;
    if (s.has_labels) {
      j["dynamic_p_to_q"] = OneWayJson(s.dynamic_p_to_q);
      j["static_p_to_q"] = OneWayJson(s.static_p_to_q);
    }
    nlohmann::json frames = nlohmann::json::array();
    for (const auto& f : s.per_frame) {
      frames.push_back({{"name", f.name},
                        {"original_points", f.original_points},
                        {"decoded_points", f.decoded_points},
                        {"bytes_geometry", f.bytes_geometry},
                        {"bytes_intensity", f.bytes_intensity},
                        {"fallback", f.fallback},
                        {"cd_m", f.error.chamfer_m()},
                        {"hausdorff_m", f.error.hausdorff_m()},
                        {"encode_ms", f.encode_ms},
                        {"decode_ms", f.decode_ms}});
    }
    j["per_frame"] = frames;
    settings.push_back(j);
  }
  nlohmann::json equal = nlohmann::json::array();
  for (const auto& [w, ss] : Group(results)) {
    for (const auto& name : Codecs(ss)) {
      nlohmann::json e = {{"workload", w}, {"codec", name}};
      for (double cd : kEqualErrorCdM) {
        const auto r = RatioAtCd(Curve(ss, name), cd);
        e["ratio_at_cd_" + Fmt("%.2f", cd)] = r ? nlohmann::json(*r) : nlohmann::json();
      }
      equal.push_back(e);
    }
  }
  return {{"settings", settings}, {"equal_error", equal}};
}

Status WriteOutputs(const std::vector<SettingResult>& results,
                    const std::map<std::string, PictureSample>& pictures,
                    const std::string& out_dir, std::vector<std::string>* notes) {
  DV_RETURN_IF_ERROR(MakeDirs(out_dir));
  std::ostringstream settings, frames, equal;
  settings << "workload,codec,knob_name,knob,frames,fallback_frames,original_points,"
              "decoded_points,non_finite_points,bytes_geometry,bytes_intensity,map_bytes,"
              "ratio_geometry,ratio_intensity,cd_m,pq_mean_m,pq_p99_m,pq_max_m,qp_mean_m,"
              "qp_p99_m,qp_max_m,hausdorff_m,dyn_points,dyn_mean_m,dyn_p99_m,dyn_max_m,"
              "static_mean_m,static_p99_m,static_max_m,encode_ms_median,encode_ms_p95,"
              "decode_ms_median,decode_ms_p95,peak_rss_kb,sections\n";
  frames << "workload,codec,knob,frame,original_points,decoded_points,non_finite,bytes_geometry,"
            "bytes_intensity,fallback,cd_m,pq_max_m,qp_max_m,hausdorff_m,encode_ms,decode_ms\n";
  for (const auto& s : results) {
    std::string secs;
    for (const auto& [name, bytes] : s.sections) {
      secs += (secs.empty() ? "" : ";") + name + "=" + std::to_string(bytes);
    }
    settings << s.workload << "," << s.codec << "," << s.knob_name << "," << s.knob << ","
             << s.frames << "," << s.fallback_frames << "," << s.original_points << ","
             << s.decoded_points << "," << s.non_finite_points << "," << s.bytes_geometry << ","
             << s.bytes_intensity << "," << s.map_bytes << "," << s.ratio_geometry << ","
             << s.ratio_intensity << "," << s.cd_m << "," << s.p_to_q.mean_m << ","
             << s.p_to_q.p99_m << "," << s.p_to_q.max_m << "," << s.q_to_p.mean_m << ","
             << s.q_to_p.p99_m << "," << s.q_to_p.max_m << "," << s.hausdorff_m << ","
             << s.dynamic_p_to_q.points << "," << s.dynamic_p_to_q.mean_m << ","
             << s.dynamic_p_to_q.p99_m << "," << s.dynamic_p_to_q.max_m << ","
             << s.static_p_to_q.mean_m << "," << s.static_p_to_q.p99_m << ","
             << s.static_p_to_q.max_m << "," << s.encode_ms.median << "," << s.encode_ms.p95 << ","
             << s.decode_ms.median << "," << s.decode_ms.p95 << "," << s.peak_rss_kb << "," << secs
             << "\n";
    for (const auto& f : s.per_frame) {
      frames << s.workload << "," << s.codec << "," << s.knob << "," << f.name << ","
             << f.original_points << "," << f.decoded_points << "," << f.non_finite << ","
             << f.bytes_geometry << "," << f.bytes_intensity << "," << (f.fallback ? 1 : 0) << ","
             << f.error.chamfer_m() << "," << f.error.p_to_q.max_m << "," << f.error.q_to_p.max_m
             << "," << f.error.hausdorff_m() << "," << f.encode_ms << "," << f.decode_ms << "\n";
    }
  }
  equal << "workload,codec,ratio_at_cd_0.05,ratio_at_cd_0.10,ratio_at_cd_0.15\n";
  for (const auto& [w, ss] : Group(results)) {
    for (const auto& name : Codecs(ss)) {
      equal << w << "," << name;
      for (double cd : kEqualErrorCdM) equal << "," << Opt(RatioAtCd(Curve(ss, name), cd));
      equal << "\n";
    }
  }
  DV_RETURN_IF_ERROR(WriteText(out_dir + "/settings.csv", settings.str(), notes));
  DV_RETURN_IF_ERROR(WriteText(out_dir + "/frames.csv", frames.str(), notes));
  DV_RETURN_IF_ERROR(WriteText(out_dir + "/equal_error.csv", equal.str(), notes));
  DV_RETURN_IF_ERROR(WriteText(out_dir + "/results.json", ResultsJson(results).dump(1), notes));
  DV_RETURN_IF_ERROR(WriteText(out_dir + "/tables.md", MarkdownTables(results), notes));
  if (!HaveGnuplot()) {
    notes->push_back("gnuplot not found: no PNG plots (tables and CSV written)");
    return Status::Ok();
  }
  for (const auto& [w, settings_w] : Group(results)) {
    DV_RETURN_IF_ERROR(PlotRd(w, settings_w, out_dir, notes));
    DV_RETURN_IF_ERROR(PlotSections(w, settings_w, out_dir, notes));
    auto pic = pictures.find(w);
    if (pic != pictures.end()) DV_RETURN_IF_ERROR(PlotTopDown(w, pic->second, out_dir, notes));
  }
  return Status::Ok();
}

}  // namespace dv::bench
