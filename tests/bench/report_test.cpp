#include "dejaview/bench/report.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dv::bench {
namespace {

TEST(RatioAtCd, LogLinearBetweenBracketingPoints) {
  // Halfway in CD between ratios 20 and 80: log-linear gives the geometric mean, 40.
  const std::vector<std::pair<double, double>> curve = {{0.08, 80}, {0.04, 20}, {0.2, 200}};
  EXPECT_DOUBLE_EQ(*RatioAtCd(curve, 0.06), 40.0);
  // A quarter of the way from (0.08, 80) to (0.2, 200): exp(log 80 + 0.25 log 2.5).
  EXPECT_NEAR(*RatioAtCd(curve, 0.11), 80.0 * std::pow(2.5, 0.25), 1e-9);
  EXPECT_DOUBLE_EQ(*RatioAtCd(curve, 0.04), 20.0);  // on a swept point
  EXPECT_DOUBLE_EQ(*RatioAtCd(curve, 0.2), 200.0);
}

TEST(RatioAtCd, OutsideTheSweptRangeIsNotAvailable) {
  const std::vector<std::pair<double, double>> curve = {{0.04, 20}, {0.08, 80}};
  EXPECT_FALSE(RatioAtCd(curve, 0.03).has_value());
  EXPECT_FALSE(RatioAtCd(curve, 0.15).has_value());
  EXPECT_FALSE(RatioAtCd({}, 0.05).has_value());
  // A lossless codec sits at CD 0 only.
  EXPECT_FALSE(RatioAtCd({{0.0, 1.1}, {0.0, 1.2}}, 0.05).has_value());
  EXPECT_DOUBLE_EQ(*RatioAtCd({{0.0, 1.1}, {0.0, 1.2}}, 0.0), 1.2);
}

TEST(Ratio, CountsTwelveOrSixteenBytesPerOriginalPoint) {
  EXPECT_DOUBLE_EQ(Ratio(1000, 120, false), 100.0);
  EXPECT_DOUBLE_EQ(Ratio(1000, 160, true), 100.0);
  EXPECT_DOUBLE_EQ(Ratio(1000, 0, false), 0.0);
}

TEST(AccountSections, UnnamedBytesBecomeHeader) {
  EncodedFrame f;
  f.bytes.resize(100);
  f.sections = {{"xyz", 70}, {"intensity", 20}};
  auto s = AccountSections(f);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0], (std::pair<std::string, size_t>{"header", 10}));
  f.sections = {{"header", 4}, {"xyz", 90}};
  s = AccountSections(f);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].second, 10u);  // the codec's own header plus the 6 unnamed bytes
  f.sections = {{"xyz", 101}};
  EXPECT_EQ(AccountSections(f).status().code(), Status::Code::kCorruption);
}

TEST(TimingPercentiles, NearestRank) {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);  // 1..20, unsorted
  const Percentiles p = TimingPercentiles(v);
  EXPECT_DOUBLE_EQ(p.median, 10.0);  // ceil(0.5 * 20) = 10th
  EXPECT_DOUBLE_EQ(p.p95, 19.0);     // ceil(0.95 * 20) = 19th
  EXPECT_DOUBLE_EQ(TimingPercentiles({7}).p95, 7.0);
}

TEST(MarkdownTables, EqualErrorRowsSayNotAvailableOutsideTheSweep) {
  SettingResult a, b, lossless;
  a.workload = b.workload = lossless.workload = "w";
  a.codec = b.codec = "grid";
  a.knob_name = b.knob_name = "step_m";
  a.cd_m = 0.04;
  a.ratio_geometry = 20;
  b.cd_m = 0.06;  // CD 0.05 m is halfway: sqrt(20 * 80) = 40
  b.ratio_geometry = 80;
  lossless.codec = "zstd";
  lossless.knob_name = "level";
  lossless.ratio_geometry = 1.1;
  const std::string md = MarkdownTables({a, b, lossless});
  EXPECT_NE(md.find("| grid | 40.0 | n/a | n/a |"), std::string::npos) << md;
  EXPECT_NE(md.find("| zstd | n/a | n/a | n/a |"), std::string::npos) << md;
  const nlohmann::json j = ResultsJson({a, b, lossless});
  EXPECT_DOUBLE_EQ(j["equal_error"][0]["ratio_at_cd_0.05"].get<double>(), 40.0);
  EXPECT_TRUE(j["equal_error"][0]["ratio_at_cd_0.10"].is_null());
}

