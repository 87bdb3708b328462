#include "dejaview/server/frame_index.h"

#include <cmath>

namespace dv::server {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS frames(
  vehicle TEXT NOT NULL, sensor INTEGER NOT NULL, sequence INTEGER NOT NULL,
  drive TEXT NOT NULL, timestamp_ns INTEGER NOT NULL,
  tx REAL NOT NULL, ty REAL NOT NULL, tz REAL NOT NULL,
  qw REAL NOT NULL, qx REAL NOT NULL, qy REAL NOT NULL, qz REAL NOT NULL,
  map_version TEXT NOT NULL, bytes INTEGER NOT NULL, file TEXT NOT NULL, offset INTEGER NOT NULL,
  PRIMARY KEY(vehicle, sensor, sequence));
CREATE INDEX IF NOT EXISTS frames_by_time ON frames(vehicle, timestamp_ns);
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, indexed_end INTEGER NOT NULL);
)sql";

// sqlite3_stmt with finalisation on every path.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  void Text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Real(int i, double v) { sqlite3_bind_double(s_, i, v); }
  std::string ColText(int i) {
    const auto* p = sqlite3_column_text(s_, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

}  // namespace

StatusOr<std::unique_ptr<FrameIndex>> FrameIndex::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::IoError(path + ": open index: " + msg);
  }
  std::unique_ptr<FrameIndex> index(new FrameIndex(db, path));
  sqlite3_busy_timeout(db, 5000);
  // synchronous=FULL: a commit is on disk when it returns, which is what lets the server ACK.
  DV_RETURN_IF_ERROR(index->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  DV_RETURN_IF_ERROR(index->Exec(kSchema));
  return index;
}

FrameIndex::~FrameIndex() { sqlite3_close(db_); }

Status FrameIndex::Error(const char* what) const {
  return Status::IoError(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status FrameIndex::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::IoError(path_ + ": " + msg);
  }
  return Status::Ok();
}

StatusOr<bool> FrameIndex::Has(const std::string& vehicle, uint32_t sensor, uint64_t sequence) {
  Stmt s(db_, "SELECT 1 FROM frames WHERE vehicle=?1 AND sensor=?2 AND sequence=?3");
  if (!s.ok()) return Error("prepare lookup");
  s.Text(1, vehicle);
  s.Int(2, sensor);
  s.Int(3, int64_t(sequence));
  const int rc = sqlite3_step(s.get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("lookup");
  return rc == SQLITE_ROW;
}

Status FrameIndex::Insert(const std::vector<FrameRow>& rows,
                          const std::vector<std::pair<std::string, uint64_t>>& file_ends) {
  DV_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto fail = [&](const char* what) {
    const Status s = Error(what);
    (void)Exec("ROLLBACK");
    return s;
  };
  {
    Stmt s(db_,
           "INSERT OR IGNORE INTO frames VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,"
           "?16)");
    if (!s.ok()) return fail("prepare insert");
    for (const FrameRow& r : rows) {
      const Eigen::Quaterniond q(r.meta.T_map_sensor.rotation());
      const Eigen::Vector3d t = r.meta.T_map_sensor.translation();
      s.Text(1, r.meta.vehicle);
      s.Int(2, r.meta.sensor_id);
      s.Int(3, int64_t(r.meta.sequence));
      s.Text(4, r.meta.drive);
      s.Int(5, r.meta.timestamp_ns);
      s.Real(6, t.x());
      s.Real(7, t.y());
      s.Real(8, t.z());
      s.Real(9, q.w());
      s.Real(10, q.x());
      s.Real(11, q.y());
      s.Real(12, q.z());
      s.Text(13, r.meta.map_version);
      s.Int(14, int64_t(r.bytes));
      s.Text(15, r.file);
      s.Int(16, int64_t(r.offset));
      if (sqlite3_step(s.get()) != SQLITE_DONE) return fail("insert frame");
      sqlite3_reset(s.get());
    }
  }
  {
    Stmt s(db_, "INSERT OR REPLACE INTO files VALUES(?1, ?2)");
    if (!s.ok()) return fail("prepare file end");
    for (const auto& [file, end] : file_ends) {
      s.Text(1, file);
      s.Int(2, int64_t(end));
      if (sqlite3_step(s.get()) != SQLITE_DONE) return fail("update file end");
      sqlite3_reset(s.get());
    }
  }
  return Exec("COMMIT");
}

StatusOr<uint64_t> FrameIndex::IndexedEnd(const std::string& file) {
  Stmt s(db_, "SELECT indexed_end FROM files WHERE path=?1");
  if (!s.ok()) return Error("prepare file lookup");
  s.Text(1, file);
  const int rc = sqlite3_step(s.get());
  if (rc == SQLITE_ROW) return uint64_t(sqlite3_column_int64(s.get(), 0));
  if (rc != SQLITE_DONE) return Error("file lookup");
  return uint64_t(0);
}

StatusOr<uint64_t> FrameIndex::Count() {
  Stmt s(db_, "SELECT COUNT(*) FROM frames");
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW) return Error("count");
  return uint64_t(sqlite3_column_int64(s.get(), 0));
}

