// The config mechanism on a schema shaped like a component's (nested sections, every kind of
// value), each error kind with its exact message, and the shipped config/example.yaml.
#include "dejaview/base/config.h"

#include <gtest/gtest.h>

#include "dejaview/base/file_util.h"
#include "dejaview/base/log.h"
#include "testutil.h"

namespace dv {
namespace {

struct SpoolOptions {
  std::string dir = "spool";
  int64_t budget_mb = 1024;
  double high_water = 0.9;
};
struct UplinkOptions {
  bool enabled = true;
  uint32_t window = 8;
  std::vector<std::string> servers = {"tcp://localhost:5555"};
  std::string when = "parked";
};
struct AgentOptions {
  SpoolOptions spool;
  UplinkOptions uplink;
  std::string sensor = "hdl64";
};
struct RootOptions {
  AgentOptions agent;
  LogOptions log;
};

const config::Schema<RootOptions>& RootSchema() {
  static const auto spool =
      config::Schema<SpoolOptions>()
          .String("dir", &SpoolOptions::dir, "spool directory")
          .Int<int64_t>("budget_mb", &SpoolOptions::budget_mb, 1, 4096, "disk budget, MiB")
          .Double("high_water", &SpoolOptions::high_water, 0.0, 1.0, "fill fraction");
  static const auto uplink =
      config::Schema<UplinkOptions>()
          .Bool("enabled", &UplinkOptions::enabled, "upload at all")
          .Int<uint32_t>("window", &UplinkOptions::window, 1, 256, "frames in flight")
          .StringList("servers", &UplinkOptions::servers, "endpoints")
          .Enum("when", &UplinkOptions::when, {"parked", "always", "never"}, "upload policy");
  static const auto agent = config::Schema<AgentOptions>()
                                .Section("spool", &AgentOptions::spool, spool)
                                .Section("uplink", &AgentOptions::uplink, uplink)
                                .String("sensor", &AgentOptions::sensor, "sensor model");
  static const auto root = config::Schema<RootOptions>()
                               .Section("agent", &RootOptions::agent, agent)
                               .Section("log", &RootOptions::log, LogOptionsSchema());
  return root;
}

// The message of loading text as "t.yaml" (empty when it loads).
std::string Errors(const std::string& text) {
  RootOptions o;
  Status s = config::LoadString(text, "t.yaml", RootSchema(), &o);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  }
  return s.message();
}

TEST(Config, EmptyTextKeepsEveryDefault) {
  RootOptions o;
  ASSERT_TRUE(config::LoadString("", "t.yaml", RootSchema(), &o).ok());
  ASSERT_TRUE(config::LoadString("# only a comment\nagent:\n", "t.yaml", RootSchema(), &o).ok());
  EXPECT_EQ(o.agent.spool.budget_mb, 1024);
  EXPECT_EQ(o.agent.uplink.servers, std::vector<std::string>{"tcp://localhost:5555"});
  EXPECT_EQ(o.log.level, "info");
}

TEST(Config, ValuesReplaceDefaultsKeyByKey) {
  RootOptions o;
  ASSERT_TRUE(config::LoadString("agent:\n"
                                 "  spool: {budget_mb: 4096, high_water: 0.5}\n"
                                 "  uplink:\n"
                                 "    enabled: false\n"
                                 "    window: 32\n"
                                 "    servers: [tcp://a:1, tcp://b:2]\n"
                                 "    when: always\n"
                                 "log: {level: debug}\n",
                                 "t.yaml", RootSchema(), &o)
                  .ok());
  EXPECT_EQ(o.agent.spool.dir, "spool");
  EXPECT_EQ(o.agent.spool.budget_mb, 4096);
  EXPECT_EQ(o.agent.spool.high_water, 0.5);
  EXPECT_FALSE(o.agent.uplink.enabled);
  EXPECT_EQ(o.agent.uplink.window, 32u);
  EXPECT_EQ(o.agent.uplink.servers, (std::vector<std::string>{"tcp://a:1", "tcp://b:2"}));
  EXPECT_EQ(o.agent.uplink.when, "always");
  EXPECT_EQ(o.log.level, "debug");
  EXPECT_EQ(o.log.format, "text");
}

TEST(Config, UnknownKeySuggestsTheNearest) {
  EXPECT_EQ(Errors("agent:\n  spool:\n    budget_mbb: 10\n"),
            "t.yaml:3:5: agent.spool.budget_mbb: unknown key (did you mean 'budget_mb'?)");
  EXPECT_EQ(Errors("agent:\n  uplnik: {}\n"),
            "t.yaml:2:3: agent.uplnik: unknown key (did you mean 'uplink'?)");
  EXPECT_EQ(Errors("agent:\n  colour: red\n"),
            "t.yaml:2:3: agent.colour: unknown key (valid keys: spool, uplink, sensor)");
  EXPECT_EQ(Errors("server: {}\n"), "t.yaml:1:1: server: unknown key (valid keys: agent, log)");
}

TEST(Config, WrongTypesNameTheExpectedType) {
  EXPECT_EQ(Errors("agent:\n  spool:\n    budget_mb: lots\n"),
            "t.yaml:3:16: agent.spool.budget_mb: expected an integer, got 'lots'");
  EXPECT_EQ(Errors("agent:\n  spool:\n    budget_mb: 1.5\n"),
            "t.yaml:3:16: agent.spool.budget_mb: expected an integer, got '1.5'");
  EXPECT_EQ(Errors("agent: {spool: {high_water: half}}"),
            "t.yaml:1:29: agent.spool.high_water: expected a number, got 'half'");
  EXPECT_EQ(Errors("agent: {uplink: {enabled: maybe}}"),
            "t.yaml:1:27: agent.uplink.enabled: expected true or false, got 'maybe'");
  EXPECT_EQ(Errors("agent:\n  spool: 5\n"),
            "t.yaml:2:10: agent.spool: expected a mapping, got a scalar");
  EXPECT_EQ(Errors("agent:\n  sensor: [a, b]\n"),
            "t.yaml:2:11: agent.sensor: expected a string, got a list");
  EXPECT_EQ(Errors("agent: {uplink: {servers: tcp://a:1}}"),
            "t.yaml:1:27: agent.uplink.servers: expected a list of strings, got a scalar");
  EXPECT_EQ(Errors("agent: {uplink: {servers: [tcp://a:1, {x: 1}]}}"),
            "t.yaml:1:39: agent.uplink.servers[1]: expected a string, got a mapping");
  EXPECT_EQ(Errors("- a\n- b\n"), "t.yaml:1:1: (top level): expected a mapping, got a list");
}

TEST(Config, OutOfRangeValuesNameTheRange) {
  EXPECT_EQ(Errors("agent: {spool: {budget_mb: 5000}}"),
            "t.yaml:1:28: agent.spool.budget_mb: 5000 is out of range [1, 4096]");
  EXPECT_EQ(Errors("agent: {spool: {budget_mb: 0}}"),
            "t.yaml:1:28: agent.spool.budget_mb: 0 is out of range [1, 4096]");
  EXPECT_EQ(Errors("agent: {uplink: {window: -1}}"),
            "t.yaml:1:26: agent.uplink.window: -1 is out of range [1, 256]");
  EXPECT_EQ(Errors("agent: {uplink: {window: 99999999999999999999}}"),
            "t.yaml:1:26: agent.uplink.window: expected an integer, got '99999999999999999999'");
  EXPECT_EQ(Errors("agent: {spool: {high_water: 1.5}}"),
            "t.yaml:1:29: agent.spool.high_water: 1.5 is out of range [0, 1]");
  EXPECT_EQ(Errors("log: {format: jsno}"),
            "t.yaml:1:15: log.format: 'jsno' is not one of text, json (did you mean 'json'?)");
  EXPECT_EQ(Errors("agent: {uplink: {when: sometimes}}"),
            "t.yaml:1:24: agent.uplink.when: 'sometimes' is not one of parked, always, never");
}

TEST(Config, EveryProblemInAFileIsReportedAtOnce) {
  EXPECT_EQ(Errors("agent:\n"
                   "  spool:\n"
                   "    budget_mb: 0\n"
                   "    budget_mb: 2\n"
                   "  sensr: vlp16\n"
                   "log:\n"
                   "  level: loud\n"),
            "t.yaml:3:16: agent.spool.budget_mb: 0 is out of range [1, 4096]\n"
            "t.yaml:4:5: agent.spool.budget_mb: duplicate key\n"
            "t.yaml:5:3: agent.sensr: unknown key (did you mean 'sensor'?)\n"
            "t.yaml:7:10: log.level: 'loud' is not one of trace, debug, info, warn, error, "
            "critical, off");
}

TEST(Config, SyntaxErrorsCarryThePosition) {
  EXPECT_EQ(Errors("agent: [1, 2\n"),
            "t.yaml:2:1: YAML syntax error: end of sequence flow not found");
  EXPECT_EQ(Errors("agent:\n  spool: {a: 1\n"),
            "t.yaml:3:1: YAML syntax error: end of map flow not found");
  EXPECT_EQ(Errors("a: b: c\n"), "t.yaml:1:5: YAML syntax error: illegal map value");
}

TEST(Config, LoadFileNamesAMissingFile) {
  auto o = config::LoadFile("/nonexistent/dejaview.yaml", RootSchema());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(), "/nonexistent/dejaview.yaml: no such file");
}

