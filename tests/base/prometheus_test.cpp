// The metrics registry against the Prometheus text format 0.0.4, byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dejaview/base/metrics.h"
#include "dejaview/base/metrics_http.h"
#include "dejaview/base/version.h"

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

TEST(Metrics, CounterTotalsNeverGoDown) {
  Registry r;
  Counter& c = r.GetCounter("mirrored_total", "m");
  c.SetTotal(5);
  c.SetTotal(3);
  EXPECT_EQ(c.Value(), 5);
  c.SetTotal(7.5);
  EXPECT_EQ(c.Value(), 7.5);
}

TEST(Metrics, ExpositionHasProcessAndBuildInfoSeries) {
  Registry r;
  RegisterBuildInfo(&r, "prog");
  const std::string text = RenderExposition(&r);
  EXPECT_NE(text.find("dejaview_build_info{program=\"prog\",version=\"" + std::string(Version()) +
                      "\"} 1\n"),
            std::string::npos)
      << text;
  for (const char* family :
       {"process_cpu_seconds_total", "process_start_time_seconds", "process_virtual_memory_bytes",
        "process_resident_memory_bytes", "process_open_fds", "process_max_fds"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
  }
  // This process exists, holds memory and at least stdin/stdout/stderr open, and started
  // after 2020 (1577836800) by the kernel's boot time plus its start tick.
  EXPECT_GT(r.GetGauge("process_resident_memory_bytes", "").Value(), 0);
  EXPECT_GE(r.GetGauge("process_open_fds", "").Value(), 3);
  EXPECT_GT(r.GetGauge("process_start_time_seconds", "").Value(), 1577836800);
}

TEST(MetricsHttp, AnswersExactlyGetAndHeadOfMetrics) {
  const auto render = [] { return std::string("m 1\n"); };
  const std::string head200 =
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "Content-Length: 4\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(MetricsHttp::Respond("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", render),
            head200 + "m 1\n");
  EXPECT_EQ(MetricsHttp::Respond("GET /metrics?x=1 HTTP/1.0\r\n\r\n", render), head200 + "m 1\n");
  EXPECT_EQ(MetricsHttp::Respond("HEAD /metrics HTTP/1.0\r\n\r\n", render), head200);
  const std::string not_found =
      "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "Content-Length: 10\r\nConnection: close\r\n\r\nnot found\n";
  for (const char* path : {"/metricsXYZ", "/metrics/", "/", "/METRICS", ""}) {
    EXPECT_EQ(MetricsHttp::Respond(std::string("GET ") + path + " HTTP/1.0\r\n\r\n", render),
              not_found)
        << path;
  }
  EXPECT_EQ(MetricsHttp::Respond("POST /metrics HTTP/1.0\r\n\r\n", render),
            "HTTP/1.0 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"
            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            "Content-Length: 19\r\nConnection: close\r\n\r\nmethod not allowed\n");
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

// A silent client (connected, never sending) and a stalled one (half a request) stay open while
// other clients are answered: the server was not waiting on them. Before, one thread served one
// connection at a time, so the scrape came only after the silent client had been dropped.
TEST(MetricsHttp, ASilentClientNeverDelaysAnother) {
  auto http = MetricsHttp::Start("127.0.0.1:0", [] { return std::string("m 1\n"); });
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  const int port = (*http)->port();
  const int silent = Connect(port);
  const int stalled = Connect(port);
  ASSERT_EQ(::send(stalled, "GET /met", 8, MSG_NOSIGNAL), 8);
  for (int i = 0; i < 3; ++i) {
    const std::string got = Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n");
    EXPECT_EQ(got.substr(0, 17), "HTTP/1.0 200 OK\r\n");
    EXPECT_EQ(got.substr(got.size() - 4), "m 1\n");
  }
  for (const int fd : {silent, stalled}) {
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, MSG_DONTWAIT), -1);
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
  }
  // The stalled client is answered once it finishes its request.
  ASSERT_EQ(::send(stalled, "rics HTTP/1.0\r\n\r\n", 17, MSG_NOSIGNAL), 17);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = ::recv(stalled, buf, sizeof(buf), 0)) > 0) got.append(buf, size_t(n));
  EXPECT_EQ(got.substr(0, 17), "HTTP/1.0 200 OK\r\n");
  ::close(stalled);
  ::close(silent);
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
