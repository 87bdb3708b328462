#include "dejaview/store/frame_index.h"

#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <tuple>

namespace dv::store {
namespace {

using Row = std::vector<std::string>;

// One schema and one set of statements for both back ends: parameters are $1..$N in order of
// first use (SQLite numbers named parameters that way too) and travel as text, which SQLite's
// column affinity and PostgreSQL's typed columns both convert. source_epoch and sequence are
// signed 64-bit integers holding the same bits.
constexpr const char* kCreateTable =
    "CREATE TABLE IF NOT EXISTS frames (vehicle TEXT NOT NULL, sensor_id BIGINT NOT NULL,"
    " source_epoch BIGINT NOT NULL, sequence BIGINT NOT NULL, drive TEXT NOT NULL, timestamp_ns "
    "BIGINT NOT NULL,"
    " map_version TEXT NOT NULL, tx DOUBLE PRECISION NOT NULL, ty DOUBLE PRECISION NOT NULL,"
    " tz DOUBLE PRECISION NOT NULL, qw DOUBLE PRECISION NOT NULL, qx DOUBLE PRECISION NOT NULL,"
    " qy DOUBLE PRECISION NOT NULL, qz DOUBLE PRECISION NOT NULL, bytes BIGINT NOT NULL,"
    " object TEXT NOT NULL, PRIMARY KEY (vehicle, sensor_id, source_epoch, sequence))";
constexpr const char* kCreateIndex =
    "CREATE INDEX IF NOT EXISTS frames_by_time ON frames (vehicle, timestamp_ns)";
constexpr const char* kInsert =
    "INSERT INTO frames VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,"
    " $16)"
    " ON CONFLICT DO NOTHING RETURNING 1";
constexpr const char* kColumns =
    "SELECT vehicle, sensor_id, source_epoch, sequence, drive, timestamp_ns, map_version, tx, ty, "
    "tz, qw, qx,"
    " qy, qz, bytes, object FROM frames";

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);  // round-trips every double
  return buf;
}

Row ToParams(const FrameRecord& r) {
  const Eigen::Vector3d t = r.T_map_sensor.translation();
  const Eigen::Quaterniond q(r.T_map_sensor.rotation());
  return {r.vehicle,
          std::to_string(r.sensor_id),
          std::to_string(int64_t(r.source_epoch)),
          std::to_string(int64_t(r.sequence)),
          r.drive,
          std::to_string(r.timestamp_ns),
          r.map_version,
          Num(t.x()),
          Num(t.y()),
          Num(t.z()),
          Num(q.w()),
          Num(q.x()),
          Num(q.y()),
          Num(q.z()),
          std::to_string(int64_t(r.bytes)),
          r.object.Hex()};
}

StatusOr<FrameRecord> FromRow(const Row& v, const std::string& where) {
  if (v.size() != 16) return Status::Corruption(where + ": frames row has the wrong shape");
  FrameRecord r;
  try {
    r.vehicle = v[0];
    r.sensor_id = uint32_t(std::stoll(v[1]));
    r.source_epoch = uint64_t(std::stoll(v[2]));
    r.sequence = uint64_t(std::stoll(v[3]));
    r.drive = v[4];
    r.timestamp_ns = std::stoll(v[5]);
    r.map_version = v[6];
    double p[7];
    for (int i = 0; i < 7; ++i) p[i] = std::stod(v[7 + i]);
    r.T_map_sensor = Pose::Identity();
    r.T_map_sensor.linear() =
        Eigen::Quaterniond(p[3], p[4], p[5], p[6]).normalized().toRotationMatrix();
    r.T_map_sensor.translation() = Eigen::Vector3d(p[0], p[1], p[2]);
    r.bytes = uint64_t(std::stoll(v[14]));
  } catch (const std::exception&) {  // std::sto* report bad text only by exception
    return Status::Corruption(where + ": frames row of " + v[0] + " holds a non-number");
  }
  auto id = ObjectId::FromHex(v[15]);
  if (!id.ok()) return Status::Corruption(where + ": frames.object: " + id.status().message());
  r.object = *id;
  return r;
}

