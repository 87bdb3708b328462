// dejaview-agent: the vehicle agent (see agent/dejaview/agent/agent.h, config/agent.yaml).
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "dejaview/agent/agent.h"
#include "dejaview/base/args.h"
#include "dejaview/base/log.h"
#include "dejaview/base/memory.h"
#include "dejaview/base/version.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  dv::RetainFreedMemory();
  auto args = dv::cli::Args::Parse(argc - 1, argv + 1, {"config", "metrics-port-file"},
                                   {"exit-when-drained", "check-config", "version", "help"});
  if (!args.ok()) return dv::cli::Fail("agent", args.status());
  if (args->Has("version")) {
    std::printf("dejaview-agent %s\n", dv::Version());
    return 0;
  }
  if (args->Has("help") || !args->Has("config")) {
    std::printf(
        "usage: dejaview-agent --config agent.yaml [--exit-when-drained]\n"
        "                      [--metrics-port-file FILE] [--check-config] [--version]\n"
        "  --config FILE             the agent's YAML config (config/agent.yaml)\n"
        "  --check-config            report every problem of the config and exit (0: none)\n"
        "  --exit-when-drained       offline: exit once the source drive is uploaded\n"
        "  --metrics-port-file FILE  write the bound metrics port (metrics_listen port 0)\n"
        "  -h, --help                this text;  --version  the version\n"
        "Options also take the form --key=value. Logs go to stderr (config log.level,\n"
        "log.format text|json; DEJAVIEW_LOG overrides the level).\n");
    return args->Has("help") ? 0 : dv::cli::kUsage;
  }
  auto config = dv::agent::LoadAgentConfig(args->Get("config"));
  if (!config.ok()) return dv::cli::Fail("agent", config.status());
  if (args->Has("check-config")) {
    std::printf("%s: ok\n", args->Get("config").c_str());
    return 0;
  }
  const dv::Status logging = dv::SetupLogging(config->log, "dejaview-agent");
  if (!logging.ok()) return dv::cli::Fail("agent", logging);
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
