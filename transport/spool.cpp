#include "dejaview/transport/spool.h"

#include <lz4.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dejaview/base/bytes.h"
#include "dejaview/base/file_util.h"

namespace dv::transport {
namespace {

constexpr uint8_t kRecordVersion = 1;
constexpr uint8_t kFlagMetaLz4 = 1;
constexpr size_t kMaxMetaBytes = 4 * kMaxRecordNameBytes + 256;
constexpr char kCursorMagic[8] = {'D', 'V', 'C', 'U', 'R', 'S', 'O', 'R'};
constexpr const char* kCursorName = "CURSOR";
constexpr const char* kSegmentSuffix = ".log";

std::vector<uint8_t> EncodeMeta(const RecordMeta& m) {
  ByteWriter w;
  w.Str(m.vehicle);
  w.Str(m.drive);
  w.Varint(m.sensor_id);
  w.Varint(m.source_epoch);
  w.Varint(m.sequence);
  w.I64(m.timestamp_ns);
  w.Str(m.map_version);
  const Eigen::Quaterniond q(m.T_map_sensor.rotation());
  const Eigen::Vector3d t = m.T_map_sensor.translation();
  for (double v : {t.x(), t.y(), t.z(), q.w(), q.x(), q.y(), q.z()}) w.F64(v);
  return w.Take();
}

StatusOr<RecordMeta> DecodeMeta(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  RecordMeta m;
  uint64_t sensor = 0;
  double v[7] = {};
  r.Str(&m.vehicle, kMaxRecordNameBytes);
  r.Str(&m.drive, kMaxRecordNameBytes);
  r.Varint(&sensor);
  r.Varint(&m.source_epoch);
  r.Varint(&m.sequence);
  r.I64(&m.timestamp_ns);
  r.Str(&m.map_version, kMaxRecordNameBytes);
  for (double& x : v) r.F64(&x);
  if (r.failed() || r.remaining() != 0) return Status::Corruption("record metadata: truncated");
  if (sensor > UINT32_MAX) return Status::Corruption("record metadata: sensor id out of range");
  m.sensor_id = uint32_t(sensor);
  for (double x : v) {
    if (!std::isfinite(x)) return Status::Corruption("record metadata: non-finite pose");
  }
  Eigen::Quaterniond q(v[3], v[4], v[5], v[6]);
  if (std::abs(q.norm() - 1.0) > 1e-6)
    return Status::Corruption("record metadata: pose rotation is not a unit quaternion");
  m.T_map_sensor = Pose::Identity();
  m.T_map_sensor.linear() = q.normalized().toRotationMatrix();
  m.T_map_sensor.translation() = Eigen::Vector3d(v[0], v[1], v[2]);
  DV_RETURN_IF_ERROR(ValidateName("vehicle", m.vehicle));
  DV_RETURN_IF_ERROR(ValidateName("drive", m.drive));
  if (m.vehicle.empty() || m.drive.empty())
    return Status::Corruption("record metadata: empty vehicle or drive");
  if (!m.map_version.empty()) DV_RETURN_IF_ERROR(ValidateName("map_version", m.map_version));
  return m;
}

bool ParseSegmentName(const std::string& name, uint64_t* first_id) {
  const size_t suffix = std::strlen(kSegmentSuffix);
  if (name.size() != 20 + suffix || name.compare(20, suffix, kSegmentSuffix) != 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + uint64_t(name[i] - '0');
  }
  *first_id = v;
  return true;
}

}  // namespace

Status ValidateName(const std::string& field, const std::string& value) {
  if (value.size() > kMaxRecordNameBytes)
    return Status::InvalidArgument(field + ": longer than 128 bytes");
  if (!value.empty() && value[0] == '.')
    return Status::InvalidArgument(field + ": starts with '.'");
  for (char c : value) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return Status::InvalidArgument(field + ": '" + value +
                                     "' has a character outside [A-Za-z0-9._-]");
    }
  }
  return Status::Ok();
}