TEST(Config, TheExampleFileLoads) {
  const std::string path = std::string(DEJAVIEW_SOURCE_DIR) + "/config/example.yaml";
  auto o = config::LoadFile(path, RootSchema());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->log.level, "info");
  EXPECT_EQ(o->log.format, "text");
}

TEST(Config, DescribeListsEveryKeyWithTypeAndDefault) {
  EXPECT_EQ(config::Describe(RootSchema()),
            "agent.spool.dir: a string, default 'spool': spool directory\n"
            "agent.spool.budget_mb: an integer in [1, 4096], default 1024: disk budget, MiB\n"
            "agent.spool.high_water: a number in [0, 1], default 0.9: fill fraction\n"
            "agent.uplink.enabled: true or false, default true: upload at all\n"
            "agent.uplink.window: an integer in [1, 256], default 8: frames in flight\n"
            "agent.uplink.servers: a list of strings, default ['tcp://localhost:5555']: endpoints\n"
            "agent.uplink.when: one of parked, always, never, default 'parked': upload policy\n"
            "agent.sensor: a string, default 'hdl64': sensor model\n"
            "log.level: one of trace, debug, info, warn, error, critical, off, default 'info': "
            "least severe level written (env DEJAVIEW_LOG overrides)\n"
            "log.format: one of text, json, default 'text': text for people, json for one object "
            "per line\n");
}

}  // namespace
}  // namespace dv
