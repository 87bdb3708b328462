#include "dejaview/base/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dv::metrics {
namespace {

void AtomicAdd(std::atomic<double>* a, double v) {
  double old = a->load(std::memory_order_relaxed);
  while (!a->compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

[[noreturn]] void Misuse(const std::string& what) {
  std::fprintf(stderr, "dejaview metrics: %s\n", what.c_str());
  std::abort();
}

bool ValidName(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string Escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} with an optional extra label last (histograms' le), or "" when empty.
std::string LabelText(const Labels& labels, const char* extra_name = nullptr,
                      const std::string& extra_value = "") {
  std::string out;
  for (const auto& [k, v] : labels) {
    out += (out.empty() ? "{" : ",") + k + "=\"" + Escape(v, true) + "\"";
  }
  if (extra_name)
    out += (out.empty() ? "{" : ",") + std::string(extra_name) + "=\"" + extra_value + "\"";
  return out.empty() ? out : out + "}";
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

void Counter::Inc(double v) {
  if (v > 0) AtomicAdd(&value_, v);
}

void Counter::SetTotal(double total) {
  double old = value_.load(std::memory_order_relaxed);
  while (total > old && !value_.compare_exchange_weak(old, total, std::memory_order_relaxed)) {
  }
}

void Gauge::Add(double v) { AtomicAdd(&value_, v); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      Misuse("histogram bounds must be finite and strictly increasing");
    }
  }
}

void Histogram::Observe(double v) {
  // Bucket i counts bounds_[i-1] < v <= bounds_[i]; NaN lands in +Inf like Prometheus' clients.
  const size_t i =
      std::isnan(v) ? bounds_.size()
                    : size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&sum_, v);
}

std::vector<uint64_t> Histogram::BucketCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
  return out;
}

Registry::Family& Registry::GetFamily(const std::string& name, const std::string& help, Type type,
                                      const Labels& labels, const std::vector<double>& bounds) {
  if (!ValidName(name, true)) Misuse("invalid metric name '" + name + "'");
  for (const auto& [k, v] : labels) {
    if (!ValidName(k, false) || k.rfind("__", 0) == 0 || (type == Type::kHistogram && k == "le")) {
      Misuse(name + ": invalid label name '" + k + "'");
    }
  }
  auto [it, inserted] = families_.try_emplace(name);
  Family& f = it->second;
  if (inserted) {
    f.help = help;
    f.type = type;
    f.bounds = bounds;
  } else if (f.type != type || f.bounds != bounds) {
    Misuse(name + ": registered again with a different type or bucket layout");
  }
  return f;
}

Counter& Registry::GetCounter(const std::string& name, const std::string& help,
                              const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, help, Type::kCounter, labels, {}).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, help, Type::kGauge, labels, {}).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::GetHistogram(const std::string& name, const std::string& help,
                                  const std::vector<double>& upper_bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, help, Type::kHistogram, labels, upper_bounds).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(upper_bounds);
  return *slot;
}

std::string Registry::RenderText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    static const char* const kTypeNames[] = {"counter", "gauge", "histogram"};
    out += "# HELP " + name + " " + Escape(f.help, false) + "\n";
    out += "# TYPE " + name + " " + kTypeNames[int(f.type)] + "\n";
    for (const auto& [labels, c] : f.counters) {
      out += name + LabelText(labels) + " " + FormatValue(c->Value()) + "\n";
    }
    for (const auto& [labels, g] : f.gauges) {
      out += name + LabelText(labels) + " " + FormatValue(g->Value()) + "\n";
    }
    for (const auto& [labels, h] : f.histograms) {
      // _count is the sum of the buckets read here, so that it always equals the +Inf bucket
      // even while other threads observe.
      const std::vector<uint64_t> counts = h->BucketCounts();
      uint64_t cumulative = 0;
      for (size_t i = 0; i < counts.size(); ++i) {
        cumulative += counts[i];
        const std::string le = i < f.bounds.size() ? FormatValue(f.bounds[i]) : "+Inf";
        out += name + "_bucket" + LabelText(labels, "le", le) + " " + std::to_string(cumulative) +
               "\n";
      }
      out += name + "_sum" + LabelText(labels) + " " + FormatValue(h->Sum()) + "\n";
      out += name + "_count" + LabelText(labels) + " " + std::to_string(cumulative) + "\n";
    }
  }
  return out;
}

Registry& DefaultRegistry() {
  static Registry* registry = new Registry;  // never destroyed: metrics may be updated at exit
  return *registry;
}

}  // namespace dv::metrics