std::vector<uint8_t> EncodeRecord(const SpoolRecord& rec) {
  const std::vector<uint8_t> meta = EncodeMeta(rec.meta);
  // Metadata is LZ4-compressed only when that makes it smaller (long names, repeated strings);
  // most headers are a few dozen bytes of doubles and stay raw.
  std::vector<uint8_t> packed(size_t(LZ4_compressBound(int(meta.size()))));
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(meta.data()),
                                     reinterpret_cast<char*>(packed.data()), int(meta.size()),
                                     int(packed.size()));
  const bool lz4 = n > 0 && size_t(n) < meta.size();
  ByteWriter w;
  w.U8(kRecordVersion);
  w.U64(rec.id);
  w.U8(lz4 ? kFlagMetaLz4 : 0);
  w.Varint(meta.size());
  if (lz4) {
    w.Varint(size_t(n));
    w.Bytes(packed.data(), size_t(n));
  } else {
    w.Varint(meta.size());
    w.Bytes(meta.data(), meta.size());
  }
  w.Varint(rec.payload.size());
  w.Bytes(rec.payload.data(), rec.payload.size());
  return w.Take();
}

StatusOr<SpoolRecord> DecodeRecord(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  uint8_t version = 0, flags = 0;
  uint64_t meta_len = 0, stored_len = 0, payload_len = 0;
  SpoolRecord rec;
  const uint8_t* stored = nullptr;
  const uint8_t* payload = nullptr;
  r.U8(&version);
  r.U64(&rec.id);
  r.U8(&flags);
  r.Varint(&meta_len);
  r.Varint(&stored_len);
  if (r.failed()) return Status::Corruption("record: truncated header");
  if (version != kRecordVersion)
    return Status::Corruption("record: unknown version " + std::to_string(version));
  if (flags & ~kFlagMetaLz4) return Status::Corruption("record: unknown flags");
  if (meta_len > kMaxMetaBytes || stored_len > kMaxMetaBytes)
    return Status::Corruption("record: metadata longer than " + std::to_string(kMaxMetaBytes) +
                              " bytes");
  r.View(&stored, stored_len);
  r.Varint(&payload_len);
  if (r.failed() || payload_len > kMaxPayloadBytes || payload_len != r.remaining()) {
    return Status::Corruption("record: payload length does not match the record size");
  }
  r.View(&payload, payload_len);
  std::vector<uint8_t> meta(meta_len);
  if (flags & kFlagMetaLz4) {
    const int n =
        LZ4_decompress_safe(reinterpret_cast<const char*>(stored),
                            reinterpret_cast<char*>(meta.data()), int(stored_len), int(meta_len));
    if (n < 0 || size_t(n) != meta_len) return Status::Corruption("record: bad LZ4 metadata");
  } else {
    if (stored_len != meta_len) return Status::Corruption("record: raw metadata length mismatch");
    if (meta_len > 0) std::memcpy(meta.data(), stored, meta_len);
  }
  auto m = DecodeMeta(meta.data(), meta.size());
  if (!m.ok()) return m.status();
  rec.meta = std::move(m).value();
  rec.payload.assign(payload, payload + payload_len);
  return rec;
}

StatusOr<std::unique_ptr<Spool>> Spool::Open(const SpoolOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("spool: dir is empty");
  if (options.segment_bytes < kLogBlockSize)
    return Status::InvalidArgument("spool: segment_bytes below 32 KiB");
  if (options.budget_bytes < 2 * options.segment_bytes) {
    return Status::InvalidArgument("spool: budget_bytes must be at least two segments");
  }
  if (options.group_commit_ms < 0)
    return Status::InvalidArgument("spool: group_commit_ms is negative");
  std::unique_ptr<Spool> spool(new Spool(options));
  DV_RETURN_IF_ERROR(MakeDirs(options.dir));
  DV_RETURN_IF_ERROR(spool->Recover());
  return spool;
}

Spool::~Spool() {
  std::lock_guard<std::mutex> lock(mu_);
  if (writer_ && dirty_) (void)writer_->Sync();
}

std::string Spool::SegmentPath(uint64_t first_id) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%020llu%s", static_cast<unsigned long long>(first_id),
                kSegmentSuffix);
  return options_.dir + "/" + name;
}

