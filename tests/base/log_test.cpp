// Log formats through a real spdlog logger writing into a string stream.
#include "dejaview/base/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace dv {
namespace {

std::string LogOnce(const std::string& format, const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto formatter = MakeLogFormatter(format);
  EXPECT_TRUE(formatter.ok()) << formatter.status().ToString();
  sink->set_formatter(std::move(formatter).value());
  spdlog::logger logger("agent", sink);
  logger.warn("{}", message);
  return out.str();
}

TEST(Log, TextLineHasUtcTimeLevelLoggerAndMessage) {
  const std::string line = LogOnce("text", "spool at 91% of budget");
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z warning \[agent\] spool at 91% )"
                       R"(of budget\n)")))
      << line;
}

TEST(Log, JsonLineIsOneValidObjectWithTheMessageEscaped) {
  const std::string message = "frame \"7\"\tdropped\\\nline two \x01 end";
  const std::string line = LogOnce("json", message);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per record";
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], message);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["logger"], "agent");
  EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")));
}

TEST(Log, LevelsAndFormatsAreChecked) {
  EXPECT_EQ(*ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(*ParseLogLevel("off"), spdlog::level::off);
  EXPECT_EQ(ParseLogLevel("loud").status().message(),
            "unknown log level 'loud' (trace, debug, info, warn, error, critical, off)");
  EXPECT_EQ(MakeLogFormatter("xml").status().message(), "unknown log format 'xml' (text or json)");
}

TEST(Log, EnvironmentChoosesLevelFormatOrBoth) {
  LogOptions configured;
  configured.level = "warn";
  configured.format = "text";
  const std::pair<const char*, std::pair<const char*, const char*>> cases[] = {
      {"", {"warn", "text"}},
      {"debug", {"debug", "text"}},
      {"json", {"warn", "json"}},
      {"error,json", {"error", "json"}},
      {"json,trace", {"trace", "json"}},
  };
  for (const auto& [env, want] : cases) {
    ASSERT_EQ(::setenv("DEJAVIEW_LOG", env, 1), 0);
    auto got = ApplyLogEnvironment(configured);
    ASSERT_TRUE(got.ok()) << env << ": " << got.status().ToString();
    EXPECT_EQ(got->level, want.first) << env;
    EXPECT_EQ(got->format, want.second) << env;
  }
  ASSERT_EQ(::setenv("DEJAVIEW_LOG", "json,xml", 1), 0);
  EXPECT_EQ(
      ApplyLogEnvironment(configured).status().message(),
      "DEJAVIEW_LOG: unknown log level 'xml' (trace, debug, info, warn, error, critical, off)");
  ASSERT_EQ(::unsetenv("DEJAVIEW_LOG"), 0);
}

TEST(Log, EnvironmentOverridesTheConfiguredLevel) {
  ASSERT_EQ(::setenv("DEJAVIEW_LOG", "error", 1), 0);
  ASSERT_TRUE(SetupLogging(LogOptions{}).ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::err);
  ASSERT_EQ(::setenv("DEJAVIEW_LOG", "chatty", 1), 0);
  EXPECT_EQ(SetupLogging(LogOptions{}).message(),
            "DEJAVIEW_LOG: unknown log level 'chatty' (trace, debug, info, warn, error, critical, "
            "off)");
  ASSERT_EQ(::unsetenv("DEJAVIEW_LOG"), 0);
  LogOptions o;
  o.level = "debug";
  ASSERT_TRUE(SetupLogging(o).ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
}

}  // namespace
}  // namespace dv
