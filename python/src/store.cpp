// dejaview.Store: a server's store (its local tiers, and the S3 tier through the tiers' YAML) and
// its frame index; queries by vehicle, time and place; frames read through the store's
// multi-path reader and decoded with the map version each was coded against.
#include <pybind11/stl.h>

#include <array>
#include <filesystem>
#include <mutex>

#include "binding.h"
#include "dejaview/server/reconstruct.h"
#include "dejaview/server/storage.h"

namespace dv::py {
namespace {

// The store, its index and the map versions, shared by the Store object and every reader it made
// (a reader keeps them alive). Decoding takes turns on the one MapVersions (a decoder serves one
// thread); a job decodes in parallel in several processes, each with its own Store
// (dejaview.torch's workers).
struct OpenStore {
  server::Storage storage;
  std::unique_ptr<server::MapVersions> maps;
  std::mutex maps_mu;

  std::shared_ptr<Frame> Decode(const store::FrameRecord& row, const std::vector<uint8_t>& object) {
    auto frame = std::make_shared<Frame>();
    std::lock_guard<std::mutex> lock(maps_mu);
    frame->decoded = ValueOrThrow(server::DecodeStoredFrame(row, object, maps.get()));
    frame->record = row;
    return frame;
  }
};
using StorePtr = std::shared_ptr<OpenStore>;

StorePtr Open(const std::string& dir, const std::string& config, const std::string& index,
              const std::string& maps_root) {
  // OpenStorage creates a missing store folder (the server's start); a reader must not.
  if (!std::filesystem::is_directory(dir)) {
    throw StatusError(Status::NotFound(dir + ": no such store folder"));
  }
  KeepDecodingMemory();
  auto s = std::make_shared<OpenStore>();
  s->storage = ValueOrThrow(server::OpenStorage(dir, config, index));
  s->maps = std::make_unique<server::MapVersions>(maps_root.empty() ? dir + "/maps" : maps_root);
  return s;
}

// Objects of `rows`, in order, through one store::Reader (prefetching ahead of the consumer from
// every tier allowed), each decoded as it is taken.
class FrameReader {
 public:
  FrameReader(StorePtr store, std::vector<store::FrameRecord> rows, store::ReadOptions options)
      : store_(std::move(store)), rows_(std::move(rows)) {
    std::vector<store::ObjectId> ids;
    for (const auto& r : rows_) ids.push_back(r.object);
    reader_ = store_->storage.store->Read(std::move(ids), options);
  }
  std::shared_ptr<Frame> Next() {
    if (next_ >= rows_.size()) throw pyb::stop_iteration();
    const store::FrameRecord& row = rows_[next_++];
    pyb::gil_scoped_release release;
    auto object = reader_->Next();
    if (!object.ok()) {
      throw StatusError(
          object.status().WithContext("frame " + row.vehicle + "/" + std::to_string(row.sequence)));
    }
    return store_->Decode(row, *object);
  }
  size_t size() const { return rows_.size(); }

