#include "frame_query_args.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

namespace dv::cli {
namespace {

// A time is seconds since the Unix epoch ("1733130000.5") or UTC ISO 8601
// ("2026-12-01T10:00:00Z", the Z optional).
StatusOr<int64_t> ParseTimeNs(const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && std::isfinite(s) && std::fabs(s) < 9e9) {
    return int64_t(std::llround(s * 1e9));
  }
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest || (*rest != '\0' && std::string(rest) != "Z")) {
    return Status::InvalidArgument("--" + key + ": '" + text +
                                   "' is neither epoch seconds nor YYYY-MM-DDTHH:MM:SS[Z]");
  }
  return int64_t(timegm(&tm)) * 1'000'000'000;
}

StatusOr<Eigen::Vector3d> ParsePoint(const std::string& text) {
  Eigen::Vector3d p;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lf,%lf,%lf%c", &p.x(), &p.y(), &p.z(), &tail) != 3 ||
      !p.allFinite()) {
    return Status::InvalidArgument("--near: '" + text + "' is not x,y,z");
  }
  return p;
}

}  // namespace

const char* const kFrameQueryUsage =
    "  which frames: [--vehicle V] [--from T] [--to T] [--near x,y,z --radius R] [--limit N]\n"
    "    T: epoch seconds or YYYY-MM-DDTHH:MM:SS[Z] (UTC); from <= t < to\n"
    "  where: [--db INDEX] [--store STORE] [--store-config TIERS.yaml]\n"
    "    INDEX: FILE, sqlite:FILE or postgresql:CONNINFO (default STORE/index.sqlite);\n"
    "    STORE: the server's --store folder (default: INDEX's folder)\n";

std::set<std::string> FrameQueryKeys(std::set<std::string> own) {
  own.insert({"db", "store", "store-config", "vehicle", "from", "to", "near", "radius", "limit"});
  return own;
}

StatusOr<store::FrameQuery> ParseFrameQuery(const Args& args) {
  store::FrameQuery q;
  q.vehicle = args.Get("vehicle");
  for (const char* key : {"from", "to"}) {
    if (!args.Has(key)) continue;
    DV_ASSIGN_OR_RETURN(const int64_t t, ParseTimeNs(key, args.Get(key)));
    (std::string(key) == "from" ? q.from_ns : q.to_ns) = t;
  }
  if (args.Has("near") != args.Has("radius")) {
    return Status::InvalidArgument("--near and --radius go together");
  }
  if (args.Has("near")) {
    DV_ASSIGN_OR_RETURN(q.near, ParsePoint(args.Get("near")));
    DV_ASSIGN_OR_RETURN(q.radius_m, args.GetDouble("radius", 0));
    if (!(q.radius_m >= 0)) return Status::InvalidArgument("--radius: must be >= 0");
  }
  DV_ASSIGN_OR_RETURN(const long limit, args.GetInt("limit", long(q.limit)));
  if (limit < 0) return Status::InvalidArgument("--limit: must be >= 0");
  q.limit = size_t(limit);
  return q;
}

StatusOr<server::Storage> OpenQueryStorage(const Args& args) {
  const std::string db = args.Get("db");
  std::string store = args.Get("store");
  if (store.empty()) {
    if (db.empty()) return Status::InvalidArgument("--db or --store is required");
    if (!std::filesystem::is_regular_file(db)) return Status::NotFound(db + ": no such index");
    store = std::filesystem::path(db).parent_path().string();
    if (store.empty()) store = ".";
  } else if (!std::filesystem::is_directory(store) ||
             (db.empty() && !std::filesystem::is_regular_file(store + "/index.sqlite"))) {
    // Query and export only read: a mistyped --store must fail, not become a new empty store
    // (OpenStorage creates what the server needs).
    return Status::NotFound(store + ": no such store (no " + store + "/index.sqlite)");
  }
  return server::OpenStorage(store, args.Get("store-config"), db);
}

void ReportSkipped(const server::ExportStats& st) {
  if (st.frames_skipped == 0) return;
  std::fprintf(stderr, "%zu frames could not be reconstructed and were skipped:\n",
               st.frames_skipped);
  for (const std::string& why : st.skipped) std::fprintf(stderr, "  %s\n", why.c_str());
  if (st.skipped.size() < st.frames_skipped)
    std::fprintf(stderr, "  (and %zu more)\n", st.frames_skipped - st.skipped.size());
}

}  // namespace dv::cli
