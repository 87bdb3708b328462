// The server's durable delta store: one append-only file per (vehicle, drive),
// STORE/<vehicle>/<drive>/deltas.log, framed and encoded exactly like a spool segment
// (docs/spool-format.md), so one reader and one fuzz target serve both. Records are immutable
// once written; SyncTouched makes every append since the last call durable.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/transport/spool.h"
#include "dejaview/transport/spool_log.h"

namespace dv::server {

class DeltaStore {
 public:
  static StatusOr<std::unique_ptr<DeltaStore>> Open(const std::string& root);

  // Appends a record; returns (file relative to the root, offset of the record).
  StatusOr<std::pair<std::string, uint64_t>> Append(const transport::SpoolRecord& record);
  // fsyncs every file appended to since the last call; returns (file, size) of each.
  StatusOr<std::vector<std::pair<std::string, uint64_t>>> SyncTouched();
  // Every store file, relative to the root, sorted.
  StatusOr<std::vector<std::string>> Files() const;
  StatusOr<transport::SpoolRecord> ReadAt(const std::string& file, uint64_t offset) const;
  // Truncates a file to size (the torn tail of an append that was never acknowledged).
  Status Truncate(const std::string& file, uint64_t size);
  const std::string& root() const { return root_; }

  static std::string FileFor(const transport::RecordMeta& meta) {
    return meta.vehicle + "/" + meta.drive + "/deltas.log";
  }

 private:
  explicit DeltaStore(std::string root) : root_(std::move(root)) {}
  std::string root_;
  std::map<std::string, transport::LogWriter> writers_;
  std::map<std::string, bool> touched_;
};

}  // namespace dv::server
