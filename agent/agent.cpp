#include "dejaview/agent/agent.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <thread>
#include <vector>

#include "dejaview/agent/map_sync.h"
#include "dejaview/agent/source_epoch.h"
#include "dejaview/agent/subscriber.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/metrics_http.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/map_root.h"
#include "dejaview/maps/route_map.h"

namespace dv::agent {

using Clock = std::chrono::steady_clock;

namespace {

std::string TodayDrive() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "drive-%Y%m%d", &tm);
  return buf;
}

}  // namespace

Agent::Agent(AgentConfig config)
    : config_(std::move(config)),
      queue_(size_t(config_.queue_frames)),
      encode_seconds_(
          registry_.GetHistogram("dejaview_agent_encode_seconds", "Wall time to encode one frame.",
                                 {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1})) {
  metrics::RegisterBuildInfo(&registry_, "dejaview-agent");
  if (config_.drive.empty()) config_.drive = TodayDrive();
}

Agent::~Agent() = default;

Status Agent::ReadDrive(const std::atomic<bool>* stop) {
  DV_ASSIGN_OR_RETURN(const Drive drive, OpenDrive(config_.source_drive));
  const uint64_t epoch = DriveEpoch(config_.source_drive);
  const auto period = config_.source_rate_hz > 0
                          ? std::chrono::duration<double>(1.0 / config_.source_rate_hz)
                          : std::chrono::duration<double>(0);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < drive.size() && !stop->load(); ++i) {
    Frame f;
    f.sensor_id = config_.sensors.front().id;
    f.source_epoch = epoch;
    f.sequence = i;
    // A drive's timestamps are seconds from its start; frames without them are 10 Hz.
    const double t_s = drive.timestamps_s.empty() ? 0.1 * double(i) : drive.timestamps_s[i];
    f.timestamp_ns = int64_t(std::llround(t_s * 1e9));
    if (!drive.poses_prior.empty()) {
      f.T_map_sensor = drive.poses_prior[i];
      f.has_pose = true;
    } else if (!drive.poses.empty()) {
      f.T_map_sensor = drive.poses[i];
      f.has_pose = true;
    }
    DV_ASSIGN_OR_RETURN(f.cloud, ReadPointCloudFile(drive.frame_paths[i]));
    ++stats_.frames_in;
    // A recorded drive must lose nothing: the drive source waits for room in the queue (the
    // counted drop-oldest policy is for live topics, which cannot wait).
    if (period.count() > 0) {
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<Clock::duration>(period * double(i)));
    }
    if (!queue_.PushWait(std::move(f))) break;
  }
  return Status::Ok();
}

std::string Agent::CurrentMapDir() {
  std::lock_guard<std::mutex> lock(map_mu_);
  return map_dir_;
}

