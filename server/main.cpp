// dejaview-server: upload ingest (docs/upload-protocol.md) into the tiered store and frame index,
// and the map service (docs/map-sync.md).
#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>

#include "dejaview/base/args.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/log.h"
#include "dejaview/base/memory.h"
#include "dejaview/base/version.h"
#include "dejaview/server/ingest.h"
#include "dejaview/store/config.h"

namespace {

// --check-config: what the server would refuse at start, without opening or creating anything:
// the log options (with DEJAVIEW_LOG), and the store's tier config with its credentials.
dv::Status CheckServerConfig(const dv::server::ServerOptions& o, const dv::LogOptions& log) {
  DV_ASSIGN_OR_RETURN(const dv::LogOptions effective, dv::ApplyLogEnvironment(log));
  DV_RETURN_IF_ERROR(dv::ParseLogLevel(effective.level).status().WithContext("--log-level"));
  DV_RETURN_IF_ERROR(dv::MakeLogFormatter(effective.format).status().WithContext("--log-format"));
  dv::store::StoreConfig config;
  config.disk.dir = o.store_dir;
  if (o.store_config.empty()) return dv::store::FinishStoreConfig(o.store_dir, &config);
  DV_ASSIGN_OR_RETURN(const std::string yaml,
                      dv::ReadFileText(o.store_config, dv::config::kMaxConfigBytes));
  return dv::store::ApplyStoreConfig(yaml, o.store_config, &config);
}

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
void OnSignal(int) { g_stop.store(true); }
void OnHangup(int) { g_reload.store(true); }

}  // namespace

int main(int argc, char** argv) {
  dv::RetainFreedMemory();
  auto args =
      dv::cli::Args::Parse(argc - 1, argv + 1,
                           {"listen", "store", "db", "store-config", "port-file", "curve-key",
                            "keys-dir", "vehicle-rate", "vehicle-quota", "metrics",
                            "metrics-port-file", "maps", "log-level", "log-format"},
                           {"check-config", "version", "help"});
  if (!args.ok()) return dv::cli::Fail("server", args.status());
  if (args->Has("version")) {
    std::printf("dejaview-server %s\n", dv::Version());
    return 0;
  }
  if (args->Has("help") || !args->Has("store")) {
    std::printf(
        "usage: dejaview-server --store DIR [--listen tcp://127.0.0.1:5555] [--db INDEX]\n"
        "                       [--store-config TIERS.yaml]   (docs/store.md; default: disk only)\n"
        "  INDEX: FILE, sqlite:FILE or postgresql:CONNINFO (default DIR/index.sqlite)\n"
        "                       [--port-file FILE]   (listen port 0 picks a free port)\n"
        "                       [--curve-key SECRET_FILE --keys-dir DIR]   (DIR/VEHICLE.public;\n"
        "                        SIGHUP reloads it: docs/security.md)\n"
        "                       [--vehicle-rate BYTES_PER_S] [--vehicle-quota BYTES]  (0: none)\n"
        "                       [--metrics 127.0.0.1:9101 [--metrics-port-file FILE]]\n"
        "                       [--maps ROOT]   (serve ROOT's map versions, docs/map-sync.md)\n"
        "                       [--log-level info] [--log-format text|json]   (to stderr;\n"
        "                        DEJAVIEW_LOG=LEVEL,FORMAT overrides)\n"
        "                       [--check-config]   (check the options and --store-config, exit)\n"
        "                       [-h|--help] [--version]   (options also as --key=value)\n");
    return args->Has("help") ? 0 : dv::cli::kUsage;
  }
  dv::server::ServerOptions o;
  o.listen = args->Get("listen", o.listen);
  o.store_dir = args->Get("store");
  o.index_path = args->Get("db");
  o.store_config = args->Get("store-config");
  o.curve_key_file = args->Get("curve-key");
  o.keys_dir = args->Get("keys-dir");
  o.metrics_listen = args->Get("metrics");
  o.metrics_port_file = args->Get("metrics-port-file");
  o.reload = &g_reload;
  const auto rate = args->GetInt("vehicle-rate", 0);
  const auto quota = args->GetInt("vehicle-quota", 0);
  if (!rate.ok()) return dv::cli::Fail("server", rate.status());
  if (!quota.ok()) return dv::cli::Fail("server", quota.status());
  if (*rate < 0 || *quota < 0) {
    return dv::cli::Fail("server", dv::Status::InvalidArgument(
                                       "--vehicle-rate, --vehicle-quota: must not be negative"));
  }
  o.limits.vehicle_bytes_per_s = uint64_t(*rate);
  o.limits.vehicle_quota_bytes = uint64_t(*quota);
  o.maps_root = args->Get("maps");
  dv::LogOptions log;
  log.level = args->Get("log-level", log.level);
  log.format = args->Get("log-format", log.format);
  if (args->Has("check-config")) {
    const dv::Status checked = CheckServerConfig(o, log);
    if (!checked.ok()) return dv::cli::Fail("server", checked);
    std::printf("server options and store config: ok\n");
    return 0;
  }
  const dv::Status logging = dv::SetupLogging(log, "dejaview-server");
  if (!logging.ok()) return dv::cli::Fail("server", logging);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGHUP, OnHangup);
  const std::string port_file = args->Get("port-file");
  const dv::Status s = dv::server::RunServer(o, &g_stop, [&](const std::string& endpoint) {
    spdlog::info("server: listening on {}", endpoint);
    if (!port_file.empty()) {
      const dv::Status w = dv::WriteFileAtomic(port_file, endpoint + "\n");
      if (!w.ok()) spdlog::error("{}", w.ToString());
    }
  });
  if (!s.ok()) return dv::cli::Fail("server", s);
  return 0;
}
