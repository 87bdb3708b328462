// dejaview-agent: the vehicle agent (see agent/dejaview/agent/agent.h, config/agent.yaml).
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "dejaview/agent/agent.h"
#include "dejaview/base/args.h"
#include "dejaview/base/memory.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  dv::RetainFreedMemory();
  auto args = dv::cli::Args::Parse(argc - 1, argv + 1, {"config", "metrics-port-file"},
                                   {"exit-when-drained", "help"});
  if (!args.ok()) return dv::cli::Fail("agent", args.status());
  if (args->Has("help") || !args->Has("config")) {
    std::printf(
        "usage: dejaview-agent --config agent.yaml [--exit-when-drained]\n"
        "                      [--metrics-port-file FILE]\n");
    return args->Has("help") ? 0 : dv::cli::kUsage;
  }
  auto config = dv::agent::LoadAgentConfig(args->Get("config"));
  if (!config.ok()) return dv::cli::Fail("agent", config.status());
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  dv::agent::RunOptions options;
  options.exit_when_drained = args->Has("exit-when-drained");
  options.metrics_port_file = args->Get("metrics-port-file");
  dv::agent::Agent agent(std::move(config).value());
  const dv::Status s = agent.Run(&g_stop, options);
  if (!s.ok()) return dv::cli::Fail("agent", s);
  return 0;
}