Status Spool::Recover() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(options_.dir, ec)) {
    uint64_t first = 0;
    if (e.is_regular_file() && ParseSegmentName(e.path().filename().string(), &first)) {
      segments_.push_back({first, 0, 0, 0});
    }
  }
  if (ec) return Status::IoError(options_.dir + ": list: " + ec.message());
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.first_id < b.first_id; });
  DV_RETURN_IF_ERROR(LoadCursor());
  // Segments are deleted only below the cursor: ids between it and the oldest file are gone.
  if (!segments_.empty()) NoteLost(stats_.acked_below, segments_.front().first_id);

  uint64_t next_id = stats_.acked_below;
  for (size_t i = 0; i < segments_.size(); ++i) {
    Segment& seg = segments_[i];
    const std::string path = SegmentPath(seg.first_id);
    // A sealed segment was fsync'd before the next one was created: damage anywhere in it, its
    // end included, is counted. Only the last one may end in a torn write.
    const bool last = i + 1 == segments_.size();
    const std::optional<uint64_t> end_id =
        last ? std::nullopt : std::optional<uint64_t>(segments_[i + 1].first_id);
    DV_ASSIGN_OR_RETURN(const uint64_t end_of_last_record,
                        ScanSegment(i, 0, 0, end_id, [&](SpoolRecord&& rec, uint64_t) {
                          if (seg.records++ == 0) seg.first_timestamp_ns = rec.meta.timestamp_ns;
                          next_id = std::max(next_id, rec.id + 1);
                          return true;
                        }));
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) return Status::IoError(path + ": size: " + ec.message());
    seg.bytes = size;
    if (last && end_of_last_record < size) {
      // The torn tail: what a crash left half-written after the last intact record.
      if (::truncate(path.c_str(), off_t(end_of_last_record)) != 0) {
        return Status::IoError(path + ": truncate torn tail: " + std::strerror(errno));
      }
      stats_.torn_tail_bytes += size - end_of_last_record;
      seg.bytes = end_of_last_record;
    }
    next_id = std::max(next_id, seg.first_id);
  }
  stats_.next_id = next_id;
  if (!segments_.empty() && segments_.back().bytes < options_.segment_bytes) {
    DV_ASSIGN_OR_RETURN(LogWriter w, LogWriter::Open(SegmentPath(segments_.back().first_id)));
    writer_.emplace(std::move(w));
  } else {
    DV_RETURN_IF_ERROR(OpenNewSegment());
  }
  last_sync_ = std::chrono::steady_clock::now();
  return Acknowledge(stats_.acked_below);
}

Status Spool::LoadCursor() {
  auto cursor = ReadU64File(options_.dir + "/" + kCursorName, kCursorMagic);
  if (cursor.ok()) {
    stats_.acked_below = *cursor;
    return Status::Ok();
  }
  if (cursor.status().code() == Status::Code::kNotFound) {
    // Nothing acknowledged yet; once something was, the oldest segment no longer starts at 0.
    if (segments_.empty() || segments_.front().first_id == 0) return Status::Ok();
  } else if (cursor.status().code() != Status::Code::kCorruption) {
    return cursor.status();  // an I/O failure, not damage
  }
  // A cursor that cannot be trusted is never guessed forward: every record still in the
  // segments is unacknowledged again and gets resent; the server deduplicates.
  stats_.acked_below = segments_.empty() ? 0 : segments_.front().first_id;
  ++stats_.cursor_resets;
  return WriteCursor(stats_.acked_below);
}

Status Spool::OpenNewSegment() {
  if (writer_ && dirty_) DV_RETURN_IF_ERROR(writer_->Sync());  // a sealed segment is durable
  dirty_ = false;
  const std::string path = SegmentPath(stats_.next_id);
  DV_ASSIGN_OR_RETURN(LogWriter w, LogWriter::Open(path));
  DV_RETURN_IF_ERROR(FsyncDir(options_.dir));
  writer_.emplace(std::move(w));
  segments_.push_back({stats_.next_id, 0, 0, 0});
  return Status::Ok();
}

Status Spool::WriteCursor(uint64_t acked_below) {
  return WriteU64File(options_.dir + "/" + kCursorName, kCursorMagic, acked_below);
}

Status Spool::Acknowledge(uint64_t acked_below) {
  // Lost ids right at the cursor will never be acknowledged by the server: the cursor moves
  // past them (they were counted when found).
  auto lost_end = lost_.begin();
  for (; lost_end != lost_.end() && lost_end->first <= acked_below; ++lost_end)
    acked_below = std::max(acked_below, lost_end->second);
  if (acked_below > stats_.acked_below) {
    DV_RETURN_IF_ERROR(WriteCursor(acked_below));
    stats_.acked_below = acked_below;
  }
  lost_.erase(lost_.begin(), lost_end);
  // A fully acknowledged active segment is sealed so that its file can go too.
  if (stats_.acked_below == stats_.next_id && segments_.back().records > 0)
    DV_RETURN_IF_ERROR(OpenNewSegment());
  return DeleteAckedSegments();
}

