#include "dejaview/base/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace dv {
namespace {

constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

// %* in the JSON pattern: the message as the inside of a JSON string (RFC 8259 escapes).
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (char c : msg.payload) {
      switch (c) {
        case '"':
          dest.append(std::string_view("\\\""));
          break;
        case '\\':
          dest.append(std::string_view("\\\\"));
          break;
        case '\n':
          dest.append(std::string_view("\\n"));
          break;
        case '\t':
          dest.append(std::string_view("\\t"));
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", unsigned(c));
            dest.append(std::string_view(buf, 6));
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

const config::Schema<LogOptions>& LogOptionsSchema() {
  static const auto schema =
      config::Schema<LogOptions>()
          .Enum("level", &LogOptions::level, {std::begin(kLevels), std::end(kLevels)},
                "least severe level written (env DEJAVIEW_LOG overrides)")
          .Enum("format", &LogOptions::format, {"text", "json"},
                "text for people, json for one object per line");
  return schema;
}

StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& name) {
  for (int i = 0; i < int(std::size(kLevels)); ++i) {
    if (name == kLevels[i]) return static_cast<spdlog::level::level_enum>(i);
  }
  return Status::InvalidArgument("unknown log level '" + name +
                                 "' (trace, debug, info, warn, error, critical, off)");
}

StatusOr<std::unique_ptr<spdlog::formatter>> MakeLogFormatter(const std::string& format) {
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (format == "text") {
    f->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l [%n] %v");
  } else if (format == "json") {
    f->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
  } else {
    return Status::InvalidArgument("unknown log format '" + format + "' (text or json)");
  }
  return std::unique_ptr<spdlog::formatter>(std::move(f));
}

StatusOr<LogOptions> ApplyLogEnvironment(LogOptions options) {
  const char* env = std::getenv("DEJAVIEW_LOG");
  if (!env || !*env) return options;
  const std::string value = env;
  for (size_t pos = 0; pos <= value.size();) {
    const size_t comma = std::min(value.find(',', pos), value.size());
    const std::string word = value.substr(pos, comma - pos);
    pos = comma + 1;
    if (word == "text" || word == "json") {
      options.format = word;
      continue;
    }
    auto level = ParseLogLevel(word);
    if (!level.ok()) return level.status().WithContext("DEJAVIEW_LOG");
    options.level = word;
  }
  return options;
}

Status SetupLogging(const LogOptions& configured, const std::string& name) {
  DV_ASSIGN_OR_RETURN(const LogOptions options, ApplyLogEnvironment(configured));
  DV_ASSIGN_OR_RETURN(const spdlog::level::level_enum level, ParseLogLevel(options.level));
  DV_ASSIGN_OR_RETURN(std::unique_ptr<spdlog::formatter> formatter,
                      MakeLogFormatter(options.format));
  auto logger =
      std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::move(formatter));
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
  return Status::Ok();
}

}  // namespace dv