 private:
  StorePtr store_;
  std::vector<store::FrameRecord> rows_;
  std::unique_ptr<store::Reader> reader_;
  size_t next_ = 0;
};

store::ReadOptions ReadOptionsFrom(const std::vector<std::string>& tiers, size_t prefetch) {
  store::ReadOptions o;
  o.prefetch_objects = prefetch;
  if (tiers.empty()) return o;
  o.use_memory = o.use_disk = o.use_remote = false;
  for (const std::string& t : tiers) {
    if (t == "memory") {
      o.use_memory = true;
    } else if (t == "disk") {
      o.use_disk = true;
    } else if (t == "remote") {
      o.use_remote = true;
    } else {
      throw StatusError(
          Status::InvalidArgument("tiers: '" + t + "' is not memory, disk or remote"));
    }
  }
  return o;
}

store::FrameQuery MakeQuery(const std::string& vehicle, std::optional<int64_t> start_ns,
                            std::optional<int64_t> end_ns,
                            std::optional<std::array<double, 3>> near,
                            std::optional<double> radius_m, std::optional<size_t> limit) {
  store::FrameQuery q;
  q.vehicle = vehicle;
  q.from_ns = start_ns;
  q.to_ns = end_ns;
  if (near.has_value() != radius_m.has_value()) {
    throw StatusError(Status::InvalidArgument("query: near and radius_m go together"));
  }
  if (near) {
    q.near = Eigen::Vector3d((*near)[0], (*near)[1], (*near)[2]);
    if (!q.near->allFinite()) throw StatusError(Status::InvalidArgument("query: near not finite"));
    if (!(*radius_m >= 0)) throw StatusError(Status::InvalidArgument("query: radius_m < 0"));
    q.radius_m = *radius_m;
  }
  if (limit) q.limit = *limit;
  return q;
}

pyb::tuple RecordState(const store::FrameRecord& r) {
  const auto m = r.T_map_sensor.matrix();
  std::vector<double> pose(m.data(), m.data() + 16);
  return pyb::make_tuple(r.vehicle, r.drive, r.sensor_id, r.source_epoch, r.sequence,
                         r.timestamp_ns, r.map_version, pose, r.bytes, r.object.Hex());
}

store::FrameRecord RecordFromState(const pyb::tuple& t) {
  if (t.size() != 10) throw StatusError(Status::InvalidArgument("FrameRecord: bad pickle state"));
  store::FrameRecord r;
  r.vehicle = t[0].cast<std::string>();
  r.drive = t[1].cast<std::string>();
  r.sensor_id = t[2].cast<uint32_t>();
  r.source_epoch = t[3].cast<uint64_t>();
  r.sequence = t[4].cast<uint64_t>();
  r.timestamp_ns = t[5].cast<int64_t>();
  r.map_version = t[6].cast<std::string>();
  const auto pose = t[7].cast<std::vector<double>>();
  if (pose.size() != 16) throw StatusError(Status::InvalidArgument("FrameRecord: bad pose"));
  std::copy(pose.begin(), pose.end(), r.T_map_sensor.matrix().data());
  r.bytes = t[8].cast<uint64_t>();
  r.object = ValueOrThrow(store::ObjectId::FromHex(t[9].cast<std::string>()));
  return r;
}

}  // namespace

void RegisterStore(pyb::module_& m) {
  using store::FrameRecord;
  pyb::class_<FrameRecord>(m, "FrameRecord", "One frame's row of the frame index.")
      .def_readonly("vehicle", &FrameRecord::vehicle)
      .def_readonly("drive", &FrameRecord::drive)
      .def_readonly("sensor_id", &FrameRecord::sensor_id)
      .def_readonly("source_epoch", &FrameRecord::source_epoch)
      .def_readonly("sequence", &FrameRecord::sequence)
      .def_readonly("timestamp_ns", &FrameRecord::timestamp_ns)
      .def_readonly("map_version", &FrameRecord::map_version)
      .def_readonly("bytes", &FrameRecord::bytes)
      .def_property_readonly("object", [](const FrameRecord& r) { return r.object.Hex(); })
      .def_property_readonly("T_map_sensor",
                             [](const FrameRecord& r) { return PoseArray(r.T_map_sensor); })
      .def(pyb::pickle(&RecordState, &RecordFromState))
      .def("__repr__", [](const FrameRecord& r) {
        return "<dejaview.FrameRecord " + r.vehicle + "/" + std::to_string(r.sensor_id) + "/" +
               std::to_string(r.sequence) + " t=" + std::to_string(r.timestamp_ns) + ">";
      });

  pyb::class_<FrameReader>(m, "FrameReader", "Decoded frames of a list of records, in order.")
      .def("__iter__", [](FrameReader& r) -> FrameReader& { return r; })
      .def("__next__", &FrameReader::Next)
      .def("__len__", &FrameReader::size);

  pyb::class_<OpenStore, StorePtr>(m, "Store",
                                   "A server's store folder: its tiers and its frame index.")
      .def(pyb::init([](const pyb::object& dir, const pyb::object& config, const pyb::object& index,
                        const pyb::object& maps) {
             return Open(PathArg(dir), OptionalPathArg(config), OptionalPathArg(index),
                         OptionalPathArg(maps));
           }),
           pyb::arg("path"), pyb::arg("config") = pyb::none(), pyb::arg("index") = pyb::none(),
           pyb::arg("maps") = pyb::none(),
           "path: the server's --store folder; config: the tiers' YAML (docs/store.md, the S3 "
           "tier); index: FILE, sqlite:FILE or postgresql:CONNINFO (default path/index.sqlite); "
           "maps: the maps root, MAPS/<version>/ (default path/maps)")
      .def(
          "query",
          [](OpenStore& s, const std::optional<std::string>& vehicle,
             std::optional<int64_t> start_ns, std::optional<int64_t> end_ns,
             std::optional<std::array<double, 3>> near, std::optional<double> radius_m,
             std::optional<size_t> limit) {
            const store::FrameQuery q =
                MakeQuery(vehicle.value_or(""), start_ns, end_ns, near, radius_m, limit);
            pyb::gil_scoped_release release;
            return ValueOrThrow(s.storage.index->Query(q));
          },
          pyb::kw_only(), pyb::arg("vehicle") = pyb::none(), pyb::arg("start_ns") = pyb::none(),
          pyb::arg("end_ns") = pyb::none(), pyb::arg("near") = pyb::none(),
          pyb::arg("radius_m") = pyb::none(), pyb::arg("limit") = pyb::none(),
          "Frames with start_ns <= timestamp < end_ns, the sensor within radius_m of near "
          "(x, y, z), by vehicle, time, sensor, sequence.")
      .def(
          "read",
          [](const StorePtr& s, std::vector<store::FrameRecord> records,
             const std::vector<std::string>& tiers, size_t prefetch) {
            const store::ReadOptions o = ReadOptionsFrom(tiers, prefetch);
            return FrameReader(s, std::move(records), o);
          },
          pyb::arg("records"), pyb::arg("tiers") = std::vector<std::string>{},
          pyb::arg("prefetch") = 8,
          "An iterator of the records' decoded frames, in order, read through the multi-path "
          "reader (tiers: a subset of memory, disk, remote; default all).")
      .def(
          "decode",
          [](OpenStore& s, const store::FrameRecord& record) {
            pyb::gil_scoped_release release;
            return s.Decode(record, ValueOrThrow(s.storage.store->Get(record.object)));
          },
          pyb::arg("record"), "One record's frame, decoded.");
}

}  // namespace dv::py