Status Spool::DeleteAckedSegments() {
  // Segment i holds ids [first_i, first_{i+1}); the active (last) segment is kept.
  while (segments_.size() > 1 && segments_[1].first_id <= stats_.acked_below) {
    const uint64_t first = segments_.front().first_id;
    const std::string path = SegmentPath(first);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::IoError(path + ": delete: " + std::strerror(errno));
    }
    segments_.erase(segments_.begin());
    damaged_.erase(damaged_.lower_bound({first, 0}), damaged_.upper_bound({first, UINT64_MAX}));
  }
  return Status::Ok();
}

Status Spool::EnforceBudget() {
  uint64_t total = 0;
  for (const Segment& s : segments_) total += s.bytes;
  // Drop-oldest: a vehicle must keep recording, and the newest frames are the ones nobody has
  // seen yet. Dropped records are acknowledged on the uploader's behalf and counted.
  while (total > options_.budget_bytes && segments_.size() > 1) {
    const Segment& old = segments_.front();
    const uint64_t end = segments_[1].first_id;
    const uint64_t unacked_from = std::max(old.first_id, stats_.acked_below);
    const uint64_t unacked =
        end > unacked_from ? std::min(old.records, end - unacked_from - LostIn(unacked_from, end))
                           : 0;
    stats_.records_dropped_budget += unacked;
    ++stats_.segments_dropped_budget;
    total -= old.bytes;
    DV_RETURN_IF_ERROR(Acknowledge(std::max(stats_.acked_below, end)));
  }
  return Status::Ok();
}

StatusOr<uint64_t> Spool::Append(const RecordMeta& meta, const uint8_t* payload, size_t size) {
  if (size > kMaxPayloadBytes) return Status::InvalidArgument("spool: payload larger than 32 MiB");
  DV_RETURN_IF_ERROR(ValidateName("vehicle", meta.vehicle));
  DV_RETURN_IF_ERROR(ValidateName("drive", meta.drive));
  DV_RETURN_IF_ERROR(ValidateName("map_version", meta.map_version));
  if (meta.vehicle.empty() || meta.drive.empty())
    return Status::InvalidArgument("spool: empty vehicle or drive");
  std::lock_guard<std::mutex> lock(mu_);
  SpoolRecord rec;
  rec.id = stats_.next_id;
  rec.meta = meta;
  rec.payload.assign(payload, payload + size);
  const std::vector<uint8_t> body = EncodeRecord(rec);
  if (segments_.back().records > 0 &&
      segments_.back().bytes + body.size() > options_.segment_bytes) {
    DV_RETURN_IF_ERROR(OpenNewSegment());
  }
  DV_RETURN_IF_ERROR(writer_->Append(body.data(), body.size()).status());
  Segment& seg = segments_.back();
  if (seg.records++ == 0) seg.first_timestamp_ns = meta.timestamp_ns;
  seg.bytes = writer_->file_size();
  ++stats_.next_id;
  ++stats_.records_appended;
  dirty_ = true;
  const bool force = options_.sync == SpoolOptions::Sync::kEveryRecord;
  const auto now = std::chrono::steady_clock::now();
  if (force || now - last_sync_ >= std::chrono::milliseconds(options_.group_commit_ms)) {
    DV_RETURN_IF_ERROR(writer_->Sync());
    dirty_ = false;
    last_sync_ = now;
  }
  DV_RETURN_IF_ERROR(EnforceBudget());
  return rec.id;
}

Status Spool::SyncIfDue(bool force) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!dirty_ ||
      (!force && now - last_sync_ < std::chrono::milliseconds(options_.group_commit_ms))) {
    return Status::Ok();
  }
  DV_RETURN_IF_ERROR(writer_->Sync());
  dirty_ = false;
  last_sync_ = now;
  return Status::Ok();
}

StatusOr<uint64_t> Spool::ScanSegment(
    size_t i, uint64_t start_offset, uint64_t from, std::optional<uint64_t> end_id,
    const std::function<bool(SpoolRecord&& record, uint64_t end_offset)>& on_record) {
  const uint64_t first = segments_[i].first_id;
  DV_ASSIGN_OR_RETURN(LogReader reader, LogReader::Open(SegmentPath(first), start_offset));
  // Ids are dense: every id the scan passes without finding its record was lost to damage.
  uint64_t expected = std::max(from, first);
  std::vector<uint8_t> body;
  uint64_t offset = 0;
  bool more = true;
  for (bool go = true; go;) {
    DV_ASSIGN_OR_RETURN(more, reader.Next(&body, &offset));
    if (!more) break;
    auto rec = DecodeRecord(body.data(), body.size());
    if (!rec.ok()) {
      NoteDamagedBlock(first, offset - offset % kLogBlockSize);  // framing intact, body not ours
      continue;
    }
    if (rec->id < expected) continue;
    NoteLost(expected, rec->id);
    expected = rec->id + 1;
    go = on_record(std::move(rec).value(), reader.end_of_last_record());
  }
  const std::vector<uint64_t>& damaged = reader.damaged_blocks();
  const size_t counted = end_id ? damaged.size() : size_t(reader.corrupt_blocks());
  for (size_t k = 0; k < counted; ++k) NoteDamagedBlock(first, damaged[k]);
  if (!more && end_id) NoteLost(expected, *end_id);
  return reader.end_of_last_record();
}