StatusOr<std::vector<FrameRow>> FrameIndex::Query(const FrameQuery& q) {
  // The position filter is a bounding box in SQL, then the exact sphere here.
  const double r = q.near ? q.radius_m : 0;
  const Eigen::Vector3d c = q.near.value_or(Eigen::Vector3d::Zero());
  Stmt s(db_,
         "SELECT vehicle, sensor, sequence, drive, timestamp_ns, tx, ty, tz, qw, qx, qy, qz, "
         "map_version, bytes, file, offset FROM frames WHERE (?1 = '' OR vehicle = ?1) "
         "AND timestamp_ns >= ?2 AND timestamp_ns <= ?3 AND (?4 = 0 OR (tx BETWEEN ?5 AND ?6 AND "
         "ty BETWEEN ?7 AND ?8 AND tz BETWEEN ?9 AND ?10)) "
         "ORDER BY vehicle, timestamp_ns, sensor, sequence");
  if (!s.ok()) return Error("prepare query");
  s.Text(1, q.vehicle);
  s.Int(2, q.from_ns.value_or(INT64_MIN));
  s.Int(3, q.to_ns.value_or(INT64_MAX));
  s.Int(4, q.near ? 1 : 0);
  s.Real(5, c.x() - r);
  s.Real(6, c.x() + r);
  s.Real(7, c.y() - r);
  s.Real(8, c.y() + r);
  s.Real(9, c.z() - r);
  s.Real(10, c.z() + r);
  std::vector<FrameRow> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW && out.size() < q.limit) {
    FrameRow row;
    row.meta.vehicle = s.ColText(0);
    row.meta.sensor_id = uint32_t(sqlite3_column_int64(s.get(), 1));
    row.meta.sequence = uint64_t(sqlite3_column_int64(s.get(), 2));
    row.meta.drive = s.ColText(3);
    row.meta.timestamp_ns = sqlite3_column_int64(s.get(), 4);
    double v[7];
    for (int i = 0; i < 7; ++i) v[i] = sqlite3_column_double(s.get(), 5 + i);
    row.meta.T_map_sensor = Pose::Identity();
    row.meta.T_map_sensor.linear() =
        Eigen::Quaterniond(v[3], v[4], v[5], v[6]).normalized().toRotationMatrix();
    row.meta.T_map_sensor.translation() = Eigen::Vector3d(v[0], v[1], v[2]);
    row.meta.map_version = s.ColText(12);
    row.bytes = uint64_t(sqlite3_column_int64(s.get(), 13));
    row.file = s.ColText(14);
    row.offset = uint64_t(sqlite3_column_int64(s.get(), 15));
    if (q.near && (row.meta.T_map_sensor.translation() - c).norm() > r) continue;
    out.push_back(std::move(row));
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("query");
  return out;
}

}  // namespace dv::server