TEST(MarkdownTables, DejaviewTargetsAreCheckedExactly) {
  SettingResult a, b;
  a.workload = b.workload = "w";
  a.codec = b.codec = "dejaview";
  a.knob_name = b.knob_name = "T_m";
  a.knob = 0.1;
  a.cd_m = 0.05;
  a.ratio_geometry = 100;
  a.hausdorff_m = 0.1;  // exactly T: met
  a.encode_ms.median = 20;
  a.decode_ms.median = 10;
  b.knob = 0.2;
  b.cd_m = 0.1;
  b.ratio_geometry = 240;
  b.hausdorff_m = 0.2000001;  // over T by 1e-7 m: not met
  b.encode_ms.median = 25;
  b.decode_ms.median = 16;
  const std::string md = MarkdownTables({a, b});
  EXPECT_NE(md.find("| geometry-only ratio at CD 0.05 m >= 90 | 100 | yes |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| geometry-only ratio at CD 0.10 m >= 250 | 240 | **no** |"),
            std::string::npos);
  EXPECT_NE(md.find("| geometry-only ratio at CD 0.15 m >= 500 | n/a | **no** |"),
            std::string::npos);
  EXPECT_NE(md.find("max(Hausdorff - T) = +1.00e-07 m | **no** |"), std::string::npos);
  EXPECT_NE(md.find("worst median 25.0 ms | yes |"), std::string::npos);
  EXPECT_NE(md.find("worst median 16.0 ms | **no** |"), std::string::npos);
  // A setting exactly at an equal-error CD is both ends of its bracket.
  EXPECT_NE(md.find("at CD 0.05 m | T_m 0.1: worst encode 20.0, decode 10.0 ms | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("at CD 0.10 m | T_m 0.2: worst encode 25.0, decode 16.0 ms | **no** |"),
            std::string::npos)
      << md;
  a.codec = b.codec = "draco";
  EXPECT_EQ(MarkdownTables({a, b}).find("targets"), std::string::npos);
}

// The speed targets at each equal-error CD are read at the two settings whose CDs bracket it, the
// slower of the two deciding; a CD beyond the sweep is not met.
TEST(MarkdownTables, DejaviewSpeedAtEachEqualErrorCdIsTheBracketingSettingsWorst) {
  std::vector<SettingResult> s(3);
  const double knob[] = {0.1, 0.15, 0.4}, cd[] = {0.04, 0.06, 0.12}, enc[] = {40, 28, 20},
               dec[] = {14, 12, 5};
  for (size_t i = 0; i < s.size(); ++i) {
    s[i].workload = "w";
    s[i].codec = "dejaview";
    s[i].knob_name = "T_m";
    s[i].knob = knob[i];
    s[i].cd_m = cd[i];
    s[i].ratio_geometry = 100;
    s[i].encode_ms.median = enc[i];
    s[i].decode_ms.median = dec[i];
  }
  const std::string md = MarkdownTables(s);
  EXPECT_NE(md.find("at CD 0.05 m | T_m 0.1, 0.15: worst encode 40.0, decode 14.0 ms | **no** |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("at CD 0.10 m | T_m 0.15, 0.4: worst encode 28.0, decode 12.0 ms | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("at CD 0.15 m | n/a: the sweep does not reach CD 0.15 m | **no** |"),
            std::string::npos)
      << md;
}

}  // namespace
}  // namespace dv::bench
