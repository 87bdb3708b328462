// YAML configuration, declared once per component. A component keeps its options in a struct
// whose member initialisers are the defaults, and describes it with a Schema: for each key its
// type and valid range. Loading a file fills the struct and rejects, all at once, every unknown
// key (suggesting the nearest valid one), wrong type and out-of-range value, each as
//   FILE:LINE:COL: key.path: problem
// where key.path is the dotted path from the top of the file ("agent.spool.budget_mb").
// Keys missing from the file keep their defaults, except those marked Required(). Rules that
// span keys (give both or neither, one key needed by another's value) are a check function run
// after the schema's own, whose problems are placed at their key's position too; duplicate keys
// are refused. Rules in docs/formats.md ("Config").
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

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dejaview/base/file_util.h"
#include "dejaview/base/status.h"

namespace dv::config {

constexpr uint64_t kMaxConfigBytes = 16u << 20;

namespace internal {

enum class Kind {
  kBool,
  kInt,
  kDouble,
  kString,
  kEnum,
  kChoice,
  kStringList,
  kSection,
  kSectionList
};

struct Entry;
// The untyped schema every Schema<T> builds; Load walks it against a YAML document.
struct Core {
  std::vector<Entry> entries;
};

struct Entry {
  std::string key;
  std::string help;
  Kind kind;
  int64_t int_min = 0, int_max = 0;  // kInt: in the file's unit
  int64_t int_unit = 1;              // kInt: the field holds the file's value times this
  double double_min = 0, double_max = 0;
  std::vector<std::string> allowed;               // kEnum, kChoice
  std::function<void(void*, size_t)> set_choice;  // kChoice: stores allowed[i]'s value
  std::function<size_t(const void*)> get_choice;  // kChoice: for Describe
  bool required = false;
  std::shared_ptr<const Core> section;          // kSection, kSectionList (each item's schema)
  size_t min_items = 0, max_items = 0;          // kSectionList
  std::function<void*(void*, size_t)> item;     // kSectionList: list -> its item i, grown to fit
  std::function<void(void*)> clear;             // kSectionList: empties the list
  std::function<void*(void*)> member;           // object -> its field (all but kInt)
  std::function<void(void*, int64_t)> set_int;  // kInt: stores into the field's own type
  std::function<int64_t(const void*)> get_int;  // kInt: for Describe
};

struct ProblemsAccess;  // config.cpp: how Load fills and reads a Problems

}  // namespace internal

// Problems a check function finds after the schema has been applied, each reported at the
// position of the key it names (a dotted path such as "upload.link_endpoint", or
// "sensors[1].topic"): where the file sets it, else where its nearest enclosing section is, else
// the file name alone.
class Problems {
 public:
  void Add(const std::string& path, const std::string& what);

 private:
  friend struct internal::ProblemsAccess;
  std::string name_;
  std::map<std::string, std::string> positions_;  // key path -> "name:line:col"
  std::vector<std::string> errors_;
};

namespace internal {

// Parses text as YAML and applies it to obj through core, then runs check (when set) on obj;
// every problem of both is in the one Status. name is the file name in messages.
Status Load(const Core& core, const std::string& text, const std::string& name, void* obj,
            const std::function<void(const void*, Problems*)>& check);
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
  // Any integer type; the range must lie within int64. With a unit, the file gives the value in
  // that unit ("budget_kb" with unit 1024 into a field of bytes); min and max are in the file's
  // unit, and max * unit must fit the field.
  template <typename I>
  Schema& Int(const char* key, I T::*field, int64_t min, int64_t max, const char* help,
              int64_t unit = 1) {
    static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>, "Int needs an integer field");
    internal::Entry& e = Add(key, help, internal::Kind::kInt, nullptr).Last();
    e.int_min = min;
    e.int_max = max;
    e.int_unit = unit;
    e.set_int = [field, unit](void* o, int64_t v) { static_cast<T*>(o)->*field = I(v * unit); };
    e.get_int = [field, unit](const void* o) {
      return int64_t(static_cast<const T*>(o)->*field) / unit;
    };
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
  // A name from `names` stored as its value (an enum field); a typo gets the nearest suggested.
  template <typename E>
  Schema& Choice(const char* key, E T::*field, std::vector<std::pair<std::string, E>> names,
                 const char* help) {
    internal::Entry& e = Add(key, help, internal::Kind::kChoice, nullptr).Last();
    std::vector<E> values;
    for (auto& [name, value] : names) {
      e.allowed.push_back(name);
      values.push_back(value);
    }
    e.set_choice = [field, values](void* o, size_t i) { static_cast<T*>(o)->*field = values[i]; };
    e.get_choice = [field, values](const void* o) {
      const E v = static_cast<const T*>(o)->*field;
      return size_t(std::find(values.begin(), values.end(), v) - values.begin());
    };
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
  // A list of min_items..max_items mappings, each described by sub and starting from U's
  // defaults; a list in the file replaces the whole default list.
  template <typename U>
  Schema& SectionList(const char* key, std::vector<U> T::*field, const Schema<U>& sub,
                      size_t min_items, size_t max_items, const char* help) {
    internal::Entry& e = Add(key, help, internal::Kind::kSectionList, Member(field)).Last();
    e.section = sub.core();
    e.min_items = min_items;
    e.max_items = max_items;
    e.item = [](void* list, size_t i) -> void* {
      auto* v = static_cast<std::vector<U>*>(list);
      if (v->size() <= i) v->resize(i + 1);
      return &(*v)[i];
    };
    e.clear = [](void* list) { static_cast<std::vector<U>*>(list)->clear(); };
    return *this;
  }
  // The key added last must be in the file (a key of a section also when the whole section is
  // absent).
  Schema& Required() {
    Last().required = true;
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

template <typename T>
using Check = std::function<void(const T&, Problems*)>;

// Applies YAML text onto *out: keys the text sets replace the values already there; then check.
template <typename T>
Status LoadString(const std::string& text, const std::string& name, const Schema<T>& schema, T* out,
                  const Check<T>& check = nullptr) {
  std::function<void(const void*, Problems*)> untyped;
  if (check) untyped = [&](const void* o, Problems* p) { check(*static_cast<const T*>(o), p); };
  return internal::Load(*schema.core(), text, name, out, untyped);
}
// Reads a YAML file (at most 16 MiB) into a T that starts from its defaults.
template <typename T>
StatusOr<T> LoadFile(const std::string& path, const Schema<T>& schema,
                     const Check<T>& check = nullptr) {
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, kMaxConfigBytes));
  T value{};
  DV_RETURN_IF_ERROR(LoadString(text, path, schema, &value, check));
  return value;
}
// Every key with its type, range, default and help, one per line (for --help and docs).
template <typename T>
std::string Describe(const Schema<T>& schema) {
  const T defaults{};
  return internal::Describe(*schema.core(), &defaults);
}

}  // namespace dv::config