// A database connection that runs one statement with text parameters and returns text rows.
class Sql {
 public:
  virtual ~Sql() = default;
  virtual StatusOr<std::vector<Row>> Run(const std::string& sql, const Row& params) = 0;
  virtual const char* begin() const = 0;  // the statement that opens a write transaction
  virtual const std::string& where() const = 0;
  // The spatial index on the frames' positions (place look-ups: FrameQuery::near), created with
  // the table, and the condition that selects the rows whose position lies in the box
  // [p[0], p[1]] x [p[2], p[3]] x [p[4], p[5]] through it (p: parameter placeholders).
  virtual std::vector<std::string> PlaceSchema() const = 0;
  virtual std::string InBox(const std::vector<std::string>& p) const = 0;
  virtual std::string ExplainPrefix() const = 0;  // turns a query into its plan
};

class SqliteSql : public Sql {
 public:
  SqliteSql(sqlite3* db, std::string path) : db_(db), where_(std::move(path)) {}
  ~SqliteSql() override { sqlite3_close(db_); }
  const char* begin() const override { return "BEGIN IMMEDIATE"; }  // writers queue at BEGIN
  const std::string& where() const override { return where_; }
  // An R*Tree (Debian's SQLite is built with it) of each frame's position, filled by a trigger
  // on insert; an index made before it existed is filled at open. R*Tree coordinates are 32-bit
  // floats rounded outwards, so its boxes hold every row the exact box holds (Query then keeps
  // the exact sphere).
  std::vector<std::string> PlaceSchema() const override {
    return {
        "CREATE VIRTUAL TABLE IF NOT EXISTS frames_place USING rtree(id, min_x, max_x, min_y,"
        " max_y, min_z, max_z)",
        "CREATE TRIGGER IF NOT EXISTS frames_place_insert AFTER INSERT ON frames BEGIN"
        " INSERT INTO frames_place VALUES (new.rowid, new.tx, new.tx, new.ty, new.ty, new.tz,"
        " new.tz); END",
        "INSERT INTO frames_place SELECT rowid, tx, tx, ty, ty, tz, tz FROM frames"
        " WHERE rowid NOT IN (SELECT id FROM frames_place)"};
  }
  std::string InBox(const std::vector<std::string>& p) const override {
    return "rowid IN (SELECT id FROM frames_place WHERE max_x >= " + p[0] +
           " AND min_x <= " + p[1] + " AND max_y >= " + p[2] + " AND min_y <= " + p[3] +
           " AND max_z >= " + p[4] + " AND min_z <= " + p[5] + ")";
  }
  std::string ExplainPrefix() const override { return "EXPLAIN QUERY PLAN "; }

  StatusOr<std::vector<Row>> Run(const std::string& sql, const Row& params) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      return Status::IoError(where_ + ": sqlite: " + sqlite3_errmsg(db_));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      sqlite3_bind_text(st, int(i + 1), params[i].data(), int(params[i].size()), SQLITE_TRANSIENT);
    }
    std::vector<Row> rows;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      Row row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        if (sqlite3_column_type(st, c) == SQLITE_FLOAT) {  // SQLite's own text keeps 15 digits
          row.push_back(Num(sqlite3_column_double(st, c)));
          continue;
        }
        const auto* text = sqlite3_column_text(st, c);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
      }
      rows.push_back(std::move(row));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return Status::IoError(where_ + ": sqlite: " + sqlite3_errmsg(db_));
    return rows;
  }

 private:
  sqlite3* const db_;
  const std::string where_;
};

class PostgresSql : public Sql {
 public:
  explicit PostgresSql(PGconn* conn) : conn_(conn) {}
  ~PostgresSql() override { PQfinish(conn_); }
  const char* begin() const override { return "BEGIN"; }
  const std::string& where() const override { return where_; }
  // A GiST index on each frame's (x, y) as a degenerate box (built-in geometric types: no
  // PostGIS needed); height is filtered on the rows it yields.
  std::vector<std::string> PlaceSchema() const override {
    return {
        "CREATE INDEX IF NOT EXISTS frames_by_place ON frames USING gist"
        " (box(point(tx, ty), point(tx, ty)))"};
  }
  std::string InBox(const std::vector<std::string>& p) const override {
    return "box(point(tx, ty), point(tx, ty)) && box(point(" + p[0] + ", " + p[2] + "), point(" +
           p[1] + ", " + p[3] + ")) AND tz >= " + p[4] + " AND tz <= " + p[5];
  }
  std::string ExplainPrefix() const override { return "EXPLAIN "; }

