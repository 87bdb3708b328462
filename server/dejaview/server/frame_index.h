// The server's frame index: one SQLite row per stored frame, keyed by (vehicle, sensor,
// sequence) -- the deduplication key of the upload protocol -- with what the forensic look-up
// filters on (time, position) and where the delta lives (store file and offset).
// The delta store is the source of truth: per store file the index remembers how far it has
// indexed, so that a crash between the store's fsync and the index's commit is repaired at
// start-up by indexing the rest of the file.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/transport/spool.h"

namespace dv::server {

struct FrameRow {
  transport::RecordMeta meta;
  uint64_t bytes = 0;  // delta payload size
  std::string file;    // store file, relative to the store root
  uint64_t offset = 0;
};

struct FrameQuery {
  std::string vehicle;  // empty: any
  std::optional<int64_t> from_ns, to_ns;
  std::optional<Eigen::Vector3d> near;
  double radius_m = 0;
  size_t limit = 1'000'000;
};

class FrameIndex {
 public:
  static StatusOr<std::unique_ptr<FrameIndex>> Open(const std::string& path);
  ~FrameIndex();
  FrameIndex(const FrameIndex&) = delete;
  FrameIndex& operator=(const FrameIndex&) = delete;

  StatusOr<bool> Has(const std::string& vehicle, uint32_t sensor, uint64_t sequence);
  // Inserts rows (existing keys are left alone) and sets the indexed end of each file, in one
  // durable transaction.
  Status Insert(const std::vector<FrameRow>& rows,
                const std::vector<std::pair<std::string, uint64_t>>& file_ends);
  StatusOr<uint64_t> IndexedEnd(const std::string& file);
  // Frames matching q, ordered by vehicle, timestamp, sensor.
  StatusOr<std::vector<FrameRow>> Query(const FrameQuery& q);
  StatusOr<uint64_t> Count();

 private:
  FrameIndex(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const char* sql);
  Status Error(const char* what) const;
  sqlite3* db_;
  std::string path_;
};

}  // namespace dv::server
