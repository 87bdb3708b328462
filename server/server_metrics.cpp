#include "dejaview/server/server_metrics.h"

namespace dv::server {

void ServerMetrics::Count(const char* name, const char* help, uint64_t total, uint64_t* last) {
  registry_->GetCounter(name, help).Inc(double(total - *last));
  *last = total;
}

void ServerMetrics::Update(const IngestStats& s, const store::StoreMetrics& m,
                           const MapServiceStats& maps) {
  Count("dejaview_server_map_requests_total", "map-sync requests (docs/map-sync.md)", maps.requests,
        &last_maps_.requests);
  Count("dejaview_server_map_chunks_total", "map file chunks served", maps.chunks_served,
        &last_maps_.chunks_served);
  Count("dejaview_server_map_bytes_total", "map file bytes served", maps.bytes_served,
        &last_maps_.bytes_served);
  Count("dejaview_server_map_errors_total", "map-sync requests answered with ERROR", maps.errors,
        &last_maps_.errors);
  Count("dejaview_server_batches_acked_total", "DATA batches ACKed", s.batches_acked,
        &last_.batches_acked);
  Count("dejaview_server_batches_nacked_total", "messages NACKed (any reason)", s.batches_nacked,
        &last_.batches_nacked);
  Count("dejaview_server_records_stored_total", "records stored (durable and indexed)",
        s.records_stored, &last_.records_stored);
  Count("dejaview_server_records_duplicate_total", "records already stored (resends)",
        s.records_duplicate, &last_.records_duplicate);
  Count("dejaview_server_bytes_received_total", "upload message bytes", s.bytes_received,
        &last_.bytes_received);
  Count("dejaview_server_auth_refused_total", "CURVE handshakes with a key not enrolled",
        s.auth_refused, &last_.auth_refused);
  Count("dejaview_server_auth_impersonation_total", "HELLOs naming another vehicle than the key's",
        s.auth_impersonation, &last_.auth_impersonation);
  Count("dejaview_server_auth_revoked_total", "messages on connections of revoked keys",
        s.auth_revoked, &last_.auth_revoked);
  Count("dejaview_server_throttled_total", "DATA above the vehicle's rate limit", s.throttled,
        &last_.throttled);
  Count("dejaview_server_over_quota_total", "DATA above the vehicle's storage quota", s.over_quota,
        &last_.over_quota);
  Count("dejaview_server_records_rejected_total",
        "records whose payload is not a readable delta frame (not stored)", s.records_rejected,
        &last_.records_rejected);
  Count("dejaview_server_unknown_map_total", "DATA deferred: a map version not in the maps root",
        s.unknown_map, &last_.unknown_map);
  Count("dejaview_server_key_reloads_total", "keys directory reloads", s.key_reloads,
        &last_.key_reloads);
  Count("dejaview_server_key_files_rejected_total", "key files skipped at load",
        s.key_files_rejected, &last_.key_files_rejected);
  Count("dejaview_store_objects_copied_total", "objects copied to the remote tier",
        m.objects_copied, &last_copied_);
  Count("dejaview_store_packs_uploaded_total", "packs uploaded to the remote tier",
        m.packs_uploaded, &last_packs_);
  Count("dejaview_store_copy_errors_total", "failed remote copies (retried)", m.copy_errors,
        &last_copy_errors_);
  registry_->GetGauge("dejaview_store_copy_pending_objects", "objects not yet remote")
      .Set(double(m.copy_pending_objects));
  registry_->GetGauge("dejaview_store_copy_pending_bytes", "bytes not yet remote (copy lag)")
      .Set(double(m.copy_pending_bytes));
  registry_->GetGauge("dejaview_store_copy_lag_seconds", "age of the oldest object not yet remote")
      .Set(m.copy_lag_s);
  for (const store::TierMetrics& t : m.tiers) {
    const metrics::Labels tier = {{"tier", t.tier}};
    store::TierMetrics& last = last_tiers_[t.tier];
    registry_->GetGauge("dejaview_store_tier_bytes", "bytes held", tier).Set(double(t.bytes));
    registry_->GetGauge("dejaview_store_tier_objects", "objects held", tier).Set(double(t.objects));
    registry_->GetGauge("dejaview_store_tier_queue_depth", "reads queued", tier)
        .Set(double(t.queue_depth));
    registry_->GetGauge("dejaview_store_tier_inflight", "reads in flight", tier)
        .Set(double(t.inflight));
    registry_
        ->GetGauge("dejaview_store_tier_read_bandwidth_mbps", "estimated aggregate read MB/s", tier)
        .Set(t.read_bandwidth_mbps);
    registry_->GetCounter("dejaview_store_tier_hits_total", "objects read from the tier", tier)
        .Inc(double(t.hits - last.hits));
    registry_
        ->GetCounter("dejaview_store_tier_misses_total", "lookups the tier could not serve", tier)
        .Inc(double(t.misses - last.misses));
    registry_->GetCounter("dejaview_store_tier_read_bytes_total", "bytes read from the tier", tier)
        .Inc(double(t.read_bytes - last.read_bytes));
    last = t;
  }
}

}  // namespace dv::server
