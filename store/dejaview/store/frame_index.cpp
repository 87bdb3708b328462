#include "dejaview/store/frame_index.h"

#include <libpq-fe.h>
#include <sqlite3.h>

#include <cstring>
#include <mutex>

namespace dv::store {
namespace {

// One table in both back ends; sequence is stored as a signed 64-bit integer (same bits).
constexpr const char* kSqliteSchema =
    "CREATE TABLE IF NOT EXISTS frames (vehicle TEXT NOT NULL, sensor_id INTEGER NOT NULL,"
    " sequence INTEGER NOT NULL, timestamp_ns INTEGER NOT NULL, object BLOB NOT NULL,"
    " PRIMARY KEY (vehicle, sensor_id, sequence));"
    "CREATE INDEX IF NOT EXISTS frames_by_time ON frames (vehicle, timestamp_ns);";
constexpr const char* kPostgresSchema =
    "SET client_min_messages = warning;"  // no "already exists" notices on every open
    "CREATE TABLE IF NOT EXISTS frames (vehicle TEXT NOT NULL, sensor_id BIGINT NOT NULL,"
    " sequence BIGINT NOT NULL, timestamp_ns BIGINT NOT NULL, object BYTEA NOT NULL,"
    " PRIMARY KEY (vehicle, sensor_id, sequence));"
    "CREATE INDEX IF NOT EXISTS frames_by_time ON frames (vehicle, timestamp_ns);";

class SqliteFrameIndex : public FrameIndex {
 public:
  SqliteFrameIndex(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteFrameIndex() override { sqlite3_close(db_); }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      return Status::IoError(path_ + ": sqlite: " + msg);
    }
    return Status::Ok();
  }

