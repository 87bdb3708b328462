// Store configuration, one YAML block per tier (example: config/store.yaml, keys in
// docs/store.md). Remote credentials never live in the file: they come from the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), as with every S3 tool.
#pragma once

#include <cstdint>
#include <string>

#include "dejaview/base/status.h"
#include "dejaview/store/s3_client.h"

namespace dv::store {

struct TierLimits {
  int max_inflight = 4;          // read requests in flight on this tier at once
  double bandwidth_mbps = 1000;  // first guess of the tier's MB/s, replaced by measurements
};

struct StoreConfig {
  uint64_t memory_budget_bytes = 256ull << 20;
  TierLimits memory{4, 20000};
  std::string disk_dir;  // required
  uint64_t disk_budget_bytes = 64ull << 30;
  bool disk_direct_io = false;  // reads bypass the page cache (O_DIRECT)
  TierLimits disk{4, 2000};
  bool remote_enabled = false;
  S3Config s3;
  std::string remote_prefix;
  TierLimits remote{8, 500};
  // Copier: the lazy background copy to the remote tier.
  int copy_concurrency = 4;                  // packs uploading at once
  uint64_t pack_target_bytes = 8ull << 20;   // coalesce small objects up to this size
  uint64_t small_object_bytes = 1ull << 20;  // larger objects travel as a pack of one
  int coalesce_ms = 20;                      // wait this long for a pack to fill
  std::string journal_path;                  // default: <disk_dir>/copy.journal
  // Reads: chunk size of the multi-path split.
  uint64_t read_chunk_bytes = 1ull << 20;
};

// Parses YAML text; what names the source in errors ("store.yaml"). Reads credentials from
// the environment when a remote block is present.
StatusOr<StoreConfig> ParseStoreConfig(const std::string& yaml, const std::string& what);
StatusOr<StoreConfig> LoadStoreConfig(const std::string& path);

}  // namespace dv::store
