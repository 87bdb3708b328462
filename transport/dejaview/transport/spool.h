// The agent's durable spool: encoded frames wait here, on disk, until the server acknowledges
// them. Spec: docs/spool-format.md. A caller may rely on:
//   - Append returns only after the record is in the file (page cache); with Sync::kEveryRecord
//     it is also fsync'd, with kGroupCommit it is fsync'd within group_commit_ms (SyncIfDue or
//     the next Append), so a power cut loses at most that window; kill -9 loses nothing.
//   - Record ids are dense and increasing across restarts; Ack(n) persists "every id < n is
//     acknowledged" atomically and records below it are never returned again.
//   - Open recovers: a torn tail of the last segment is truncated, damaged blocks elsewhere are
//     skipped and counted, every intact record before them is kept.
//   - Over budget_bytes, the oldest sealed segment is dropped (its records counted in
//     records_dropped_budget and acknowledged on their behalf) so recording never stops.
// Thread-safe: encoder threads append while the uploader reads and acks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/transport/spool_log.h"

namespace dv::transport {

// What the spool, the upload protocol and the server's index know about a frame; the delta
// itself is opaque to them.
struct RecordMeta {
  std::string vehicle;
  std::string drive;
  uint32_t sensor_id = 0;
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  std::string map_version;  // empty: intra-coded
  Pose T_map_sensor = Pose::Identity();
};

struct SpoolRecord {
  uint64_t id = 0;
  RecordMeta meta;
  std::vector<uint8_t> payload;
};

constexpr size_t kMaxNameBytes = 128;                  // vehicle, drive, map version
constexpr size_t kMaxPayloadBytes = size_t(32) << 20;  // one encoded frame

// The record body stored in a log record and carried in upload batches (docs/spool-format.md).
std::vector<uint8_t> EncodeRecord(const SpoolRecord& record);
StatusOr<SpoolRecord> DecodeRecord(const uint8_t* data, size_t size);
// Names must be printable ASCII without '/' so that they can be path components on the server.
Status ValidateName(const std::string& field, const std::string& value);

struct SpoolOptions {
  std::string dir;
  enum class Sync { kEveryRecord, kGroupCommit } sync = Sync::kGroupCommit;
  int group_commit_ms = 50;
  uint64_t segment_bytes = uint64_t(4) << 20;
  uint64_t budget_bytes = uint64_t(1) << 30;  // at least two segments
};

struct SpoolStats {
  uint64_t next_id = 0;        // id the next Append gets
  uint64_t acked_below = 0;    // every id below is acknowledged
  uint64_t bytes_on_disk = 0;  // all segment files
  uint64_t segments = 0;
  uint64_t records_appended = 0;  // since Open
  uint64_t records_dropped_budget = 0;
  uint64_t segments_dropped_budget = 0;
  uint64_t corrupt_blocks = 0;              // skipped while reading (recovery and reads)
  uint64_t torn_tail_bytes = 0;             // truncated at Open
  int64_t oldest_unacked_timestamp_ns = 0;  // 0 when everything is acknowledged
};

class Spool {
 public:
  static StatusOr<std::unique_ptr<Spool>> Open(const SpoolOptions& options);
  ~Spool();

  // Appends one frame; returns its record id.
  StatusOr<uint64_t> Append(const RecordMeta& meta, const uint8_t* payload, size_t size);
  // fsyncs the active segment when the group-commit window has passed (or always when force).
  Status SyncIfDue(bool force = false);
  // Up to max_records records with id >= from_id (and at most about max_bytes of payload, at
  // least one record), in id order. Ids below the oldest kept segment are skipped.
  StatusOr<std::vector<SpoolRecord>> Read(uint64_t from_id, size_t max_records, size_t max_bytes);
  // Every id < acked_below is acknowledged: persists the cursor, deletes whole segments.
  Status Ack(uint64_t acked_below);
  SpoolStats stats() const;

 private:
  struct Segment {
    uint64_t first_id;
    uint64_t bytes;
    uint64_t records;
    int64_t first_timestamp_ns;
  };
  explicit Spool(SpoolOptions options) : options_(std::move(options)) {}
  Status Recover();
  Status OpenNewSegment();
  Status WriteCursor(uint64_t acked_below);
  Status DeleteAckedSegments();
  Status EnforceBudget();
  std::string SegmentPath(uint64_t first_id) const;

  const SpoolOptions options_;
  mutable std::mutex mu_;
  std::vector<Segment> segments_;  // oldest first; the last is being appended to
  std::optional<LogWriter> writer_;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_sync_;
  SpoolStats stats_;
  struct ReadHint {
    uint64_t segment = UINT64_MAX;  // first id of the segment the last Read ended in
    uint64_t next_id = 0;           // the id after the last record returned
    uint64_t offset = 0;            // where that record ended in the file
  } read_hint_;
};

}  // namespace dv::transport