  StatusOr<bool> Insert(const FrameRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    sqlite3_stmt* st = nullptr;
    DV_RETURN_IF_ERROR(Prepare("INSERT OR IGNORE INTO frames VALUES (?1, ?2, ?3, ?4, ?5)", &st));
    sqlite3_bind_text(st, 1, r.vehicle.data(), int(r.vehicle.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, r.sensor_id);
    sqlite3_bind_int64(st, 3, int64_t(r.sequence));
    sqlite3_bind_int64(st, 4, r.timestamp_ns);
    sqlite3_bind_blob(st, 5, r.object.bytes.data(), int(ObjectId::kSize), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return Status::IoError(path_ + ": insert: " + sqlite3_errmsg(db_));
    return sqlite3_changes(db_) == 1;
  }

  StatusOr<std::vector<FrameRecord>> Query(const std::string& vehicle, int64_t t0_ns,
                                           int64_t t1_ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    sqlite3_stmt* st = nullptr;
    DV_RETURN_IF_ERROR(Prepare(
        "SELECT sensor_id, sequence, timestamp_ns, object FROM frames WHERE vehicle = ?1 AND"
        " timestamp_ns >= ?2 AND timestamp_ns < ?3 ORDER BY timestamp_ns, sensor_id, sequence",
        &st));
    sqlite3_bind_text(st, 1, vehicle.data(), int(vehicle.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, t0_ns);
    sqlite3_bind_int64(st, 3, t1_ns);
    std::vector<FrameRecord> out;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      FrameRecord r;
      r.vehicle = vehicle;
      r.sensor_id = uint32_t(sqlite3_column_int64(st, 0));
      r.sequence = uint64_t(sqlite3_column_int64(st, 1));
      r.timestamp_ns = sqlite3_column_int64(st, 2);
      if (sqlite3_column_bytes(st, 3) != int(ObjectId::kSize)) {
        sqlite3_finalize(st);
        return Status::Corruption(path_ + ": frames.object is not a 32-byte id");
      }
      std::memcpy(r.object.bytes.data(), sqlite3_column_blob(st, 3), ObjectId::kSize);
      out.push_back(std::move(r));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return Status::IoError(path_ + ": query: " + sqlite3_errmsg(db_));
    return out;
  }

  StatusOr<uint64_t> Count() override {
    std::lock_guard<std::mutex> lock(mu_);
    sqlite3_stmt* st = nullptr;
    DV_RETURN_IF_ERROR(Prepare("SELECT COUNT(*) FROM frames", &st));
    const int rc = sqlite3_step(st);
    const uint64_t n = rc == SQLITE_ROW ? uint64_t(sqlite3_column_int64(st, 0)) : 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return Status::IoError(path_ + ": count: " + sqlite3_errmsg(db_));
    return n;
  }

 private:
  Status Prepare(const char* sql, sqlite3_stmt** st) {
    if (sqlite3_prepare_v2(db_, sql, -1, st, nullptr) != SQLITE_OK) {
      return Status::IoError(path_ + ": prepare: " + sqlite3_errmsg(db_));
    }
    return Status::Ok();
  }
  sqlite3* const db_;
  const std::string path_;
  std::mutex mu_;
};

class PostgresFrameIndex : public FrameIndex {
 public:
  explicit PostgresFrameIndex(PGconn* conn) : conn_(conn) {}
  ~PostgresFrameIndex() override { PQfinish(conn_); }

  // Runs sql with text parameters; the result is owned by the caller (PQclear).
  StatusOr<PGresult*> Run(const char* sql, const std::vector<std::string>& params,
                          ExecStatusType want) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    // Without parameters PQexec runs several statements (the schema); with them, one.
    PGresult* res = values.empty() ? PQexec(conn_, sql)
                                   : PQexecParams(conn_, sql, int(values.size()), nullptr,
                                                  values.data(), nullptr, nullptr, 0);
    if (PQresultStatus(res) != want) {
      std::string msg = PQresultErrorMessage(res);
      if (msg.empty()) msg = std::string("unexpected result ") + PQresStatus(PQresultStatus(res));
      PQclear(res);
      return Status::IoError("postgresql: " + msg.substr(0, msg.find_last_not_of('\n') + 1));
    }
    return res;
  }

  StatusOr<bool> Insert(const FrameRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(
        PGresult * res,
        Run("INSERT INTO frames VALUES ($1, $2, $3, $4, decode($5, 'hex')) ON CONFLICT DO NOTHING",
            {r.vehicle, std::to_string(r.sensor_id), std::to_string(int64_t(r.sequence)),
             std::to_string(r.timestamp_ns), r.object.Hex()},
            PGRES_COMMAND_OK));
    const bool inserted = std::string(PQcmdTuples(res)) == "1";
    PQclear(res);
    return inserted;
  }

  StatusOr<std::vector<FrameRecord>> Query(const std::string& vehicle, int64_t t0_ns,
                                           int64_t t1_ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(
        PGresult * res,
        Run("SELECT sensor_id, sequence, timestamp_ns, encode(object, 'hex') FROM frames"
            " WHERE vehicle = $1 AND timestamp_ns >= $2 AND timestamp_ns < $3"
            " ORDER BY timestamp_ns, sensor_id, sequence",
            {vehicle, std::to_string(t0_ns), std::to_string(t1_ns)}, PGRES_TUPLES_OK));
    std::vector<FrameRecord> out;
    for (int i = 0; i < PQntuples(res); ++i) {
      FrameRecord r;
      r.vehicle = vehicle;
      r.sensor_id = uint32_t(std::stoll(PQgetvalue(res, i, 0)));
      r.sequence = uint64_t(std::stoll(PQgetvalue(res, i, 1)));
      r.timestamp_ns = std::stoll(PQgetvalue(res, i, 2));
      auto id = ObjectId::FromHex(PQgetvalue(res, i, 3));
      if (!id.ok()) {
        PQclear(res);
        return Status::Corruption("postgresql: frames.object: " + id.status().message());
      }
      r.object = *id;
      out.push_back(std::move(r));
    }
    PQclear(res);
    return out;
  }

  StatusOr<uint64_t> Count() override {
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(PGresult * res, Run("SELECT COUNT(*) FROM frames", {}, PGRES_TUPLES_OK));
    const uint64_t n = uint64_t(std::stoll(PQgetvalue(res, 0, 0)));
    PQclear(res);
    return n;
  }

 private:
  PGconn* const conn_;
  std::mutex mu_;
};

}  // namespace

StatusOr<std::unique_ptr<FrameIndex>> OpenSqliteFrameIndex(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::IoError(path + ": sqlite open: " + msg);
  }
  auto index = std::make_unique<SqliteFrameIndex>(db, path);
  sqlite3_busy_timeout(db, 10000);  // several processes may write one file
  DV_RETURN_IF_ERROR(index->Exec("PRAGMA journal_mode=WAL;"));
  DV_RETURN_IF_ERROR(index->Exec(kSqliteSchema));
  return std::unique_ptr<FrameIndex>(std::move(index));
}

StatusOr<std::unique_ptr<FrameIndex>> OpenPostgresFrameIndex(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return Status::Unavailable("postgresql '" + conninfo +
                               "': " + msg.substr(0, msg.find_last_not_of('\n') + 1));
  }
  auto index = std::make_unique<PostgresFrameIndex>(conn);
  // Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog; servers starting
  // together take turns under a session advisory lock (the key is arbitrary but fixed).
  const std::pair<const char*, ExecStatusType> steps[] = {
      {"SELECT pg_advisory_lock(84460713)", PGRES_TUPLES_OK},
      {kPostgresSchema, PGRES_COMMAND_OK},
      {"SELECT pg_advisory_unlock(84460713)", PGRES_TUPLES_OK}};
  for (const auto& [sql, want] : steps) {
    DV_ASSIGN_OR_RETURN(PGresult * res, index->Run(sql, {}, want));
    PQclear(res);
  }
  return std::unique_ptr<FrameIndex>(std::move(index));
}

StatusOr<std::unique_ptr<FrameIndex>> OpenFrameIndex(const std::string& uri) {
  if (uri.rfind("sqlite:", 0) == 0) return OpenSqliteFrameIndex(uri.substr(7));
  if (uri.rfind("postgresql:", 0) == 0) {
    const std::string rest = uri.substr(11);
    return OpenPostgresFrameIndex(rest.rfind("//", 0) == 0 ? uri : rest);
  }
  return Status::InvalidArgument("frame index '" + uri +
                                 "': expected sqlite:PATH or postgresql:CONNINFO");
}

}  // namespace dv::store
