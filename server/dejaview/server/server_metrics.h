// The server's Prometheus metrics (GET /metrics, docs/formats.md "Metrics"): the ingest
// and map service counters and the store's per-tier figures, copied into a registry from the server
// loop. IngestStats is the loop's own (single-threaded) state and StoreMetrics a snapshot, so the
// HTTP thread only ever reads the registry's atomics.
#pragma once

#include <map>
#include <string>

#include "dejaview/base/metrics.h"
#include "dejaview/server/ingest.h"
#include "dejaview/server/map_service.h"
#include "dejaview/store/store.h"

namespace dv::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(metrics::Registry* registry) : registry_(registry) {}
  // Counters advance by what changed since the last call; gauges take the new values.
  void Update(const IngestStats& ingest, const store::StoreMetrics& store,
              const MapServiceStats& maps);

 private:
  void Count(const char* name, const char* help, uint64_t total, uint64_t* last);
  metrics::Registry* registry_;
  IngestStats last_;
  MapServiceStats last_maps_;
  uint64_t last_copied_ = 0, last_packs_ = 0, last_copy_errors_ = 0;
  std::map<std::string, store::TierMetrics> last_tiers_;
};

}  // namespace dv::server
