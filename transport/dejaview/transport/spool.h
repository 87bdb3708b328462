// The agent's durable spool: encoded frames wait here, on disk, until the server acknowledges
// them. Spec: docs/spool-format.md. A caller may rely on:
//   - Append returns only after the record is in the file (page cache); with Sync::kEveryRecord
//     it is also fsync'd, with kGroupCommit it is fsync'd within group_commit_ms (SyncIfDue or
//     the next Append), so a power cut loses at most that window; kill -9 loses nothing.
//   - Record ids are dense and increasing across restarts; Ack(n) persists "every id < n is
//     acknowledged" atomically and records below it are never returned again.
//   - Open recovers: a torn tail of the last segment is truncated, damaged blocks elsewhere
//     (the end of a sealed segment included) are skipped and counted, every intact record is
//     kept. Records lost to damage are counted in records_lost_corrupt and acknowledged on their
//     behalf once the cursor reaches them. A CURSOR that cannot be trusted is reset to the
//     oldest segment (cursor_resets): everything still on disk is resent, the server
//     deduplicates.
//   - Over budget_bytes, the oldest sealed segment is dropped (its records counted in
//     records_dropped_budget and acknowledged on their behalf) so recording never stops.
// Thread-safe: encoder threads append while the uploader reads and acks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
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
  // (vehicle, sensor_id, source_epoch, sequence) names one frame, the server's deduplication
  // key: the agent starts a new epoch whenever the source's sequence numbers may start again
  // (each subscription, each driver restart), so a restarted source is never a resend.
  uint64_t source_epoch = 0;
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

constexpr size_t kMaxRecordNameBytes = 128;            // vehicle, drive, map version
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
  // Damaged blocks found since Open (recovery and reads), each block once.
  uint64_t corrupt_blocks = 0;
  // Unacknowledged record ids found missing since Open (gaps in the dense ids left by damage or
  // a missing segment file), each id once.
  uint64_t records_lost_corrupt = 0;
  uint64_t torn_tail_bytes = 0;  // truncated at Open
  // 1 when Open found CURSOR damaged, cut short or missing after acknowledgements and reset it
  // to the oldest segment's first id.
  uint64_t cursor_resets = 0;
  // Unacknowledged records still readable: next_id - acked_below less the lost ids among them.
  uint64_t records_pending = 0;
  int64_t oldest_unacked_timestamp_ns = 0;  // 0 when nothing is pending
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
  Status LoadCursor();
  Status OpenNewSegment();
  Status WriteCursor(uint64_t acked_below);
  // Persists every id < acked_below (and the lost ids that follow) as acknowledged, seals a
  // fully acknowledged active segment and deletes what is no longer needed.
  Status Acknowledge(uint64_t acked_below);
  Status DeleteAckedSegments();
  Status EnforceBudget();
  // Reads segments_[i] from start_offset and passes each intact record with id >= from to
  // on_record (with the offset where it ends), in order, until on_record returns false. Damage
  // is counted in corrupt_blocks and the ids it cost in records_lost_corrupt. end_id is where
  // the segment's ids end; nullopt for the segment a crash may have torn, whose damage after
  // the last intact record is the torn tail. Returns the end of the last intact record.
  StatusOr<uint64_t> ScanSegment(
      size_t i, uint64_t start_offset, uint64_t from, std::optional<uint64_t> end_id,
      const std::function<bool(SpoolRecord&& record, uint64_t end_offset)>& on_record);
  void NoteDamagedBlock(uint64_t segment, uint64_t block_offset);
  void NoteLost(uint64_t begin_id, uint64_t end_id);
  uint64_t LostIn(uint64_t begin_id, uint64_t end_id) const;
  std::string SegmentPath(uint64_t first_id) const;

  const SpoolOptions options_;
  mutable std::mutex mu_;
  std::vector<Segment> segments_;  // oldest first; the last is being appended to
  std::optional<LogWriter> writer_;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_sync_;
  SpoolStats stats_;
  // Unacknowledged ids lost to damage, as [begin, end) by begin, all >= acked_below.
  std::map<uint64_t, uint64_t> lost_;
  // (segment first id, block offset) of every block counted in corrupt_blocks.
  std::set<std::pair<uint64_t, uint64_t>> damaged_;
  struct ReadHint {
    uint64_t segment = UINT64_MAX;  // first id of the segment the last Read ended in
    uint64_t next_id = 0;           // the id after the last record returned
    uint64_t offset = 0;            // where that record ended in the file
  } read_hint_;
};

}  // namespace dv::transport