void Agent::EncodeLoop() {
  // RouteMap caches tiles and is not thread-safe: each worker has its own, sharing the budget.
  std::unique_ptr<maps::RouteMap> map;
  codec::Encoder delta(nullptr), intra(nullptr);  // frames without a pose are coded intra
  uint64_t generation = 0;
  auto open_map = [&] {
    generation = map_generation_;
    const std::string dir = CurrentMapDir();
    delta = codec::Encoder(nullptr);
    map.reset();
    if (dir.empty()) return;
    auto m = maps::OpenMap(dir, size_t(config_.map_memory_bytes / config_.encoder_threads));
    if (m.ok()) {
      map = std::move(m).value();
      delta = codec::Encoder(map.get(), still_);
    } else {
      spdlog::error("agent: {}; frames are intra-coded", m.status().ToString());
    }
  };
  open_map();
  codec::EncoderParams params;
  params.tolerance_m = config_.tolerance_m;
  params.residual_precision_m = config_.residual_precision_m;
  params.selection_radius_m = config_.selection_radius_m;
  params.intensity = config_.intensity;
  params.backend = config_.encoder_backend;
  params.threads = config_.frame_threads;
  for (;;) {
    std::optional<Frame> f = queue_.Pop();
    if (!f) return;
    if (map_generation_ != generation) open_map();
    const Clock::time_point t0 = Clock::now();
    codec::FrameInfo info;
    info.sequence = f->sequence;
    info.timestamp_ns = f->timestamp_ns;
    info.sensor_id = f->sensor_id;
    codec::EncodeReport report;
    codec::Encoder& encoder = f->has_pose ? delta : intra;
    auto payload = encoder.Encode(f->cloud, f->T_map_sensor, info, params, &report);
    stats_.points_non_finite += report.non_finite_points;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!payload.ok()) {
      ++stats_.frames_failed;
      spdlog::error("agent: encode {}/{}: {}", f->sensor_id, f->sequence,
                    payload.status().ToString());
      continue;
    }
    if (map) stats_.map_tiles_loaded = map->loaded_tiles();
    transport::RecordMeta meta;
    meta.vehicle = config_.vehicle;
    meta.drive = config_.drive;
    meta.sensor_id = f->sensor_id;
    meta.source_epoch = f->source_epoch;
    meta.sequence = f->sequence;
    meta.timestamp_ns = f->timestamp_ns;
    meta.map_version = map && f->has_pose && !report.intra_fallback ? map->version() : "";
    meta.T_map_sensor = report.T_map_sensor;  // the refined pose the payload carries
    auto id = spool_->Append(meta, payload->data(), payload->size());
    if (!id.ok()) {
      ++stats_.frames_failed;
      spdlog::error("agent: frame {}/{}: {}", f->sensor_id, f->sequence, id.status().ToString());
      continue;
    }
    ++stats_.frames_encoded;
    stats_.bytes_raw += 16 * f->cloud.size();
    stats_.bytes_encoded += payload->size();
    encode_seconds_.Observe(ms / 1000);
  }
}

