// YAML configuration, declared once per component. A component keeps its options in a struct
// whose member initialisers are the defaults, and describes it with a Schema: for each key its
// type and valid range. Loading a file fills the struct and rejects, all at once, every unknown
// key (suggesting the nearest valid one), wrong type and out-of-range value, each as
//   FILE:LINE:COL: key.path: problem
// where key.path is the dotted path from the top of the file ("agent.spool.budget_mb").
// Keys missing from the file keep their defaults. Rules in docs/formats.md ("Config").
//
//   struct SpoolOptions { std::string dir = "spool"; int64_t budget_mb = 1024; };
//   const config::Schema<SpoolOptions>& SpoolSchema() {
//     static const auto s = config::Schema<SpoolOptions>()
//         .String("dir", &SpoolOptions::dir, "spool directory")
//         .Int<int64_t>("budget_mb", &SpoolOptions::budget_mb, 1, 1 << 20, "disk budget, MiB");
//     return s;
//   }
//   struct AgentOptions { SpoolOptions spool; };
//   ... Schema<AgentOptions>().Section("spool", &AgentOptions::spool, SpoolSchema());
//   StatusOr<AgentOptions> options = config::LoadFile("agent.yaml", AgentSchema());
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "dejaview/base/file_util.h"
#include "dejaview/base/status.h"

namespace dv::config {

constexpr uint64_t kMaxConfigBytes = 16u << 20;

namespace internal {

enum class Kind { kBool, kInt, kDouble, kString, kEnum, kStringList, kSection };

struct Entry;
// The untyped schema every Schema<T> builds; Load walks it against a YAML document.
struct Core {
  std::vector<Entry> entries;
};

struct Entry {
  std::string key;
  std::string help;
  Kind kind;
  int64_t int_min = 0, int_max = 0;
  double double_min = 0, double_max = 0;
  std::vector<std::string> allowed;             // kEnum
  std::shared_ptr<const Core> section;          // kSection
  std::function<void*(void*)> member;           // object -> its field (all but kInt)
  std::function<void(void*, int64_t)> set_int;  // kInt: stores into the field's own type
  std::function<int64_t(const void*)> get_int;  // kInt: for Describe
};

// Parses text as YAML and applies it to obj through core; name is the file name in messages.
Status Load(const Core& core, const std::string& text, const std::string& name, void* obj);
// One line per key: "path  type [range]  (default ...)  help".
std::string Describe(const Core& core, const void* defaults);

}  // namespace internal

template <typename T>
class Schema {
 public:
  Schema() : core_(std::make_shared<internal::Core>()) {}

  Schema& Bool(const char* key, bool T::*field, const char* help) {
    return Add(key, help, internal::Kind::kBool, Member(field));
  }
  // Any integer type; the range must lie within int64.
  template <typename I>
  Schema& Int(const char* key, I T::*field, I min, I max, const char* help) {
    static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>, "Int needs an integer field");
    internal::Entry& e = Add(key, help, internal::Kind::kInt, nullptr).Last();
    e.int_min = int64_t(min);
    e.int_max = int64_t(max);
    e.set_int = [field](void* o, int64_t v) { static_cast<T*>(o)->*field = I(v); };
    e.get_int = [field](const void* o) { return int64_t(static_cast<const T*>(o)->*field); };
    return *this;
  }
  Schema& Double(const char* key, double T::*field, double min, double max, const char* help) {
    internal::Entry& e = Add(key, help, internal::Kind::kDouble, Member(field)).Last();
    e.double_min = min;
    e.double_max = max;
    return *this;
  }
  Schema& String(const char* key, std::string T::*field, const char* help) {
    return Add(key, help, internal::Kind::kString, Member(field));
  }
  // A string that must be one of `allowed` (a typo gets the nearest one suggested).
  Schema& Enum(const char* key, std::string T::*field, std::vector<std::string> allowed,
               const char* help) {
    Add(key, help, internal::Kind::kEnum, Member(field)).Last().allowed = std::move(allowed);
    return *this;
  }
  Schema& StringList(const char* key, std::vector<std::string> T::*field, const char* help) {
    return Add(key, help, internal::Kind::kStringList, Member(field));
  }
  // A nested mapping described by its own schema (which is shared, not copied).
  template <typename U>
  Schema& Section(const char* key, U T::*field, const Schema<U>& sub, const char* help = "") {
    Add(key, help, internal::Kind::kSection, Member(field)).Last().section = sub.core();
    return *this;
  }

  std::shared_ptr<const internal::Core> core() const { return core_; }

 private:
  template <typename F>
  static std::function<void*(void*)> Member(F T::*field) {
    return [field](void* o) -> void* { return &(static_cast<T*>(o)->*field); };
  }
  Schema& Add(const char* key, const char* help, internal::Kind kind,
              std::function<void*(void*)> member) {
    internal::Entry e;
    e.key = key;
    e.help = help;
    e.kind = kind;
    e.member = std::move(member);
    core_->entries.push_back(std::move(e));
    return *this;
  }
  internal::Entry& Last() { return core_->entries.back(); }

  std::shared_ptr<internal::Core> core_;
};

// Applies YAML text onto *out: keys the text sets replace the values already there.
template <typename T>
Status LoadString(const std::string& text, const std::string& name, const Schema<T>& schema,
                  T* out) {
  return internal::Load(*schema.core(), text, name, out);
}
// Reads a YAML file (at most 16 MiB) into a T that starts from its defaults.
template <typename T>
StatusOr<T> LoadFile(const std::string& path, const Schema<T>& schema) {
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, kMaxConfigBytes));
  T value{};
  DV_RETURN_IF_ERROR(LoadString(text, path, schema, &value));
  return value;
}
// Every key with its type, range, default and help, one per line (for --help and docs).
template <typename T>
std::string Describe(const Schema<T>& schema) {
  const T defaults{};
  return internal::Describe(*schema.core(), &defaults);
}

}  // namespace dv::config
