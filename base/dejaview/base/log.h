// Logging on spdlog, set up once per process. Two formats: "text" for people
//   2026-12-02T20:18:46.123Z info [dejaview] opened drive 00 (10 frames)
// and "json", one object per line for log collectors (the message JSON-escaped)
//   {"ts":"2026-12-02T20:18:46.123456Z","level":"info","logger":"dejaview","msg":"..."}
// Timestamps are UTC. Logs go to stderr (journald takes a service's stderr) so that stdout stays
// the command's output. Level and format come from LogOptions (a component's `log:` section),
// each overridden by the environment variable DEJAVIEW_LOG when it is set: a comma-separated list
// of a level, a format or both ("debug", "json", "warn,json").
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "dejaview/base/config.h"
#include "dejaview/base/status.h"

namespace dv {

struct LogOptions {
  std::string level = "info";   // trace, debug, info, warn, error, critical, off
  std::string format = "text";  // text or json
};
// The `log:` section of a component's config.
const config::Schema<LogOptions>& LogOptionsSchema();

StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& name);
// A formatter for "text" or "json"; any sink can use it (tests attach one to a string sink).
StatusOr<std::unique_ptr<spdlog::formatter>> MakeLogFormatter(const std::string& format);
// options with DEJAVIEW_LOG applied; a bad value is an error naming the variable.
StatusOr<LogOptions> ApplyLogEnvironment(LogOptions options);
// Installs the default logger named `name` on stderr, with DEJAVIEW_LOG applied.
Status SetupLogging(const LogOptions& options, const std::string& name = "dejaview");

}  // namespace dv