std::string Agent::RenderMetrics() {
  // The agent's own totals live in AgentStats (its hot paths' atomics), the spool's and the
  // uploader's in theirs: each scrape copies them into the registry, which renders.
  auto counter = [&](const char* name, const char* help, double total) {
    registry_.GetCounter(std::string("dejaview_agent_") + name, help).SetTotal(total);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    registry_.GetGauge(std::string("dejaview_agent_") + name, help).Set(v);
  };
  counter("frames_in_total", "Frames received from the sources.", double(stats_.frames_in));
  counter("frames_encoded_total", "Frames encoded and spooled.", double(stats_.frames_encoded));
  counter("frames_dropped_queue_total", "Frames dropped from the full queue (oldest first).",
          double(queue_.dropped()));
  counter("frames_no_pose_total", "Frames without a pose at their stamp (coded intra).",
          double(stats_.frames_no_pose));
  counter("frames_failed_total", "Frames lost to an encoder or spool error (logged).",
          double(stats_.frames_failed));
  counter("points_non_finite_total", "Points with a NaN or infinite coordinate, dropped.",
          double(stats_.points_non_finite));
  counter("source_epochs_total", "Source epochs started (docs/wire.md).",
          double(stats_.source_epochs));
  counter("source_epoch_write_errors_total", "Failed or damaged writes of the EPOCH file.",
          double(stats_.epoch_write_errors));
  for (size_t r = 0; r < size_t(transport::Reject::kCount); ++r) {
    registry_
        .GetCounter("dejaview_agent_wire_rejected_total", "Live messages rejected, by reason.",
                    {{"reason", transport::RejectName(transport::Reject(r))}})
        .SetTotal(double(stats_.wire_rejected[r].load()));
  }
  counter("bytes_raw_total", "Input bytes encoded (16 per point).", double(stats_.bytes_raw));
  counter("bytes_encoded_total", "Encoded payload bytes.", double(stats_.bytes_encoded));
  gauge("compression_ratio", "bytes_raw_total / bytes_encoded_total (0 before the first frame).",
        stats_.bytes_encoded ? double(stats_.bytes_raw) / double(stats_.bytes_encoded) : 0.0);
  gauge("queue_depth", "Frames waiting for an encoder.", double(queue_.size()));
  gauge("queue_high_water", "Most frames ever waiting at once.", double(queue_.high_water()));
  if (spool_) {
    const transport::SpoolStats s = spool_->stats();
    gauge("spool_bytes", "Spool bytes on disk.", double(s.bytes_on_disk));
    gauge("spool_records_pending", "Spooled records not yet acknowledged by the server.",
          double(s.records_pending));
    gauge("spool_oldest_pending_timestamp_seconds",
          "Frame timestamp of the oldest unacknowledged record.",
          double(s.oldest_unacked_timestamp_ns) / 1e9);
    counter("spool_records_dropped_budget_total", "Records dropped to keep the spool budget.",
            double(s.records_dropped_budget));
    counter("spool_segments_dropped_budget_total", "Segments dropped to keep the spool budget.",
            double(s.segments_dropped_budget));
    gauge("spool_corrupt_blocks", "Damaged spool blocks skipped since start.",
          double(s.corrupt_blocks));
    gauge("spool_records_lost_corrupt", "Records lost to spool damage since start.",
          double(s.records_lost_corrupt));
    gauge("spool_cursor_resets", "Damaged or missing CURSOR files since start.",
          double(s.cursor_resets));
    gauge("spool_torn_tail_bytes", "Bytes of a torn tail truncated at open.",
          double(s.torn_tail_bytes));
  }
  if (uploader_) {
    const UploaderStats& u = uploader_->stats();
    counter("upload_bytes_total", "Upload message bytes sent.", double(u.bytes_sent));
    counter("upload_batches_sent_total", "DATA batches sent.", double(u.batches_sent));
    counter("upload_batches_acked_total", "DATA batches acknowledged.", double(u.batches_acked));
    counter("upload_batches_resent_total", "DATA batches sent again.", double(u.batches_resent));
    counter("upload_batches_rejected_total", "DATA batches the server refused.",
            double(u.batches_rejected));
    counter("upload_batches_deferred_total", "DATA batches the server deferred.",
            double(u.batches_deferred));
    counter("upload_auth_refused_total", "Connections refused by the server's key check.",
            double(u.auth_refused));
    counter("upload_records_acked_total", "Records acknowledged.", double(u.records_acked));
    counter("upload_records_duplicate_total", "Records the server already had.",
            double(u.records_duplicate));
    counter("upload_records_rejected_total", "Records the server refused.",
            double(u.records_rejected));
    counter("upload_reconnects_total", "Reconnections to the server.", double(u.reconnects));
    gauge("upload_inflight_batches", "Batches sent and not yet answered.", double(u.inflight));
    gauge("upload_gate_open", "1 when the upload gate (parked, link, cap) lets batches go.",
          u.gate_open ? 1 : 0);
    gauge("upload_connected", "1 while connected to the server.", u.connected ? 1 : 0);
  }
  gauge("map_tiles_loaded", "Map tiles loaded by the encoders.", double(stats_.map_tiles_loaded));
  counter("map_sync_attempts_total", "Map sync attempts.", double(stats_.map_sync_attempts));
  counter("map_sync_errors_total", "Failed map sync attempts (the map in use is kept).",
          double(stats_.map_sync_errors));
  counter("map_versions_pruned_total", "Old synced map versions removed.",
          double(stats_.map_versions_pruned));
  counter("map_versions_switched_total", "Map versions switched to.",
          double(stats_.map_versions_switched));
  counter("map_tiles_fetched_total", "Map tiles fetched by map sync.",
          double(stats_.map_tiles_fetched));
  counter("map_tiles_reused_total", "Map tiles reused (checksum unchanged).",
          double(stats_.map_tiles_reused));
  counter("map_bytes_fetched_total", "Manifest and tile bytes fetched.",
          double(stats_.map_bytes_fetched));
  counter("map_sync_wire_bytes_total", "Map sync request and reply bytes.",
          double(stats_.map_bytes_on_wire));
  return metrics::RenderExposition(&registry_);
}

