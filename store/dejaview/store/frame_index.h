// Frame index: where each stored frame is, keyed by (vehicle, sensor, source epoch, sequence)
// (transport::RecordMeta says why), with what the
// forensic look-up and the training export filter on (time, position). SQLite is the embedded
// default; PostgreSQL is the fleet back end behind the same interface, so that several ingest
// servers share one index and deduplicate against each other. A caller may rely on: for one
// key, exactly one Insert ever reports it new, across threads, processes and servers (the
// database's primary key decides, not the caller); an Insert of several records is one
// durable transaction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/store/object_id.h"

namespace dv::store {

struct FrameRecord {
  std::string vehicle;
  std::string drive;
  uint32_t sensor_id = 0;
  uint64_t source_epoch = 0;
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  std::string map_version;  // empty: intra-coded
  Pose T_map_sensor = Pose::Identity();
  uint64_t bytes = 0;  // delta payload size
  ObjectId object;     // the stored object holding the frame
};

struct FrameQuery {
  std::string vehicle;                    // empty: any
  std::optional<int64_t> from_ns, to_ns;  // from_ns <= timestamp < to_ns
  std::optional<Eigen::Vector3d> near;    // with radius_m: sensor position within the sphere
  double radius_m = 0;
  size_t limit = 100'000'000;
};

class FrameIndex {
 public:
  virtual ~FrameIndex() = default;
  // One transaction; element i is true when records[i] is new (this call recorded it).
  virtual StatusOr<std::vector<bool>> Insert(const std::vector<FrameRecord>& records) = 0;
  virtual StatusOr<bool> Has(const std::string& vehicle, uint32_t sensor, uint64_t source_epoch,
                             uint64_t sequence) = 0;
  // Frames matching q, by vehicle, timestamp, sensor, sequence.
  virtual StatusOr<std::vector<FrameRecord>> Query(const FrameQuery& q) = 0;
  // The database's plan for Query(q), one line per step (SQLite's EXPLAIN QUERY PLAN details,
  // PostgreSQL's EXPLAIN): a place look-up goes through the spatial index (SQLite R*Tree
  // frames_place, PostgreSQL GiST frames_by_place).
  virtual StatusOr<std::string> Explain(const FrameQuery& q) = 0;
  virtual StatusOr<uint64_t> Count() = 0;
  // Sum of FrameRecord::bytes over the vehicle's frames (the server's storage quota).
  virtual StatusOr<uint64_t> StoredBytes(const std::string& vehicle) = 0;

  StatusOr<bool> Insert(const FrameRecord& record);
};

// "sqlite:PATH", "postgresql:CONNINFO" (libpq key=value conninfo or a postgresql:// URI), or a
// bare path (SQLite).
StatusOr<std::unique_ptr<FrameIndex>> OpenFrameIndex(const std::string& uri);
StatusOr<std::unique_ptr<FrameIndex>> OpenSqliteFrameIndex(const std::string& path);
StatusOr<std::unique_ptr<FrameIndex>> OpenPostgresFrameIndex(const std::string& conninfo);

}  // namespace dv::store
