// The metrics registry against the Prometheus text format 0.0.4, byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "dejaview/base/metrics.h"

namespace dv::metrics {
namespace {

TEST(Metrics, RendersTheTextFormatByteForByte) {
  Registry r;
  r.GetCounter("dejaview_frames_total", "Frames encoded.", {{"sensor", "top"}, {"codec", "delta"}})
      .Inc(3);
  r.GetCounter("dejaview_frames_total", "Frames encoded.", {{"codec", "intra"}, {"sensor", "top"}})
      .Inc();
  r.GetCounter("dejaview_frames_total", "ignored: help is the first registration's",
               {{"codec", "delta"}, {"sensor", "top"}})
      .Inc(2);
  r.GetGauge("dejaview_spool_bytes", "Bytes in the spool.\nSealed segments only \\ no tail.")
      .Set(1.5e9);
  r.GetGauge("dejaview_link_up", "Link state.", {{"path", "C:\\dir \"x\"\nnext"}}).Set(-0.25);
  Histogram& h = r.GetHistogram("dejaview_encode_seconds", "Encode time.", {0.01, 0.05, 0.1},
                                {{"sensor", "top"}});
  for (double v : {0.005, 0.01, 0.02, 0.07, 0.5}) h.Observe(v);
  r.GetGauge("a_first", "Sorted by name.").Set(NAN);
  r.GetGauge("a_inf", "Infinite.").Set(-INFINITY);
  EXPECT_EQ(r.RenderText(),
            "# HELP a_first Sorted by name.\n"
            "# TYPE a_first gauge\n"
            "a_first NaN\n"
            "# HELP a_inf Infinite.\n"
            "# TYPE a_inf gauge\n"
            "a_inf -Inf\n"
            "# HELP dejaview_encode_seconds Encode time.\n"
            "# TYPE dejaview_encode_seconds histogram\n"
            "dejaview_encode_seconds_bucket{sensor=\"top\",le=\"0.01\"} 2\n"
            "dejaview_encode_seconds_bucket{sensor=\"top\",le=\"0.05\"} 3\n"
            "dejaview_encode_seconds_bucket{sensor=\"top\",le=\"0.1\"} 4\n"
            "dejaview_encode_seconds_bucket{sensor=\"top\",le=\"+Inf\"} 5\n"
            "dejaview_encode_seconds_sum{sensor=\"top\"} 0.605\n"
            "dejaview_encode_seconds_count{sensor=\"top\"} 5\n"
            "# HELP dejaview_frames_total Frames encoded.\n"
            "# TYPE dejaview_frames_total counter\n"
            "dejaview_frames_total{codec=\"delta\",sensor=\"top\"} 5\n"
            "dejaview_frames_total{codec=\"intra\",sensor=\"top\"} 1\n"
            "# HELP dejaview_link_up Link state.\n"
            "# TYPE dejaview_link_up gauge\n"
            "dejaview_link_up{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} -0.25\n"
            "# HELP dejaview_spool_bytes Bytes in the spool.\\nSealed segments only \\\\ no tail.\n"
            "# TYPE dejaview_spool_bytes gauge\n"
            "dejaview_spool_bytes 1500000000\n");
}

TEST(Metrics, ValuesFormatLikePrometheus) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-7), "-7");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e-7), "1e-07");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
}

TEST(Metrics, ConcurrentUpdatesAreNotLost) {
  Registry r;
  Counter& c = r.GetCounter("c_total", "c");
  Gauge& g = r.GetGauge("g", "g");
  Histogram& h = r.GetHistogram("h", "h", {1, 2});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        c.Inc();
        g.Add(t % 2 ? 1 : -1);
        h.Observe(double(i % 3));
        // Families and series are also created concurrently with updates and renders.
        if (i % 5000 == 0) {
          r.GetCounter("c_total", "c", {{"t", std::to_string(t)}}).Inc();
          (void)r.RenderText();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c.Value(), 80000);
  EXPECT_EQ(g.Value(), 0);
  const auto counts = h.BucketCounts();
  EXPECT_EQ(counts, (std::vector<uint64_t>{53336, 26664, 0}));  // 0 and 1 <= 1; 2 <= 2
  EXPECT_EQ(h.Sum(), 4 * (6667.0 * 1 + 6666.0 * 2));
  EXPECT_NE(r.RenderText().find("c_total{t=\"3\"} 4\n"), std::string::npos);
}

TEST(MetricsDeathTest, MisuseIsAProgrammingError) {
  Registry r;
  r.GetCounter("x_total", "x");
  EXPECT_DEATH(r.GetGauge("x_total", "x"), "x_total: registered again with a different type");
  EXPECT_DEATH(r.GetCounter("bad-name", "x"), "invalid metric name 'bad-name'");
  EXPECT_DEATH(r.GetHistogram("h", "h", {1}, {{"le", "1"}}), "h: invalid label name 'le'");
  EXPECT_DEATH(r.GetHistogram("h2", "h", {2, 1}), "strictly increasing");
}

}  // namespace
}  // namespace dv::metrics