void Agent::MapSyncLoop(const std::atomic<bool>* stop, const transport::CurveKeys& keys) {
  const auto interval = std::chrono::milliseconds(config_.map_sync.interval_ms);
  bool was_connected = false;
  Clock::time_point next{};
  while (!stop->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // Map sync shares the upload's link: it runs while the uploader is connected, at once on
    // each new connection and every interval after.
    const bool connected = uploader_->stats().connected;
    const Clock::time_point now = Clock::now();
    if (!connected || (was_connected && now < next)) {
      was_connected = connected;
      continue;
    }
    was_connected = true;
    next = now + interval;
    ++stats_.map_sync_attempts;
    const std::string current = CurrentMapDir();
    auto socket = MapSyncSocket::Connect(config_, keys, stop);
    StatusOr<MapSyncResult> r = socket.status();
    if (socket.ok()) {
      r = SyncMap([&](const std::vector<uint8_t>& req) { return (*socket)->Exchange(req); },
                  current, config_.map_sync.root, uint32_t(config_.map_sync.chunk_bytes));
    }
    if (!r.ok()) {
      if (stop->load()) break;  // interrupted by shutdown, not a failure
      ++stats_.map_sync_errors;
      spdlog::error("agent: map sync failed, keeping {}: {}", current.empty() ? "no map" : current,
                    r.status().ToString());
      continue;
    }
    stats_.map_tiles_fetched += r->tiles_fetched;
    stats_.map_tiles_reused += r->tiles_reused;
    stats_.map_bytes_fetched += r->bytes_fetched;
    stats_.map_bytes_on_wire += r->bytes_on_wire;
    if (!r->changed) continue;
    {
      std::lock_guard<std::mutex> lock(map_mu_);
      map_dir_ = config_.map_sync.root + "/" + r->version;
    }
    ++map_generation_;
    ++stats_.map_versions_switched;
    // Encoders move to the new version at their next frame; the one they leave stays until the
    // next switch, and every older synced version goes.
    const std::string previous = std::filesystem::path(current).filename().string();
    auto pruned = maps::PruneVersions(config_.map_sync.root, {r->version, previous});
    if (pruned.ok()) {
      stats_.map_versions_pruned += *pruned;
    } else {
      spdlog::error("agent: pruning old map versions: {}", pruned.status().ToString());
    }
    spdlog::info(
        "agent: map version {} synced ({} tiles fetched, {} reused, {} bytes); new frames "
        "use it",
        r->version, r->tiles_fetched, r->tiles_reused, r->bytes_fetched);
  }
}

