// dejaview query: the forensic look-up over the server's frame index ("every scan within 50 m of
// this crossing last Tuesday"), optionally exporting the matching frames as a drive folder.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "args.h"
#include "commands.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/server/delta_store.h"
#include "dejaview/server/frame_index.h"

namespace dv::cli {
namespace {

// A time is seconds since the Unix epoch ("1733130000.5") or UTC ISO 8601
// ("2026-12-01T10:00:00Z", the Z optional).
StatusOr<int64_t> ParseTimeNs(const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && std::isfinite(s))
    return int64_t(std::llround(s * 1e9));
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest || (*rest != '\0' && std::string(rest) != "Z")) {
    return Status::InvalidArgument("--" + key + ": '" + text +
                                   "' is neither epoch seconds nor YYYY-MM-DDTHH:MM:SS[Z]");
  }
  return int64_t(timegm(&tm)) * 1'000'000'000;
}

StatusOr<Eigen::Vector3d> ParsePoint(const std::string& text) {
  Eigen::Vector3d p;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lf,%lf,%lf%c", &p.x(), &p.y(), &p.z(), &tail) != 3 ||
      !p.allFinite()) {
    return Status::InvalidArgument("--near: '" + text + "' is not x,y,z");
  }
  return p;
}

// The export: one file per frame in DIR/deltas (the stored payload, what `dejaview decode`
// reads), with poses.txt / timestamps.txt in KITTI order and frames.txt naming each frame.
Status Export(const std::string& store_root, const std::vector<server::FrameRow>& rows,
              const std::string& out) {
  DV_ASSIGN_OR_RETURN(auto store, server::DeltaStore::Open(store_root));
  DV_RETURN_IF_ERROR(MakeDirs(out + "/deltas"));
  std::vector<Pose> poses;
  std::vector<double> times;
  std::string list;
  for (size_t i = 0; i < rows.size(); ++i) {
    DV_ASSIGN_OR_RETURN(transport::SpoolRecord rec, store->ReadAt(rows[i].file, rows[i].offset));
    char name[24];
    std::snprintf(name, sizeof(name), "%06zu", i);
    DV_RETURN_IF_ERROR(WriteFileAtomic(out + "/deltas/" + name + ".dvd", rec.payload));
    poses.push_back(rec.meta.T_map_sensor);
    times.push_back(double(rec.meta.timestamp_ns) * 1e-9);
    list += std::string(name) + " " + rec.meta.vehicle + " " + std::to_string(rec.meta.sensor_id) +
            " " + std::to_string(rec.meta.sequence) + " " + rec.meta.drive + " " +
            rec.meta.map_version + "\n";
  }
  DV_RETURN_IF_ERROR(WriteKittiPoses(out + "/poses.txt", poses));
  DV_RETURN_IF_ERROR(WriteTimestamps(out + "/timestamps.txt", times));
  return WriteFileAtomic(out + "/frames.txt", list);
}

}  // namespace

int RunQuery(int argc, char** argv) {
  auto args = Args::Parse(
      argc, argv, {"db", "store", "vehicle", "from", "to", "near", "radius", "export", "limit"},
      {"help"});
  if (!args.ok()) return Fail("query", args.status());
  if (args->Has("help") || !args->Has("db")) {
    std::printf(
        "usage: dejaview query --db INDEX [--vehicle V] [--from T] [--to T]\n"
        "                      [--near x,y,z --radius R] [--export DIR [--store STORE]]\n"
        "  T: epoch seconds or YYYY-MM-DDTHH:MM:SS[Z] (UTC); STORE defaults to INDEX's folder\n");
    return args->Has("help") ? kOk : kUsage;
  }
  server::FrameQuery q;
  q.vehicle = args->Get("vehicle");
  for (const char* key : {"from", "to"}) {
    if (!args->Has(key)) continue;
    auto t = ParseTimeNs(key, args->Get(key));
    if (!t.ok()) return Fail("query", t.status());
    (std::string(key) == "from" ? q.from_ns : q.to_ns) = *t;
  }
  if (args->Has("near") != args->Has("radius")) {
    return Fail("query", Status::InvalidArgument("--near and --radius go together"));
  }
  if (args->Has("near")) {
    auto p = ParsePoint(args->Get("near"));
    auto r = args->GetDouble("radius", 0);
    if (!p.ok()) return Fail("query", p.status());
    if (!r.ok()) return Fail("query", r.status());
    if (!(*r >= 0)) return Fail("query", Status::InvalidArgument("--radius: must be >= 0"));
    q.near = *p;
    q.radius_m = *r;
  }
  const std::string db = args->Get("db");
  if (!std::filesystem::is_regular_file(db)) {
    return Fail("query", Status::NotFound(db + ": no such index"));
  }
  auto index = server::FrameIndex::Open(db);
  if (!index.ok()) return Fail("query", index.status());
  auto rows = (*index)->Query(q);
  if (!rows.ok()) return Fail("query", rows.status());
  std::printf("%-12s %6s %10s %-16s %20s %10s %10s %8s %-12s %8s\n", "vehicle", "sensor",
              "sequence", "drive", "timestamp_ns", "x", "y", "z", "map", "bytes");
  for (const server::FrameRow& r : *rows) {
    const Eigen::Vector3d t = r.meta.T_map_sensor.translation();
    std::printf("%-12s %6u %10llu %-16s %20lld %10.2f %10.2f %8.2f %-12s %8llu\n",
                r.meta.vehicle.c_str(), r.meta.sensor_id,
                static_cast<unsigned long long>(r.meta.sequence), r.meta.drive.c_str(),
                static_cast<long long>(r.meta.timestamp_ns), t.x(), t.y(), t.z(),
                r.meta.map_version.substr(0, 12).c_str(), static_cast<unsigned long long>(r.bytes));
  }
  std::printf("%zu frames\n", rows->size());
  if (args->Has("export")) {
    const std::string store = args->Get("store", std::filesystem::path(db).parent_path().string());
    const Status s = Export(store.empty() ? "." : store, *rows, args->Get("export"));
    if (!s.ok()) return Fail("query", s);
    std::printf("exported %zu frames to %s\n", rows->size(), args->Get("export").c_str());
  }
  return kOk;
}

}  // namespace dv::cli
