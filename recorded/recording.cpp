#include "dejaview/recorded/recording.h"

#include <sqlite3.h>

#include <map>
#include <memory>

#include "mapped_file.h"

namespace dv::recorded {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

Status ReadMcapRecording(const std::string& path, const RecordedVisitor& visit) {
  return ReadMcapMessages(path, [&](const McapMessageView& v) {
    return visit({&v.channel->topic, v.schema_name, &v.channel->message_encoding,
                  v.message->log_time, v.message->data});
  });
}

struct Db3Topic {
  std::string name, type, encoding;
};

// rosbag2's sqlite3 storage, through SQLite itself (read-only, immutable: nothing is written
// and no journal is looked for).
Status ReadDb3Recording(const std::string& path, const RecordedVisitor& visit) {
  sqlite3* raw = nullptr;
  const std::string uri = "file:" + path + "?immutable=1";
  const int open =
      sqlite3_open_v2(uri.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  const auto error = [&](const char* what) {
    return Status::Corruption(path + ": " + what + ": " +
                              (db ? sqlite3_errmsg(db.get()) : sqlite3_errstr(open)));
  };
  if (open != SQLITE_OK) return error("not a readable ROS 2 bag (.db3)");
  const auto prepare = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db.get(), sql, -1, &s, nullptr);
    return std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>(s, sqlite3_finalize);
  };
  const auto text = [](sqlite3_stmt* s, int col) {
    const auto* p = sqlite3_column_text(s, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  };
  std::map<int64_t, Db3Topic> topics;
  auto t = prepare("SELECT id, name, type, serialization_format FROM topics");
  if (!t) return error("no rosbag2 topics table");
  int rc;
  while ((rc = sqlite3_step(t.get())) == SQLITE_ROW) {
    topics[sqlite3_column_int64(t.get(), 0)] = {text(t.get(), 1), text(t.get(), 2),
                                                text(t.get(), 3)};
  }
  if (rc != SQLITE_DONE) return error("reading topics");
  auto m = prepare("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id");
  if (!m) return error("no rosbag2 messages table");
  while ((rc = sqlite3_step(m.get())) == SQLITE_ROW) {
    const auto it = topics.find(sqlite3_column_int64(m.get(), 0));
    if (it == topics.end()) {
      return Status::Corruption(path + ": message on topic id " +
                                std::to_string(sqlite3_column_int64(m.get(), 0)) +
                                ", not in the topics table");
    }
    const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(m.get(), 2));
    const auto size = size_t(sqlite3_column_bytes(m.get(), 2));
    DV_RETURN_IF_ERROR(visit({&it->second.name,
                              &it->second.type,
                              &it->second.encoding,
                              uint64_t(sqlite3_column_int64(m.get(), 1)),
                              {data, size}}));
  }
  if (rc != SQLITE_DONE) return error("reading messages");
  return Status::Ok();
}

Status ReadRos1BagFile(const std::string& path, const RecordedVisitor& visit) {
  MappedFile file;
  DV_RETURN_IF_ERROR(file.Open(path));
  return ReadRos1Bag(file.data(), file.size(), path, visit);
}

}  // namespace

bool IsRecording(const std::string& path) {
  return EndsWith(path, ".mcap") || EndsWith(path, ".db3") || EndsWith(path, ".bag");
}

Status ReadRecordedMessages(const std::string& path, const RecordedVisitor& visit) {
  if (EndsWith(path, ".db3")) return ReadDb3Recording(path, visit);
  if (EndsWith(path, ".mcap")) return ReadMcapRecording(path, visit);
  if (EndsWith(path, ".bag")) return ReadRos1BagFile(path, visit);
  return Status::InvalidArgument(path + ": not a recording (expected .mcap, .db3 or .bag)");
}

}  // namespace dv::recorded
