// dejaview query: the forensic look-up over the server's frame index ("every scan within 50 m of
// this crossing last Tuesday"), optionally exporting the matching frames as a drive folder.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/server/export.h"
#include "dejaview/transport/spool.h"
#include "frame_query_args.h"

namespace dv::cli {
namespace {

// The export without maps: one file per frame in DIR/deltas (the stored payload, what
// `dejaview decode` reads), with poses.txt / timestamps.txt in KITTI order and frames.txt.
Status ExportDeltas(store::Store* store, const std::vector<store::FrameRecord>& rows,
                    const std::string& out) {
  DV_RETURN_IF_ERROR(MakeDirs(out + "/deltas"));
  std::vector<store::ObjectId> ids;
  for (const auto& r : rows) ids.push_back(r.object);
  auto reader = store->Read(std::move(ids));
  std::vector<Pose> poses;
  std::vector<int64_t> times;
  std::string list;
  for (size_t i = 0; i < rows.size(); ++i) {
    DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> object, reader->Next());
    DV_ASSIGN_OR_RETURN(transport::SpoolRecord rec,
                        transport::DecodeRecord(object.data(), object.size()));
    char name[24];
    std::snprintf(name, sizeof(name), "%06zu", i);
    DV_RETURN_IF_ERROR(WriteFileAtomic(out + "/deltas/" + name + ".dvd", rec.payload));
    poses.push_back(rec.meta.T_map_sensor);
    times.push_back(rec.meta.timestamp_ns);
    list += std::string(name) + " " + rec.meta.vehicle + " " + std::to_string(rec.meta.sensor_id) +
            " " + std::to_string(rec.meta.sequence) + " " + rec.meta.drive + " " +
            rec.meta.map_version + "\n";
  }
  DV_RETURN_IF_ERROR(WriteKittiPoses(out + "/poses.txt", poses));
  DV_RETURN_IF_ERROR(WriteTimestampsNs(out + "/timestamps.txt", times));
  return WriteFileAtomic(out + "/frames.txt", list);
}

// One object per frame, every index field at full precision (the table rounds positions and
// shortens map versions): what a script or the Python package reads.
nlohmann::json FramesJson(const std::vector<store::FrameRecord>& rows) {
  nlohmann::json frames = nlohmann::json::array();
  for (const store::FrameRecord& r : rows) {
    const Eigen::Matrix<double, 3, 4> m = r.T_map_sensor.matrix().topRows<3>();
    nlohmann::json pose = nlohmann::json::array();
    for (int row = 0; row < 3; ++row) {
      for (int c = 0; c < 4; ++c) pose.push_back(m(row, c));
    }
    frames.push_back({{"vehicle", r.vehicle},
                      {"sensor_id", r.sensor_id},
                      {"source_epoch", r.source_epoch},
                      {"sequence", r.sequence},
                      {"drive", r.drive},
                      {"timestamp_ns", r.timestamp_ns},
                      {"T_map_sensor", pose},
                      {"map_version", r.map_version},
                      {"bytes", r.bytes},
                      {"object", r.object.Hex()}});
  }
  return {{"count", rows.size()}, {"frames", frames}};
}

void PrintTable(const std::vector<store::FrameRecord>& rows) {
  std::printf("%-12s %6s %10s %-16s %20s %10s %10s %8s %-12s %8s\n", "vehicle", "sensor",
              "sequence", "drive", "timestamp_ns", "x", "y", "z", "map", "bytes");
  for (const store::FrameRecord& r : rows) {
    const Eigen::Vector3d t = r.T_map_sensor.translation();
    std::printf("%-12s %6u %10llu %-16s %20lld %10.2f %10.2f %8.2f %-12s %8llu\n",
                r.vehicle.c_str(), r.sensor_id, static_cast<unsigned long long>(r.sequence),
                r.drive.c_str(), static_cast<long long>(r.timestamp_ns), t.x(), t.y(), t.z(),
                r.map_version.substr(0, 12).c_str(), static_cast<unsigned long long>(r.bytes));
  }
  std::printf("%zu frames\n", rows.size());
}

}  // namespace

int RunQuery(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, FrameQueryKeys({"export", "maps"}), {"help", "json"});
  if (!args.ok()) return Fail("query", args.status());
  if (args->Has("help") || !(args->Has("db") || args->Has("store"))) {
    std::printf(
        "usage: dejaview query --db INDEX|--store STORE [options] [--json] [--export DIR [--maps "
        "MAPS]]\n"
        "%s"
        "  --maps MAPS: decode into DIR/velodyne with MAPS/<version>/; without: the stored "
        "deltas\n"
        "  --json: the frames as one JSON object {count, frames: [{vehicle, sensor_id, "
        "source_epoch,\n"
        "    sequence, drive, timestamp_ns, T_map_sensor (3x4 row-major), map_version, bytes, "
        "object}]}\n",
        kFrameQueryUsage);
    return args->Has("help") ? kOk : kUsage;
  }
  auto q = ParseFrameQuery(*args);
  if (!q.ok()) return Fail("query", q.status());
  auto storage = OpenQueryStorage(*args);
  if (!storage.ok()) return Fail("query", storage.status());
  auto rows = storage->index->Query(*q);
  if (!rows.ok()) return Fail("query", rows.status());
  // With --json, stdout holds the JSON document alone; what the export reports goes to stderr.
  const bool json = args->Has("json");
  if (json) {
    std::printf(
        "%s\n",
        FramesJson(*rows).dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    PrintTable(*rows);
  }
  FILE* report = json ? stderr : stdout;
  if (!args->Has("export")) return kOk;
  if (!args->Has("maps")) {
    const Status s = ExportDeltas(storage->store.get(), *rows, args->Get("export"));
    if (!s.ok()) return Fail("query", s);
    std::fprintf(report, "exported %zu frames to %s\n", rows->size(), args->Get("export").c_str());
    return kOk;
  }
  server::MapVersions maps(args->Get("maps"));
  auto st = server::ExportFrames(storage->store.get(), *rows, &maps, {}, args->Get("export"));
  if (!st.ok()) return Fail("query", st.status());
  std::fprintf(report, "exported %zu frames to %s\n", st->frames, args->Get("export").c_str());
  ReportSkipped(*st);
  return kOk;
}

}  // namespace dv::cli
