// dejaview bench: ratio, error and speed of dejaview and its peers under one protocol, measured
// as BENCHMARK.md defines them (with the commands and the current tables).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/bench/report.h"

namespace dv::cli {
namespace {

constexpr const char* kHelp =
    "usage: dejaview bench revisit DRIVE... [options]   map from frames i % stride == 0, the\n"
    "                                                   others coded (pseudo-revisit)\n"
    "       dejaview bench quick DRIVE --codec NAME [--knob K] [options]\n"
    "                                                   one codec, one setting, one drive\n"
    "       dejaview bench multiday DAYS_DIR [--map-days K] [--age] [options]\n"
    "                                                   map from the first K day_NN folders, the "
    "next coded\n"
    "                                                   (--age: every later day too)\n"
    "       dejaview bench passes PASSES_DIR [--map-passes K] [options]\n"
    "                                                   recorded passes of one place (its folders\n"
    "                                                   holding velodyne/, in name order): map "
    "from\n"
    "                                                   the first K (default all but the last), "
    "the\n"
    "                                                   next coded\n"
    "options:\n"
    "  --codecs A,B,...    codecs to run (default: every built-in codec, listed below)\n"
    "  --knobs K1,K2,...   sweep for a single codec (default: the codec's own sweep)\n"
    "  --stride S          pseudo-revisit split (default 2: even frames map, odd frames coded)\n"
    "  --frames N          code at most N frames per drive (default: all)\n"
    "  --noise-xy M --noise-z M --noise-yaw-deg D --seed S\n"
    "                      pose prior noise (default 0.15 m, 0.05 m, 0.5 deg, seed 1)\n"
    "  --out DIR           write CSV, JSON, tables.md and PNG plots into DIR\n"
    "  --json              print JSON instead of markdown tables\n"
    "  --threads 1         encode/decode are timed single-thread; only 1 is accepted\n";

void PrintHelp() {
  std::fputs(kHelp, stdout);
  std::string names;
  for (const auto& n : bench::AvailableCodecs()) names += " " + n;
  std::printf("built-in codecs:%s\n", names.c_str());
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

StatusOr<std::vector<double>> ParseKnobs(const std::string& s) {
  std::vector<double> out;
  for (const auto& item : SplitList(s)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0' || !std::isfinite(v)) {
      return Status::InvalidArgument("--knobs: '" + item + "' is not a number");
    }
    out.push_back(v);
  }
  if (out.empty()) return Status::InvalidArgument("--knobs: empty list");
  return out;
}

struct Plan {
  std::vector<bench::Workload> workloads;
  std::vector<std::unique_ptr<bench::Codec>> codecs;
  std::vector<std::vector<double>> knobs;  // per codec
};

StatusOr<bench::PoseNoise> ParseNoise(const Args& a) {
  bench::PoseNoise n;
  DV_ASSIGN_OR_RETURN(n.sigma_xy_m, a.GetDouble("noise-xy", n.sigma_xy_m));
  DV_ASSIGN_OR_RETURN(n.sigma_z_m, a.GetDouble("noise-z", n.sigma_z_m));
  DV_ASSIGN_OR_RETURN(n.sigma_yaw_deg, a.GetDouble("noise-yaw-deg", n.sigma_yaw_deg));
  DV_ASSIGN_OR_RETURN(long seed, a.GetInt("seed", n.seed));
  if (n.sigma_xy_m < 0 || n.sigma_z_m < 0 || n.sigma_yaw_deg < 0) {
    return Status::InvalidArgument("pose noise sigmas must be >= 0");
  }
  n.seed = uint32_t(seed);
  return n;
}

StatusOr<Plan> MakePlan(const std::string& mode, const Args& a) {
  Plan plan;
  DV_ASSIGN_OR_RETURN(long threads, a.GetInt("threads", 1));
  if (threads != 1) {
    return Status::InvalidArgument(
        "--threads: encode and decode are timed on one thread (BENCHMARK.md); only 1 is "
        "accepted");
  }
  DV_ASSIGN_OR_RETURN(long frames, a.GetInt("frames", 0));
  DV_ASSIGN_OR_RETURN(long stride, a.GetInt("stride", 2));
  DV_ASSIGN_OR_RETURN(long map_days, a.GetInt("map-days", 0));
  if (frames < 0) return Status::InvalidArgument("--frames must be >= 0");
  DV_ASSIGN_OR_RETURN(bench::PoseNoise noise, ParseNoise(a));
  const auto& pos = a.positional();
  if (pos.empty()) return Status::InvalidArgument("missing DRIVE");

  std::vector<std::string> names = bench::AvailableCodecs();
  if (mode == "quick") {
    if (pos.size() != 1) return Status::InvalidArgument("quick takes one DRIVE");
    if (!a.Has("codec")) return Status::InvalidArgument("quick needs --codec NAME");
    names = {a.Get("codec")};
  } else if (a.Has("codecs")) {
    names = SplitList(a.Get("codecs"));
  }
  if (mode == "passes") {
    if (pos.size() != 1) return Status::InvalidArgument("passes takes one PASSES_DIR");
    DV_ASSIGN_OR_RETURN(long map_passes, a.GetInt("map-passes", 0));
    DV_ASSIGN_OR_RETURN(auto w, bench::Passes(pos[0], int(map_passes), size_t(frames), noise));
    plan.workloads.push_back(std::move(w));
  } else if (mode == "multiday") {
    if (pos.size() != 1) return Status::InvalidArgument("multiday takes one DAYS_DIR");
    DV_ASSIGN_OR_RETURN(const int days, bench::CountDays(pos[0]));
    const int k = map_days == 0 ? days - 1 : int(map_days);
    // --age: the same map (days 1..k) against every later day, oldest map last.
    const int last = a.Has("age") ? days : k + 1;
    for (int coded = k + 1; coded <= std::max(last, k + 1); ++coded) {
      DV_ASSIGN_OR_RETURN(auto w,
                          bench::MultiDay(pos[0], int(map_days), coded, size_t(frames), noise));
      plan.workloads.push_back(std::move(w));
    }
  } else {
    for (const auto& d : pos) {
      DV_ASSIGN_OR_RETURN(auto w, bench::PseudoRevisit(d, int(stride), size_t(frames), noise));
      plan.workloads.push_back(std::move(w));
    }
  }
  const std::string knob_key = mode == "quick" ? "knob" : "knobs";
  if (a.Has(knob_key) && names.size() != 1) {
    return Status::InvalidArgument("--knobs needs exactly one codec in --codecs");
  }
  for (const auto& n : names) {
    DV_ASSIGN_OR_RETURN(auto codec, bench::MakeCodec(n));
    std::vector<double> knobs = codec->DefaultKnobs();
    if (a.Has(knob_key)) {
      DV_ASSIGN_OR_RETURN(knobs, ParseKnobs(a.Get(knob_key)));
    } else if (mode == "quick") {
      knobs = {knobs[knobs.size() / 2]};
    }
    plan.codecs.push_back(std::move(codec));
    plan.knobs.push_back(knobs);
  }
  return plan;
}

// The codec whose settings give the top-down picture: dejaview when it runs (explained vs
// residual), else the first lossy peer (points coloured by their error).
size_t PictureCodec(const Plan& plan) {
  for (size_t i = 0; i < plan.codecs.size(); ++i) {
    if (plan.codecs[i]->name() == "dejaview") return i;
  }
  for (size_t i = 0; i < plan.codecs.size(); ++i) {
    const std::string n = plan.codecs[i]->name();
    if (n != "zstd" && n != "lz4") return i;
  }
  return 0;
}

}  // namespace

int RunBench(int argc, char** argv) {
  const std::string mode = argc > 0 ? argv[0] : "";
  if (mode != "revisit" && mode != "quick" && mode != "multiday" && mode != "passes") {
    PrintHelp();
    return mode == "--help" || mode == "-h" ? kOk : kUsage;
  }
  auto parsed = Args::Parse(argc - 1, argv + 1,
                            {"codecs", "codec", "knobs", "knob", "stride", "frames", "noise-xy",
                             "noise-z", "noise-yaw-deg", "seed", "out", "threads", "map-days"},
                            {"json", "help", "age"});
  if (!parsed.ok()) return Fail("bench", parsed.status());
  if (parsed->Has("help")) {
    PrintHelp();
    return kOk;
  }
  const auto start = std::chrono::steady_clock::now();
  auto plan = MakePlan(mode, *parsed);
  if (!plan.ok()) return Fail("bench", plan.status());

  const std::string out_dir = parsed->Get("out");
  const std::string scratch =
      (std::filesystem::temp_directory_path() / ("dejaview-bench-" + std::to_string(getpid())))
          .string();
  std::vector<bench::SettingResult> results;
  std::map<std::string, bench::PictureSample> pictures;
  const size_t picture_codec = PictureCodec(*plan);
  for (const auto& w : plan->workloads) {
    bench::PictureSample best;
    double best_cd = INFINITY;
    for (size_t c = 0; c < plan->codecs.size(); ++c) {
      bench::Codec& codec = *plan->codecs[c];
      for (double knob : plan->knobs[c]) {
        std::ostringstream tag;
        tag << "[bench] " << w.name << " " << codec.name() << " " << codec.knob_name() << "="
            << knob << ": ";
        bench::RunOptions options;
        options.scratch_dir = scratch;
        options.progress = [&](const std::string& s) {
          std::fprintf(stderr, "%s%s\n", tag.str().c_str(), s.c_str());
        };
        options.keep_picture = c == picture_codec;
        bench::PictureSample pic;
        auto r = bench::RunSetting(codec, knob, w, options, &pic);
        if (!r.ok()) {
          std::error_code ec;
          std::filesystem::remove_all(scratch, ec);
          return Fail("bench", r.status().WithContext(tag.str().substr(8)));
        }
        if (options.keep_picture && r->cd_m > 0 &&
            std::fabs(r->cd_m - 0.1) < std::fabs(best_cd - 0.1)) {
          best_cd = r->cd_m;
          best = std::move(pic);
        }
        results.push_back(std::move(r).value());
      }
    }
    if (std::isfinite(best_cd)) pictures[w.name] = std::move(best);
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);

  if (parsed->Has("json")) {
    std::printf("%s\n", bench::ResultsJson(results).dump(1).c_str());
  } else {
    std::printf("%s", bench::MarkdownTables(results).c_str());
  }
  if (!out_dir.empty()) {
    std::vector<std::string> notes;
    const Status s = bench::WriteOutputs(results, pictures, out_dir, &notes);
    for (const auto& n : notes) std::fprintf(stderr, "[bench] %s\n", n.c_str());
    if (!s.ok()) return Fail("bench", s);
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "[bench] done: %zu settings in %.1f s\n", results.size(), wall_s);
  return kOk;
}

}  // namespace dv::cli
