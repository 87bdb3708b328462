// Frame index: which stored object holds each frame, keyed by (vehicle, sensor, sequence), for
// look-ups by drive and time. SQLite is the embedded default; PostgreSQL is the fleet back end
// behind the same interface, so that several ingest servers share one index and deduplicate
// against each other. A caller may rely on: for one key, exactly one Insert ever returns true,
// across threads, processes and servers (the database's primary key decides, not the caller).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/store/object_id.h"

namespace dv::store {

struct FrameRecord {
  std::string vehicle;
  uint32_t sensor_id = 0;
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  ObjectId object;  // the stored object holding the frame
};

class FrameIndex {
 public:
  virtual ~FrameIndex() = default;
  // True when this call recorded the frame; false when its key was already present.
  virtual StatusOr<bool> Insert(const FrameRecord& record) = 0;
  // Frames of vehicle with t0_ns <= timestamp < t1_ns, by timestamp, sensor, sequence.
  virtual StatusOr<std::vector<FrameRecord>> Query(const std::string& vehicle, int64_t t0_ns,
                                                   int64_t t1_ns) = 0;
  virtual StatusOr<uint64_t> Count() = 0;
};

// "sqlite:PATH" or "postgresql:CONNINFO" (libpq key=value conninfo or a postgresql:// URI).
StatusOr<std::unique_ptr<FrameIndex>> OpenFrameIndex(const std::string& uri);
StatusOr<std::unique_ptr<FrameIndex>> OpenSqliteFrameIndex(const std::string& path);
StatusOr<std::unique_ptr<FrameIndex>> OpenPostgresFrameIndex(const std::string& conninfo);

}  // namespace dv::store
