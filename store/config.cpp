#include "dejaview/store/config.h"

#include "dejaview/base/file_util.h"
#include "dejaview/store/credentials.h"

namespace dv::store {
namespace {

constexpr int64_t kMaxBytes = int64_t(1) << 60;

const config::Schema<MemoryConfig>& MemorySchema() {
  static const auto s =
      config::Schema<MemoryConfig>()
          .Int("budget_bytes", &MemoryConfig::budget_bytes, uint64_t(0), uint64_t(kMaxBytes),
               "LRU cache bound; 0 keeps nothing in memory")
          .Int("max_inflight", &MemoryConfig::max_inflight, 1, 256, "read requests at once")
          .Double("bandwidth_mbps", &MemoryConfig::bandwidth_mbps, 1e-3, 1e9,
                  "first guess of MB/s, replaced by measurement");
  return s;
}

const config::Schema<DiskConfig>& DiskSchema() {
  static const auto s =
      config::Schema<DiskConfig>()
          .String("dir", &DiskConfig::dir, "objects and the copy journal (required)")
          .Int("budget_bytes", &DiskConfig::budget_bytes, uint64_t(1), uint64_t(kMaxBytes),
               "hard bound; objects already remote are evicted to stay under it")
          .Bool("direct_io", &DiskConfig::direct_io, "reads bypass the page cache (O_DIRECT)")
          .Int("max_inflight", &DiskConfig::max_inflight, 1, 256, "read requests at once")
          .Double("bandwidth_mbps", &DiskConfig::bandwidth_mbps, 1e-3, 1e9,
                  "first guess of MB/s, replaced by measurement");
  return s;
}

const config::Schema<RemoteConfig>& RemoteSchema() {
  static const auto s =
      config::Schema<RemoteConfig>()
          .String("endpoint", &RemoteConfig::endpoint,
                  "http://host:port of the S3 API; empty: no remote tier")
          .String("bucket", &RemoteConfig::bucket, "bucket (required with an endpoint)")
          .String("region", &RemoteConfig::region, "SigV4 region")
          .String("prefix", &RemoteConfig::prefix, "key prefix of this store's packs")
          .Int<long>("timeout_ms", &RemoteConfig::timeout_ms, 1, 3'600'000, "per request")
          .Int("max_inflight", &RemoteConfig::max_inflight, 1, 256, "read requests at once")
          .Double("bandwidth_mbps", &RemoteConfig::bandwidth_mbps, 1e-3, 1e9,
                  "first guess of MB/s, replaced by measurement");
  return s;
}

const config::Schema<CopierConfig>& CopierSchema() {
  static const auto s =
      config::Schema<CopierConfig>()
          .Int("concurrency", &CopierConfig::concurrency, 1, 64, "pack uploads at once")
          .Int("pack_target_bytes", &CopierConfig::pack_target_bytes, uint64_t(1),
               uint64_t(1) << 30, "coalesce small objects into packs of this size")
          .Int("small_object_bytes", &CopierConfig::small_object_bytes, uint64_t(0),
               uint64_t(1) << 30, "larger objects are a pack of their own")
          .Int("coalesce_ms", &CopierConfig::coalesce_ms, 0, 3'600'000,
               "how long small objects wait for a pack to fill")
          .Int("idle_ms", &CopierConfig::idle_ms, 0, 3'600'000,
               "start copies only after this long without a put (0: at once)")
          .Int("max_delay_ms", &CopierConfig::max_delay_ms, 0, 86'400'000,
               "longest an object waits for an idle gap")
          .String("journal", &CopierConfig::journal, "default <disk.dir>/copy.journal");
  return s;
}

const config::Schema<ReadConfig>& ReadSchema() {
  static const auto s =
      config::Schema<ReadConfig>().Int("chunk_bytes", &ReadConfig::chunk_bytes, uint64_t(4096),
                                       uint64_t(1) << 30, "unit of the multi-path split");
  return s;
}

}  // namespace

const config::Schema<StoreConfig>& StoreSchema() {
  static const auto s = config::Schema<StoreConfig>()
                            .Section("memory", &StoreConfig::memory, MemorySchema())
                            .Section("disk", &StoreConfig::disk, DiskSchema())
                            .Section("remote", &StoreConfig::remote, RemoteSchema())
                            .Section("copier", &StoreConfig::copier, CopierSchema())
                            .Section("read", &StoreConfig::read, ReadSchema());
  return s;
}

Status FinishStoreConfig(const std::string& what, StoreConfig* c) {
  if (c->disk.dir.empty()) {
    return Status::InvalidArgument(what + ": disk.dir: required (the tier that acknowledges)");
  }
  RemoteConfig& r = c->remote;
  if (!r.enabled()) return Status::Ok();
  if (r.endpoint.find("://") == std::string::npos) {
    return Status::InvalidArgument(what + ": remote.endpoint: expected http://host:port, got '" +
                                   r.endpoint + "'");
  }
  if (r.bucket.empty()) return Status::InvalidArgument(what + ": remote.bucket: required");
  if (!r.access_key.empty() && !r.secret_key.empty()) return Status::Ok();  // set by the caller
  auto creds = ResolveAwsCredentials();
  if (!creds.ok()) return Status::InvalidArgument(what + ": remote: " + creds.status().message());
  r.access_key = creds->access_key;
  r.secret_key = creds->secret_key;
  r.session_token = creds->session_token;
  return Status::Ok();
}

Status ApplyStoreConfig(const std::string& yaml, const std::string& what, StoreConfig* config) {
  DV_RETURN_IF_ERROR(config::LoadString(yaml, what, StoreSchema(), config));
  return FinishStoreConfig(what, config);
}

StatusOr<StoreConfig> ParseStoreConfig(const std::string& yaml, const std::string& what) {
  StoreConfig c;
  DV_RETURN_IF_ERROR(ApplyStoreConfig(yaml, what, &c));
  return c;
}

StatusOr<StoreConfig> LoadStoreConfig(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, config::kMaxConfigBytes));
  return ParseStoreConfig(text, path);
}

}  // namespace dv::store