  StatusOr<std::vector<Row>> Run(const std::string& sql, const Row& params) override {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* res = PQexecParams(conn_, sql.c_str(), int(values.size()), nullptr, values.data(),
                                 nullptr, nullptr, 0);
    const ExecStatusType status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(res);
      if (msg.empty()) msg = std::string("unexpected result ") + PQresStatus(status);
      PQclear(res);
      return Status::IoError("postgresql: " + msg.substr(0, msg.find_last_not_of('\n') + 1));
    }
    std::vector<Row> rows(size_t(PQntuples(res)));
    for (int i = 0; i < PQntuples(res); ++i) {
      for (int c = 0; c < PQnfields(res); ++c) rows[size_t(i)].emplace_back(PQgetvalue(res, i, c));
    }
    PQclear(res);
    return rows;
  }

 private:
  PGconn* const conn_;
  const std::string where_ = "postgresql";
};

class SqlFrameIndex : public FrameIndex {
 public:
  explicit SqlFrameIndex(std::unique_ptr<Sql> sql) : sql_(std::move(sql)) {}

  Status CreateSchema() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const char* s : {kCreateTable, kCreateIndex})
      DV_RETURN_IF_ERROR(sql_->Run(s, {}).status());
    for (const std::string& s : sql_->PlaceSchema()) DV_RETURN_IF_ERROR(sql_->Run(s, {}).status());
    return Status::Ok();
  }
  Sql* sql() { return sql_.get(); }

  StatusOr<std::vector<bool>> Insert(const std::vector<FrameRecord>& records) override {
    std::lock_guard<std::mutex> lock(mu_);
    // Rows are inserted in key order: two servers committing overlapping batches then take
    // the key locks in the same order and wait for each other instead of deadlocking.
    std::vector<size_t> order(records.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const FrameRecord &x = records[a], &y = records[b];
      return std::tie(x.vehicle, x.sensor_id, x.source_epoch, x.sequence) <
             std::tie(y.vehicle, y.sensor_id, y.source_epoch, y.sequence);
    });
    DV_RETURN_IF_ERROR(sql_->Run(sql_->begin(), {}).status());
    std::vector<bool> fresh(records.size());
    for (const size_t i : order) {
      auto rows = sql_->Run(kInsert, ToParams(records[i]));
      if (!rows.ok()) {
        (void)sql_->Run("ROLLBACK", {});
        return rows.status();
      }
      fresh[i] = rows->size() == 1;
    }
    DV_RETURN_IF_ERROR(sql_->Run("COMMIT", {}).status());
    return fresh;
  }

  StatusOr<bool> Has(const std::string& vehicle, uint32_t sensor, uint64_t source_epoch,
                     uint64_t sequence) override {
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(
        const auto rows,
        sql_->Run("SELECT 1 FROM frames WHERE vehicle = $1 AND sensor_id = $2 AND"
                  " source_epoch = $3 AND sequence = $4",
                  {vehicle, std::to_string(sensor), std::to_string(int64_t(source_epoch)),
                   std::to_string(int64_t(sequence))}));
    return !rows.empty();
  }

  StatusOr<std::vector<FrameRecord>> Query(const FrameQuery& q) override {
    Row params;
    const std::string sql = QuerySql(q, &params);
    std::vector<Row> rows;
    {
      std::lock_guard<std::mutex> lock(mu_);
      DV_ASSIGN_OR_RETURN(rows, sql_->Run(sql, params));
    }
    std::vector<FrameRecord> out;
    for (const Row& row : rows) {
      if (out.size() >= q.limit) break;
      DV_ASSIGN_OR_RETURN(FrameRecord r, FromRow(row, sql_->where()));
      if (q.near && (r.T_map_sensor.translation() - *q.near).norm() > q.radius_m) continue;
      out.push_back(std::move(r));
    }
    return out;
  }

  StatusOr<std::string> Explain(const FrameQuery& q) override {
    Row params;
    const std::string sql = sql_->ExplainPrefix() + QuerySql(q, &params);
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(const std::vector<Row> rows, sql_->Run(sql, params));
    std::string plan;
    for (const Row& row : rows) plan += (row.empty() ? "" : row.back()) + "\n";
    return plan;
  }

  StatusOr<uint64_t> StoredBytes(const std::string& vehicle) override {
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(
        const auto rows,
        sql_->Run("SELECT COALESCE(SUM(bytes), 0) FROM frames WHERE vehicle = $1", {vehicle}));
    if (rows.size() != 1 || rows[0].size() != 1) {
      return Status::Corruption(sql_->where() + ": sum returned no row");
    }
    return uint64_t(std::strtoull(rows[0][0].c_str(), nullptr, 10));
  }

  StatusOr<uint64_t> Count() override {
    std::lock_guard<std::mutex> lock(mu_);
    DV_ASSIGN_OR_RETURN(const auto rows, sql_->Run("SELECT COUNT(*) FROM frames", {}));
    if (rows.size() != 1 || rows[0].size() != 1) {
      return Status::Corruption(sql_->where() + ": count returned no row");
    }
    return uint64_t(std::strtoull(rows[0][0].c_str(), nullptr, 10));
  }

 private:
  // The statement of Query, its parameters in *params. The position filter is the box around
  // the sphere, through the spatial index; Query keeps the exact sphere.
  std::string QuerySql(const FrameQuery& q, Row* params) const {
    std::string sql = std::string(kColumns) + " WHERE 1 = 1";
    auto next = [&](const std::string& value) {
      params->push_back(value);
      return "$" + std::to_string(params->size());
    };
    if (!q.vehicle.empty()) sql += " AND vehicle = " + next(q.vehicle);
    if (q.from_ns) sql += " AND timestamp_ns >= " + next(std::to_string(*q.from_ns));
    if (q.to_ns) sql += " AND timestamp_ns < " + next(std::to_string(*q.to_ns));
    if (q.near) {
      std::vector<std::string> box;
      for (int a = 0; a < 3; ++a) {
        box.push_back(next(Num((*q.near)[a] - q.radius_m)));
        box.push_back(next(Num((*q.near)[a] + q.radius_m)));
      }
      sql += " AND " + sql_->InBox(box);
    }
    return sql + " ORDER BY vehicle, timestamp_ns, sensor_id, sequence";
  }

  std::unique_ptr<Sql> sql_;
  std::mutex mu_;  // one connection: one statement at a time
};

}  // namespace

