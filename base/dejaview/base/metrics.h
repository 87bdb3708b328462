// A metrics registry rendered in the Prometheus text exposition format 0.0.4 (spec summary in
// docs/formats.md, "Metrics"). Debian 12 does package prometheus-cpp (prometheus-cpp-dev 1.0.1);
// this small registry was asked for instead, to keep that library and its embedded civetweb
// HTTP server off the vehicle image; moving to it would only change this file and metrics.cpp.
//
// A family (name, help, type) holds one series per label set. Registering returns a reference
// that stays valid for the registry's lifetime; updating it is lock-free (atomics), so hot paths
// keep the reference and never touch the registry's mutex. Rendering sorts families by name and
// series by label set, so the output is deterministic and can be compared byte for byte.
//
// Misuse is a programming error, not input: an invalid metric or label name, or one name
// registered with two types (or a histogram with two bucket layouts), aborts with a message.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dv::metrics {

using Labels = std::map<std::string, std::string>;  // sorted by label name

class Counter {
 public:
  void Inc(double v = 1);  // v >= 0; a negative increment is ignored (counters only go up)
  // For a counter that mirrors another component's running total (read when scraped): the value
  // becomes total, unless that is lower (a counter never goes down).
  void SetTotal(double total);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // upper_bounds: strictly increasing, finite; +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Per-bucket (not cumulative) counts, the last one for +Inf; and the sum of observations.
  std::vector<uint64_t> BucketCounts() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

class Registry {
 public:
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const std::vector<double>& upper_bounds, const Labels& labels = {});
  // The whole registry in text format 0.0.4 (Content-Type: text/plain; version=0.0.4).
  std::string RenderText() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    std::string help;
    Type type;
    std::vector<double> bounds;  // histograms
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& GetFamily(const std::string& name, const std::string& help, Type type,
                    const Labels& labels, const std::vector<double>& bounds);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// The process-wide registry that /metrics serves.
Registry& DefaultRegistry();

// The process_* series of Prometheus' client libraries (CPU seconds, start time, virtual and
// resident memory, open and maximum file descriptors), read from /proc/self when called.
void UpdateProcessMetrics(Registry* r);
// dejaview_build_info{program, version} 1.
void RegisterBuildInfo(Registry* r, const std::string& program);
// What a /metrics endpoint serves: the process series updated, then the whole registry.
std::string RenderExposition(Registry* r);

// Prometheus' number format: integers without a fraction, others shortest round-trip, and
// +Inf, -Inf, NaN.
std::string FormatValue(double v);

}  // namespace dv::metrics