void Spool::NoteDamagedBlock(uint64_t segment, uint64_t block_offset) {
  if (damaged_.insert({segment, block_offset}).second) ++stats_.corrupt_blocks;
}

void Spool::NoteLost(uint64_t begin_id, uint64_t end_id) {
  begin_id = std::max(begin_id, stats_.acked_below);
  if (begin_id >= end_id) return;
  // Merges [begin_id, end_id) into lost_, counting only the ids not known lost before.
  uint64_t known = 0, begin = begin_id, end = end_id;
  auto it = lost_.upper_bound(begin_id);
  if (it != lost_.begin() && std::prev(it)->second >= begin_id) --it;
  while (it != lost_.end() && it->first <= end_id) {
    known += std::min(it->second, end_id) - std::max(it->first, begin_id);
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = lost_.erase(it);
  }
  lost_[begin] = end;
  stats_.records_lost_corrupt += end_id - begin_id - known;
}

uint64_t Spool::LostIn(uint64_t begin_id, uint64_t end_id) const {
  uint64_t n = 0;
  for (const auto& [begin, end] : lost_) {
    if (begin < end_id && end > begin_id) n += std::min(end, end_id) - std::max(begin, begin_id);
  }
  return n;
}

StatusOr<std::vector<SpoolRecord>> Spool::Read(uint64_t from_id, size_t max_records,
                                               size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SpoolRecord> out;
  const uint64_t from = std::max(from_id, stats_.acked_below);
  size_t bytes = 0;
  bool full = false;
  size_t i = 0;
  while (i + 1 < segments_.size() && segments_[i + 1].first_id <= from) ++i;
  for (; i < segments_.size() && out.size() < max_records && !full; ++i) {
    // Reads go through the file, not a cache: what is returned is what a restart would see. The
    // hint lets the uploader's sequential reads continue where the last one stopped instead of
    // rescanning the segment from its start.
    const uint64_t seg = segments_[i].first_id;
    const uint64_t start =
        read_hint_.segment == seg && read_hint_.next_id == from ? read_hint_.offset : 0;
    // The active segment holds every id below next_id: no torn tail while the spool is open.
    const uint64_t end_id = i + 1 < segments_.size() ? segments_[i + 1].first_id : stats_.next_id;
    DV_RETURN_IF_ERROR(ScanSegment(i, start, from, end_id, [&](SpoolRecord&& rec, uint64_t end) {
                         bytes += rec.payload.size();
                         read_hint_ = {seg, rec.id + 1, end};
                         out.push_back(std::move(rec));
                         full = out.size() >= max_records || bytes >= max_bytes;
                         return !full;
                       }).status());
  }
  DV_RETURN_IF_ERROR(Acknowledge(stats_.acked_below));
  return out;
}

Status Spool::Ack(uint64_t acked_below) {
  std::lock_guard<std::mutex> lock(mu_);
  acked_below = std::min(acked_below, stats_.next_id);
  if (acked_below <= stats_.acked_below) return Status::Ok();
  return Acknowledge(acked_below);
}

SpoolStats Spool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SpoolStats s = stats_;
  s.segments = segments_.size();
  s.bytes_on_disk = 0;
  for (const Segment& seg : segments_) s.bytes_on_disk += seg.bytes;
  s.records_pending = s.next_id - s.acked_below - LostIn(s.acked_below, s.next_id);
  s.oldest_unacked_timestamp_ns = 0;
  for (size_t i = 0; i < segments_.size() && s.records_pending > 0; ++i) {
    const uint64_t begin = std::max(segments_[i].first_id, s.acked_below);
    const uint64_t end = i + 1 < segments_.size() ? segments_[i + 1].first_id : s.next_id;
    if (end > begin && end - begin > LostIn(begin, end) && segments_[i].records > 0) {
      s.oldest_unacked_timestamp_ns = segments_[i].first_timestamp_ns;
      break;
    }
  }
  return s;
}

}  // namespace dv::transport
