// dejaview-server: upload ingest (docs/upload-protocol.md) into the tiered store and frame index,
// and the map service (docs/map-sync.md).
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>

#include "dejaview/base/args.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/memory.h"
#include "dejaview/server/ingest.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
void OnSignal(int) { g_stop.store(true); }
void OnHangup(int) { g_reload.store(true); }

}  // namespace

int main(int argc, char** argv) {
  dv::RetainFreedMemory();
  auto args = dv::cli::Args::Parse(
      argc - 1, argv + 1,
      {"listen", "store", "db", "store-config", "port-file", "curve-key", "keys-dir",
       "vehicle-rate", "vehicle-quota", "metrics", "metrics-port-file", "maps"},
      {"help"});
  if (!args.ok()) return dv::cli::Fail("server", args.status());
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
        "                       [--maps ROOT]   (serve ROOT's map versions, docs/map-sync.md)\n");
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