StatusOr<bool> FrameIndex::Insert(const FrameRecord& record) {
  DV_ASSIGN_OR_RETURN(const std::vector<bool> fresh, Insert(std::vector<FrameRecord>{record}));
  return bool(fresh[0]);
}

StatusOr<std::unique_ptr<FrameIndex>> OpenSqliteFrameIndex(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::IoError(path + ": sqlite open: " + msg);
  }
  sqlite3_busy_timeout(db, 10000);  // several processes may write one file
  auto index = std::make_unique<SqlFrameIndex>(std::make_unique<SqliteSql>(db, path));
  // synchronous=FULL: a commit is on disk when it returns, which is what lets the server ACK.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"}) {
    DV_RETURN_IF_ERROR(index->sql()->Run(pragma, {}).status());
  }
  DV_RETURN_IF_ERROR(index->CreateSchema());
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
  auto index = std::make_unique<SqlFrameIndex>(std::make_unique<PostgresSql>(conn));
  // Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog; servers starting
  // together take turns under a session advisory lock (the key is arbitrary but fixed).
  Sql* sql = index->sql();
  DV_RETURN_IF_ERROR(sql->Run("SET client_min_messages = warning", {}).status());
  DV_RETURN_IF_ERROR(sql->Run("SELECT pg_advisory_lock(84460713)", {}).status());
  const Status created = index->CreateSchema();
  DV_RETURN_IF_ERROR(sql->Run("SELECT pg_advisory_unlock(84460713)", {}).status());
  DV_RETURN_IF_ERROR(created);
  return std::unique_ptr<FrameIndex>(std::move(index));
}

StatusOr<std::unique_ptr<FrameIndex>> OpenFrameIndex(const std::string& uri) {
  if (uri.rfind("sqlite:", 0) == 0) return OpenSqliteFrameIndex(uri.substr(7));
  if (uri.rfind("postgresql:", 0) == 0) {
    const std::string rest = uri.substr(11);
    return OpenPostgresFrameIndex(rest.rfind("//", 0) == 0 ? uri : rest);
  }
  const size_t colon = uri.find(':');
  if (colon == std::string::npos || uri.find('/') < colon) return OpenSqliteFrameIndex(uri);
  return Status::InvalidArgument("frame index '" + uri +
                                 "': expected sqlite:PATH, postgresql:CONNINFO or a file path");
}

}  // namespace dv::store
