// Test helper for the Python suite: ingests a folder of delta files into a store exactly as the
// server does (server::Ingest, HELLO then one DATA message; the store's disk tier, the SQLite
// frame index), without the socket: the suite has no Python writer of the upload protocol.
//
//   make_store STORE VEHICLE DRIVE DELTADIR [TIERS.yaml]
//
// Frame i of DELTADIR (name order) becomes sequence i, sensor i % 2, timestamp
// 1700000000 s + i * 100 ms, with the pose and map version its payload holds. With the tiers'
// YAML (a remote tier), it returns once the copier has put every object in the bucket.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "dejaview/base/file_util.h"
#include "dejaview/codec/codec.h"
#include "dejaview/server/ingest.h"
#include "dejaview/server/storage.h"

namespace {

dv::Status Run(const std::string& store_dir, const std::string& vehicle, const std::string& drive,
               const std::string& deltas, const std::string& tiers) {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(deltas)) {
    if (e.path().extension() == ".dvd") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  DV_ASSIGN_OR_RETURN(dv::server::Storage storage, dv::server::OpenStorage(store_dir, tiers, ""));
  dv::server::Ingest ingest(storage.store.get(), storage.index.get());
  dv::transport::Message hello;
  hello.type = dv::transport::MessageType::kHello;
  hello.vehicle = vehicle;
  hello.sensor_ids = {0, 1};
  dv::transport::Message data;
  data.type = dv::transport::MessageType::kData;
  data.batch_id = 1;
  for (size_t i = 0; i < paths.size(); ++i) {
    dv::transport::SpoolRecord r;
    r.id = i;
    DV_ASSIGN_OR_RETURN(r.payload, dv::ReadFileBytes(paths[i]));
    DV_ASSIGN_OR_RETURN(const dv::codec::DecodedFrame header,
                        dv::codec::DecodeHeader(r.payload.data(), r.payload.size()));
    r.meta.vehicle = vehicle;
    r.meta.drive = drive;
    r.meta.sensor_id = uint32_t(i % 2);
    r.meta.sequence = i;
    r.meta.timestamp_ns = 1'700'000'000'000'000'000 + int64_t(i) * 100'000'000;
    r.meta.map_version = header.map_version;
    r.meta.T_map_sensor = header.T_map_sensor;
    data.records.push_back(std::move(r));
  }
  for (const dv::transport::Message& m : {hello, data}) {
    const std::vector<uint8_t> bytes = dv::transport::EncodeMessage(m);
    const dv::transport::Message reply = ingest.Handle("test", "", bytes.data(), bytes.size());
    if (reply.type != dv::transport::MessageType::kAck) {
      return dv::Status::Unavailable("ingest refused " +
                                     std::string(dv::transport::MessageTypeName(m.type)) + ": " +
                                     reply.detail);
    }
  }
  return tiers.empty() ? dv::Status::Ok() : storage.store->Flush(60'000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: make_store STORE VEHICLE DRIVE DELTADIR [TIERS.yaml]\n");
    return 2;
  }
  const dv::Status s = Run(argv[1], argv[2], argv[3], argv[4], argc == 6 ? argv[5] : "");
  if (!s.ok()) {
    std::fprintf(stderr, "make_store: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