Status Agent::Run(const std::atomic<bool>* stop, const RunOptions& options) {
  DV_RETURN_IF_ERROR(codec::CheckBackend(config_.encoder_backend).WithContext("encoder_backend"));
  map_dir_ = config_.map_dir;
  if (config_.map_sync.enabled) {
    DV_ASSIGN_OR_RETURN(const std::string latest, maps::ReadLatest(config_.map_sync.root));
    if (!latest.empty()) map_dir_ = config_.map_sync.root + "/" + latest;
    spdlog::info("agent: map sync on (root {}); starting with {}", config_.map_sync.root,
                 map_dir_.empty() ? "no map" : map_dir_);
  }
  DV_ASSIGN_OR_RETURN(spool_, transport::Spool::Open(config_.spool));
  {
    const transport::SpoolStats s = spool_->stats();
    spdlog::info(
        "agent: spool {}: {} pending records, {} corrupt blocks skipped, {} torn bytes truncated, "
        "{} records lost to damage",
        config_.spool.dir, s.records_pending, s.corrupt_blocks, s.torn_tail_bytes,
        s.records_lost_corrupt);
    if (s.records_lost_corrupt > 0) {
      spdlog::error("agent: spool {}: {} records were damaged on disk and are lost",
                    config_.spool.dir, s.records_lost_corrupt);
    }
    if (s.cursor_resets > 0) {
      spdlog::warn(
          "agent: spool {}: CURSOR was damaged or missing; resending from id {} (the "
          "server deduplicates)",
          config_.spool.dir, s.acked_below);
    }
  }
  std::vector<uint32_t> sensors;
  for (const SensorConfig& s : config_.sensors) sensors.push_back(s.id);
  transport::CurveKeys keys;
  if (!config_.upload.curve_key_file.empty()) {
    DV_ASSIGN_OR_RETURN(keys, transport::LoadCurveKeyFile(config_.upload.curve_key_file));
  }
  uploader_ =
      std::make_unique<Uploader>(config_.upload, config_.vehicle, sensors, spool_.get(), keys);

  std::unique_ptr<metrics::MetricsHttp> http;
  if (!config_.metrics_listen.empty()) {
    DV_ASSIGN_OR_RETURN(http, metrics::MetricsHttp::Start(config_.metrics_listen,
                                                          [this] { return RenderMetrics(); }));
    spdlog::info("agent: metrics on http://{}/metrics (port {})", config_.metrics_listen,
                 http->port());
    if (!options.metrics_port_file.empty()) {
      DV_RETURN_IF_ERROR(
          WriteFileAtomic(options.metrics_port_file, std::to_string(http->port()) + "\n"));
    }
  }
  std::atomic<bool> stop_uploader{false};
  std::thread upload_thread([&] { uploader_->Run(&stop_uploader); });
  std::thread map_sync_thread;
  if (config_.map_sync.enabled)
    map_sync_thread = std::thread([&] { MapSyncLoop(&stop_uploader, keys); });
  std::vector<std::thread> workers;
  for (int i = 0; i < config_.encoder_threads; ++i) workers.emplace_back([this] { EncodeLoop(); });
  std::atomic<bool> source_done{false};
  Status source_status;
  // Sources: a drive folder (offline), else the live LiDAR topics; with neither (an empty
  // lidar_endpoint) the agent only drains its spool.
  EpochSource epochs = EpochSource::Open(config_.spool.dir);
  if (epochs.damaged()) {
    ++stats_.epoch_write_errors;
    spdlog::error("agent: {}/EPOCH is damaged; new source epochs start from the wall clock",
                  config_.spool.dir);
  }
  Subscriber subscriber(config_, &queue_, &stats_, &epochs);
  const bool live = config_.source_drive.empty() && !config_.lidar_endpoint.empty();
  if (!live && config_.source_drive.empty())
    spdlog::info("agent: no source: uploading the spool only");
  std::thread source([&] {
    if (!config_.source_drive.empty()) source_status = ReadDrive(stop);
    if (live) subscriber.Run(stop);
    source_done = true;
  });
  while (!stop->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const Status s = spool_->SyncIfDue();
    if (!s.ok()) spdlog::error("agent: {}", s.ToString());
    if (source_done && !source_status.ok()) break;
    if (options.exit_when_drained && source_done && queue_.size() == 0 &&
        stats_.frames_encoded + stats_.frames_failed + queue_.dropped() == stats_.frames_in) {
      const transport::SpoolStats st = spool_->stats();
      if (st.acked_below == st.next_id) break;
    }
  }
  // Drain: sources first, then every queued frame into the spool, then the uploader.
  source.join();
  queue_.Close();
  for (std::thread& w : workers) w.join();
  const Status synced = spool_->SyncIfDue(true);
  stop_uploader = true;
  upload_thread.join();
  if (map_sync_thread.joinable()) map_sync_thread.join();
  const transport::SpoolStats st = spool_->stats();
  spdlog::info("agent: stopped; {} frames in, {} encoded, {} dropped; {} records pending upload",
               stats_.frames_in.load(), stats_.frames_encoded.load(), queue_.dropped(),
               st.records_pending);
  DV_RETURN_IF_ERROR(source_status);
  return synced;
}

}  // namespace dv::agent
