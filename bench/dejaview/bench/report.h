// What the bench prints and writes: markdown tables (stdout), CSV and JSON (--out DIR), and
// gnuplot PNGs (rate-distortion, bytes per section, a top-down picture of one frame).
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dejaview/bench/runner.h"

namespace dv::bench {

// Ratios at equal error are read off the rate-distortion curve at these CDs (BENCHMARK.md).
constexpr std::array<double, 3> kEqualErrorCdM = {0.05, 0.10, 0.15};

// curve: (CD m, ratio) of one codec's settings, any order. log(ratio) is linear in CD between the
// two points of the curve (sorted by CD) that bracket cd_m; nullopt outside the swept CD range.
std::optional<double> RatioAtCd(std::vector<std::pair<double, double>> curve, double cd_m);

// Settings grouped by workload then codec, in the order they were run.
using ResultsByWorkload = std::vector<std::pair<std::string, std::vector<SettingResult>>>;
ResultsByWorkload Group(const std::vector<SettingResult>& results);

std::string MarkdownTables(const std::vector<SettingResult>& results);
nlohmann::json ResultsJson(const std::vector<SettingResult>& results);

// Writes settings.csv, frames.csv, equal_error.csv, results.json, tables.md and, when gnuplot is
// on the PATH, rd_<w>.png, sections_<w>.png and topdown_<w>.png into out_dir. pictures maps a
// workload name to its sample frame. *notes gets one line per file written or skipped.
Status WriteOutputs(const std::vector<SettingResult>& results,
                    const std::map<std::string, PictureSample>& pictures,
                    const std::string& out_dir, std::vector<std::string>* notes);

// One row per frame, three panels each (top-down by height; azimuth x elevation by range and by
// intensity), every row on the same axes and colour scales; drawn by gnuplot into png.
struct RenderedFrame {
  std::string title;
  const PointCloud* cloud;
};
Status RenderFramesPng(const std::vector<RenderedFrame>& frames, const std::string& png);

}  // namespace dv::bench
