#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/config.h"
#include "dejaview/base/log.h"

// A schema with every kind of entry, nested two deep: any YAML text either loads or fails with
// a Status (yaml-cpp's exceptions must not escape Load), never a crash.
namespace {

struct Inner {
  int64_t count = 1;
  double ratio = 0.5;
  bool on = true;
  std::vector<std::string> names;
};
struct Outer {
  Inner inner;
  std::string mode = "a";
  std::string path;
  uint16_t port = 80;
  dv::LogOptions log;
};

const dv::config::Schema<Outer>& FuzzSchema() {
  static const auto inner = dv::config::Schema<Inner>()
                                .Int<int64_t>("count", &Inner::count, -5, 1000, "")
                                .Double("ratio", &Inner::ratio, 0, 1, "")
                                .Bool("on", &Inner::on, "")
                                .StringList("names", &Inner::names, "");
  static const auto outer = dv::config::Schema<Outer>()
                                .Section("inner", &Outer::inner, inner)
                                .Enum("mode", &Outer::mode, {"a", "b"}, "")
                                .String("path", &Outer::path, "")
                                .Int<uint16_t>("port", &Outer::port, 1, 65535, "")
                                .Section("log", &Outer::log, dv::LogOptionsSchema());
  return outer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Outer out;
  const dv::Status s = dv::config::LoadString(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml", FuzzSchema(), &out);
  if (!s.ok() && s.message().rfind("fuzz.yaml", 0) != 0) __builtin_trap();  // names the file
  if (s.ok() && (out.inner.count < -5 || out.inner.count > 1000 || out.port == 0)) __builtin_trap();
  return 0;
}
