#include "dejaview/store/copy_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"

namespace dv::store {
namespace {

enum : uint8_t { kIntent = 1, kDone = 2, kCopied = 3 };
constexpr size_t kMaxKey = 1024;
constexpr size_t kIdsPerSnapshotRecord = 100000;  // 3.2 MB, under kMaxJournalRecord

void Frame(uint8_t type, const std::vector<uint8_t>& payload, ByteWriter* out) {
  uint32_t crc = crc32c::Extend(crc32c::Value(&type, 1), payload.data(), payload.size());
  out->U32(crc32c::Mask(crc));
  out->U32(uint32_t(payload.size()));
  out->U8(type);
  out->Bytes(payload.data(), payload.size());
}

void PutIds(const ObjectId* ids, size_t n, ByteWriter* w) {
  w->Varint(n);
  for (size_t i = 0; i < n; ++i) w->Bytes(ids[i].bytes.data(), ObjectId::kSize);
}

bool GetIds(ByteReader* r, std::vector<ObjectId>* ids) {
  uint64_t n;
  if (!r->Varint(&n) || n > r->remaining() / ObjectId::kSize) return false;
  ids->resize(n);
  for (ObjectId& id : *ids) r->Bytes(id.bytes.data(), ObjectId::kSize);
  return !r->failed();
}

std::vector<uint8_t> IntentPayload(const CopyIntent& intent) {
  ByteWriter w;
  w.Str(intent.pack_key);
  PutIds(intent.members.data(), intent.members.size(), &w);
  return w.Take();
}

}  // namespace

JournalState ReplayJournal(const uint8_t* data, size_t size) {
  JournalState state;
  std::map<std::string, std::vector<ObjectId>> open_intents;  // ordered: deterministic redo
  ByteReader r(data, size);
  while (r.remaining() > 0) {
    const size_t record_start = size - r.remaining();
    uint32_t masked = 0, length = 0;
    uint8_t type = 0;
    const uint8_t* payload = nullptr;
    r.U32(&masked);
    r.U32(&length);
    r.U8(&type);
    bool good = !r.failed() && length <= kMaxJournalRecord && r.View(&payload, length) &&
                crc32c::Unmask(masked) == crc32c::Extend(crc32c::Value(&type, 1), payload, length);
    if (good) {
      ByteReader p(payload, length);
      std::string key;
      std::vector<ObjectId> ids;
      if (type == kIntent && p.Str(&key, kMaxKey) && GetIds(&p, &ids)) {
        open_intents[key] = std::move(ids);
      } else if (type == kDone && p.Str(&key, kMaxKey)) {
        auto it = open_intents.find(key);
        if (it != open_intents.end()) {
          state.copied.insert(it->second.begin(), it->second.end());
          open_intents.erase(it);
        }
      } else if (type == kCopied && GetIds(&p, &ids)) {
        state.copied.insert(ids.begin(), ids.end());
      } else {
        good = false;
      }
    }
    if (!good) {  // torn tail (or damage): everything from here on is not trusted
      state.dropped_tail_bytes = size - record_start;
      break;
    }
  }
  for (auto& [key, members] : open_intents) state.unfinished.push_back({key, std::move(members)});
  return state;
}

StatusOr<std::unique_ptr<CopyJournal>> CopyJournal::Open(const std::string& path,
                                                         JournalState* state) {
  auto bytes = ReadFileBytes(path);
  if (bytes.ok()) {
    *state = ReplayJournal(bytes->data(), bytes->size());
  } else if (bytes.status().code() == Status::Code::kNotFound) {
    *state = JournalState();
  } else {
    return bytes.status();
  }
  ByteWriter compacted;
  const std::vector<ObjectId> copied(state->copied.begin(), state->copied.end());
  for (size_t i = 0; i < copied.size(); i += kIdsPerSnapshotRecord) {
    ByteWriter w;
    PutIds(copied.data() + i, std::min(kIdsPerSnapshotRecord, copied.size() - i), &w);
    Frame(kCopied, w.Take(), &compacted);
  }
  for (const CopyIntent& intent : state->unfinished) {
    Frame(kIntent, IntentPayload(intent), &compacted);
  }
  DV_RETURN_IF_ERROR(WriteFileAtomic(path, compacted.buffer()));
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": open: " + std::strerror(errno));
  return std::unique_ptr<CopyJournal>(new CopyJournal(path, fd));
}

CopyJournal::~CopyJournal() { ::close(fd_); }

Status CopyJournal::Append(uint8_t type, const std::vector<uint8_t>& payload) {
  ByteWriter record;
  Frame(type, payload, &record);
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<uint8_t>& b = record.buffer();
  size_t done = 0;
  while (done < b.size()) {
    const ssize_t w = ::write(fd_, b.data() + done, b.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::IoError(path_ + ": append: " + std::strerror(errno));
    done += size_t(w);
  }
  if (::fdatasync(fd_) != 0) return Status::IoError(path_ + ": fdatasync: " + std::strerror(errno));
  return Status::Ok();
}

Status CopyJournal::AppendIntent(const CopyIntent& intent) {
  return Append(kIntent, IntentPayload(intent));
}

Status CopyJournal::AppendDone(const std::string& pack_key) {
  ByteWriter w;
  w.Str(pack_key);
  return Append(kDone, w.Take());
}

}  // namespace dv::store
