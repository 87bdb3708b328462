// dejaview inspect: the header and sections of a delta file, without decoding it.
#include <Eigen/Geometry>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "codec_io.h"
#include "commands.h"
#include "dejaview/base/file_util.h"
#include "dejaview/codec/codec.h"

namespace dv::cli {

int RunInspect(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {}, {"json", "help"});
  if (!args.ok()) return Fail("inspect", args.status());
  if (args->Has("help") || args->positional().size() != 1) {
    std::printf(
        "usage: dejaview inspect DELTA.dvd [--json]\n"
        "  a delta file's header (docs/delta-format.md): sequence, time, sensor, pose, map\n"
        "  version, tolerance, intra or delta, and every section's size; nothing is decoded\n"
        "  --json      the same as one JSON object\n"
        "  -h, --help  this text\n");
    return args->Has("help") ? kOk : kUsage;
  }
  const std::string path = args->positional()[0];
  auto bytes = ReadFileBytes(path, uint64_t(1) << 28);
  if (!bytes.ok()) return Fail("inspect", bytes.status());
  auto h = codec::DecodeHeader(bytes->data(), bytes->size());
  if (!h.ok()) return Fail("inspect", h.status().WithContext(path));
  const Eigen::Vector3d t = h->T_map_sensor.translation();
  const Eigen::Vector3d ypr = h->T_map_sensor.linear().eulerAngles(2, 1, 0) * 180 / M_PI;
  if (args->Has("json")) {
    nlohmann::json sections = nlohmann::json::object();
    for (const auto& [name, n] : h->section_bytes) sections[name] = n;
    nlohmann::json j = {{"file", path},
                        {"bytes", bytes->size()},
                        {"mode", h->intra ? "intra" : "delta"},
                        {"sequence", h->info.sequence},
                        {"timestamp_ns", h->info.timestamp_ns},
                        {"sensor_id", h->info.sensor_id},
                        {"tolerance_m", h->tolerance_m},
                        {"residual_precision_m", h->residual_precision_m},
                        {"intensity", h->intensity},
                        {"map_version", h->map_version},
                        {"translation_m", {t.x(), t.y(), t.z()}},
                        {"sections", sections}};
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  std::printf("file:        %s (%zu bytes)\n", path.c_str(), bytes->size());
  std::printf("mode:        %s\n", h->intra ? "intra (no map)" : "delta");
  std::printf("map version: %s\n", h->intra ? "-" : h->map_version.c_str());
  std::printf("sequence:    %llu  timestamp %lld ns  sensor %u\n",
              (unsigned long long)h->info.sequence, (long long)h->info.timestamp_ns,
              h->info.sensor_id);
  std::printf("bound:       Hausdorff <= %.6f m (residual points <= %.6f m), intensity %s\n",
              h->tolerance_m, h->residual_precision_m, h->intensity ? "coded" : "not coded");
  std::printf("pose:        t = [%.4f, %.4f, %.4f] m, yaw/pitch/roll = [%.4f, %.4f, %.4f] deg\n",
              t.x(), t.y(), t.z(), ypr[0], ypr[1], ypr[2]);
  std::printf("sections:\n");
  for (const auto& [name, n] : h->section_bytes)
    std::printf("  %-20s %8zu bytes\n", name.c_str(), n);
  return kOk;
}

}  // namespace dv::cli
