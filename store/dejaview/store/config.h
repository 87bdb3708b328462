// Store configuration, one YAML block per tier (example: config/store.yaml, keys in
// docs/store.md), described by base/config.h's Schema like every other component. Remote
// credentials never live in the file: they come from the AWS credential chain (environment, then
// the shared credentials file; credentials.h), as with every S3 tool.
#pragma once

#include <cstdint>
#include <string>

#include "dejaview/base/config.h"
#include "dejaview/base/status.h"
#include "dejaview/store/s3_client.h"

namespace dv::store {

struct TierLimits {
  int max_inflight = 4;          // read requests in flight on this tier at once
  double bandwidth_mbps = 1000;  // first guess of the tier's MB/s, replaced by measurements
};

struct MemoryConfig {
  uint64_t budget_bytes = 256ull << 20;
  int max_inflight = 4;
  double bandwidth_mbps = 20000;
  TierLimits limits() const { return {max_inflight, bandwidth_mbps}; }
};

struct DiskConfig {
  std::string dir;  // required
  uint64_t budget_bytes = 64ull << 30;
  bool direct_io = false;  // reads bypass the page cache (O_DIRECT)
  int max_inflight = 4;
  double bandwidth_mbps = 2000;
  TierLimits limits() const { return {max_inflight, bandwidth_mbps}; }
};

// The YAML block is flat (remote.endpoint, remote.prefix, ...), so the S3 connection is a base
// rather than a member: a Schema entry names a field of the block's own struct.
struct RemoteConfig : S3Config {
  std::string prefix;
  int max_inflight = 8;
  double bandwidth_mbps = 500;
  bool enabled() const { return !endpoint.empty(); }  // no endpoint: no remote tier
  TierLimits limits() const { return {max_inflight, bandwidth_mbps}; }
};

// The lazy background copy to the remote tier.
struct CopierConfig {
  int concurrency = 4;                       // packs uploading at once
  uint64_t pack_target_bytes = 8ull << 20;   // coalesce small objects up to this size
  uint64_t small_object_bytes = 1ull << 20;  // larger objects travel as a pack of one
  int coalesce_ms = 20;                      // wait this long for a pack to fill
  // Lazy: start a copy only once no Put came for idle_ms, so that copies fill the gaps between
  // ingest bursts instead of contending with its fsyncs (0: copy at once); max_delay_ms bounds
  // how long the oldest object waits for such a gap under continuous ingest.
  int idle_ms = 100;
  int max_delay_ms = 10'000;
  std::string journal;  // default: <disk.dir>/copy.journal
};

struct ReadConfig {
  uint64_t chunk_bytes = 1ull << 20;  // unit of the multi-path split
};

struct StoreConfig {
  MemoryConfig memory;
  DiskConfig disk;
  RemoteConfig remote;
  CopierConfig copier;
  ReadConfig read;
};

const config::Schema<StoreConfig>& StoreSchema();
// Checks what the schema cannot (disk.dir set, remote endpoint form and bucket) and, with a
// remote tier, takes its credentials from the AWS credential chain; what names the source in
// errors.
Status FinishStoreConfig(const std::string& what, StoreConfig* config);
// YAML text applied onto *config (keys the text sets replace the values already there), then
// FinishStoreConfig.
Status ApplyStoreConfig(const std::string& yaml, const std::string& what, StoreConfig* config);
StatusOr<StoreConfig> ParseStoreConfig(const std::string& yaml, const std::string& what);
StatusOr<StoreConfig> LoadStoreConfig(const std::string& path);

}  // namespace dv::store
