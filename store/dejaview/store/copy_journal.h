// Copy journal: the background copier's durable memory, so that a restart resumes copies
// instead of starting over and never uploads an object into a second pack. Append-only and
// framed like LevelDB's log, so a record torn by a crash is detected and dropped:
//
//   record  := masked_crc32c u32 | length u32 | type u8 | payload[length]
//   crc covers type and payload; length <= kMaxJournalRecord.
//   type 1 intent : pack_key str | count varint | count x id[32]   (fsync'd before the PUT)
//   type 2 done   : pack_key str                                  (after the PUT succeeded)
//   type 3 copied : count varint | count x id[32]                 (snapshot written at Open)
//
// Replay: an id is copied when it is in a snapshot or in an intent whose done follows. An
// intent without done is redone with the same members in the same order, which rebuilds the
// same pack bytes and so the same key: a pack PUT before the crash is overwritten, not repeated.
// Open compacts the journal to one snapshot plus the unfinished intents (atomic rewrite).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/store/object_id.h"

namespace dv::store {

constexpr uint32_t kMaxJournalRecord = 4 << 20;

struct CopyIntent {
  std::string pack_key;
  std::vector<ObjectId> members;
};

struct JournalState {
  std::unordered_set<ObjectId, ObjectIdHash> copied;
  std::vector<CopyIntent> unfinished;
  uint64_t dropped_tail_bytes = 0;  // a torn or corrupt tail, ignored
};

class CopyJournal {
 public:
  // Replays path (missing: empty state) into *state, compacts it and opens it for appending.
  static StatusOr<std::unique_ptr<CopyJournal>> Open(const std::string& path, JournalState* state);
  ~CopyJournal();
  CopyJournal(const CopyJournal&) = delete;
  CopyJournal& operator=(const CopyJournal&) = delete;

  Status AppendIntent(const CopyIntent& intent);
  Status AppendDone(const std::string& pack_key);

 private:
  CopyJournal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  Status Append(uint8_t type, const std::vector<uint8_t>& payload);

  const std::string path_;
  const int fd_;
  std::mutex mu_;
};

// Replays journal bytes (exposed for tests and the fuzz target).
JournalState ReplayJournal(const uint8_t* data, size_t size);

}  // namespace dv::store
