// The programs' argument parser: both option spellings, -h, and the errors naming the option.
#include "dejaview/base/args.h"

#include <gtest/gtest.h>

namespace dv::cli {
namespace {

StatusOr<Args> ParseList(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return Args::Parse(int(argv.size()), argv.data(), {"out", "every"}, {"json", "help"});
}

TEST(Args, KeyValueInBothSpellingsAndHelpAsDashH) {
  auto a = ParseList({"in.bin", "--out=dir/x=y", "--every", "3", "--json", "-h", "more"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->positional(), (std::vector<std::string>{"in.bin", "more"}));
  EXPECT_EQ(a->Get("out"), "dir/x=y");
  EXPECT_EQ(a->GetInt("every", 1).value(), 3);
  EXPECT_TRUE(a->Has("json"));
  EXPECT_TRUE(a->Has("help"));
  auto empty = ParseList({"--out="});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->Get("out", "default"), "");
  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"--json=1"}, "option --json takes no value"},
      {{"--out"}, "option --out needs a value"},
      {{"--colour=red"}, "unknown option --colour"},
      {{"--every=x"}, "--every: 'x' is not an integer"},
  };
  for (const auto& [words, message] : bad) {
    auto r = ParseList(words);
    const Status s = r.ok() ? r->GetInt("every", 1).status() : r.status();
    EXPECT_EQ(s.message(), message) << words[0];
  }
}

}  // namespace
}  // namespace dv::cli
