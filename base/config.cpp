#include "dejaview/base/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "text_util.h"

namespace dv::config {

void Problems::Add(const std::string& path, const std::string& what) {
  // The key's own position, else its nearest enclosing section's ("a.b[2].c" -> "a.b[2]" ->
  // "a.b" -> "a" -> ""), else the file name.
  std::string p = path;
  for (;;) {
    const auto it = positions_.find(p);
    if (it != positions_.end()) {
      errors_.push_back(it->second + ": " + path + ": " + what);
      return;
    }
    if (p.empty()) break;
    const size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
  errors_.push_back(name_ + ": " + path + ": " + what);
}

namespace internal {

struct ProblemsAccess {
  static std::string& name(Problems* p) { return p->name_; }
  static std::map<std::string, std::string>& positions(Problems* p) { return p->positions_; }
  static std::vector<std::string>& errors(Problems* p) { return p->errors_; }
};

namespace {

using dv::internal::Printable;
using Context = Problems;

std::string Where(Context* ctx, const YAML::Mark& m) {
  const std::string& name = ProblemsAccess::name(ctx);
  if (m.line < 0) return name;  // yaml-cpp's null mark: no position known
  return name + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

void Error(Context* ctx, const YAML::Node& at, const std::string& path, const std::string& what) {
  ProblemsAccess::errors(ctx).push_back(Where(ctx, at.Mark()) + ": " + path + ": " + what);
}

void Locate(Context* ctx, const YAML::Node& at, const std::string& path) {
  ProblemsAccess::positions(ctx).emplace(path, Where(ctx, at.Mark()));
}

const char* NodeKind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "nothing (null)";
  }
}

// Levenshtein distance; keys are short, and input keys are cut to 64 characters first.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The candidate a typo most likely meant: at most 2 edits away, or a third of the word for long
// keys; "" when none is that close.
std::string Nearest(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string w = word.substr(0, 64);
  const std::string* best = nullptr;
  size_t best_d = 0;
  for (const auto& c : candidates) {
    const size_t d = EditDistance(w, c);
    if (!best || d < best_d) {
      best = &c;
      best_d = d;
    }
  }
  return best && best_d <= std::max<size_t>(2, w.size() / 3) ? *best : "";
}

std::string Join(const std::vector<std::string>& items) {
  std::string all;
  for (const auto& c : items) all += (all.empty() ? "" : ", ") + c;
  return all;
}

// What the entry expects, for "expected X, got Y" messages and Describe.
std::string TypeText(const Entry& e) {
  char buf[96];
  switch (e.kind) {
    case Kind::kBool:
      return "true or false";
    case Kind::kInt:
      std::snprintf(buf, sizeof(buf), "an integer in [%lld, %lld]", (long long)e.int_min,
                    (long long)e.int_max);
      return buf;
    case Kind::kDouble:
      std::snprintf(buf, sizeof(buf), "a number in [%g, %g]", e.double_min, e.double_max);
      return buf;
    case Kind::kString:
      return "a string";
    case Kind::kEnum:
    case Kind::kChoice:
      return "one of " + Join(e.allowed);
    case Kind::kStringList:
      return "a list of strings";
    case Kind::kSection:
      return "a mapping";
    case Kind::kSectionList:
      return "a list of " + std::to_string(e.min_items) + " to " + std::to_string(e.max_items) +
             " mappings";
  }
  return "";
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 24) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0' || end == s.c_str()) return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || end == s.c_str() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

void ApplyMap(const Core& core, const YAML::Node& node, const std::string& path, void* obj,
              Context* ctx);

// Required keys of core (and of its sections) that a mapping at `at` lacks; seen: its keys.
void MissingRequired(const Core& core, const YAML::Node& at, const std::string& path,
                     const std::set<std::string>& seen, Context* ctx) {
  for (const Entry& e : core.entries) {
    if (seen.count(e.key)) continue;
    const std::string key_path = (path.empty() ? "" : path + ".") + e.key;
    if (e.required) Error(ctx, at, key_path, "required key missing");
    if (e.kind == Kind::kSection) MissingRequired(*e.section, at, key_path, {}, ctx);
  }
}

void ApplyList(const Entry& e, const YAML::Node& v, const std::string& path, void* obj,
               Context* ctx) {
  if (!v.IsSequence() || v.size() < e.min_items || v.size() > e.max_items) {
    const std::string got = v.IsSequence() ? "a list of " + std::to_string(v.size()) : NodeKind(v);
    return Error(ctx, v, path, "expected " + TypeText(e) + ", got " + got);
  }
  void* list = e.member(obj);
  e.clear(list);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    Locate(ctx, v[i], item_path);
    ApplyMap(*e.section, v[i], item_path, e.item(list, i), ctx);
  }
}

void ApplyEntry(const Entry& e, const YAML::Node& v, const std::string& path, void* obj,
                Context* ctx) {
  if (e.kind == Kind::kSection) {
    ApplyMap(*e.section, v, path, e.member(obj), ctx);
    return;
  }
  if (e.kind == Kind::kSectionList) return ApplyList(e, v, path, obj, ctx);
  if (e.kind == Kind::kStringList) {
    if (!v.IsSequence())
      return Error(ctx, v, path, "expected a list of strings, got " + std::string(NodeKind(v)));
    std::vector<std::string> items;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].IsScalar()) {
        Error(ctx, v[i], path + "[" + std::to_string(i) + "]",
              "expected a string, got " + std::string(NodeKind(v[i])));
      } else {
        items.push_back(v[i].Scalar());
      }
    }
    *static_cast<std::vector<std::string>*>(e.member(obj)) = std::move(items);
    return;
  }
  if (!v.IsScalar()) {
    return Error(ctx, v, path, "expected " + TypeText(e) + ", got " + NodeKind(v));
  }
  const std::string& s = v.Scalar();
  const std::string shown = "'" + Printable(s) + "'";
  switch (e.kind) {
    case Kind::kBool: {
      bool b = false;
      if (!YAML::convert<bool>::decode(v, b)) {
        return Error(ctx, v, path, "expected true or false, got " + shown);
      }
      *static_cast<bool*>(e.member(obj)) = b;
      return;
    }
    case Kind::kInt: {
      int64_t i = 0;
      if (!ParseInt(s, &i)) return Error(ctx, v, path, "expected an integer, got " + shown);
      if (i < e.int_min || i > e.int_max) {
        return Error(ctx, v, path,
                     s + " is out of range [" + std::to_string(e.int_min) + ", " +
                         std::to_string(e.int_max) + "]");
      }
      e.set_int(obj, i);
      return;
    }
    case Kind::kDouble: {
      double d = 0;
      if (!ParseDouble(s, &d)) return Error(ctx, v, path, "expected a number, got " + shown);
      if (d < e.double_min || d > e.double_max) {
        char range[64];
        std::snprintf(range, sizeof(range), "[%g, %g]", e.double_min, e.double_max);
        return Error(ctx, v, path, Printable(s) + " is out of range " + range);
      }
      *static_cast<double*>(e.member(obj)) = d;
      return;
    }
    case Kind::kString:
      *static_cast<std::string*>(e.member(obj)) = s;
      return;
    case Kind::kEnum:
    case Kind::kChoice: {
      const auto at = std::find(e.allowed.begin(), e.allowed.end(), s);
      if (at == e.allowed.end()) {
        const std::string near = Nearest(s, e.allowed);
        return Error(ctx, v, path,
                     shown + " is not " + TypeText(e) +
                         (near.empty() ? "" : " (did you mean '" + near + "'?)"));
      }
      if (e.kind == Kind::kEnum) {
        *static_cast<std::string*>(e.member(obj)) = s;
      } else {
        e.set_choice(obj, size_t(at - e.allowed.begin()));
      }
      return;
    }
    default:
      return;
  }
}

void ApplyMap(const Core& core, const YAML::Node& node, const std::string& path, void* obj,
              Context* ctx) {
  // An empty section keeps every default (and lacks its required keys).
  if (node.IsNull()) return MissingRequired(core, node, path, {}, ctx);
  if (!node.IsMap()) {
    return Error(ctx, node, path.empty() ? "(top level)" : path,
                 "expected a mapping, got " + std::string(NodeKind(node)));
  }
  std::vector<std::string> keys;
  for (const Entry& e : core.entries) keys.push_back(e.key);
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const YAML::Node k = kv.first;  // copies: yaml-cpp's iterator yields a temporary pair
    if (!k.IsScalar()) {
      Error(ctx, k, path.empty() ? "(top level)" : path,
            "a key must be a string, got " + std::string(NodeKind(k)));
      continue;
    }
    const std::string key_path = (path.empty() ? "" : path + ".") + Printable(k.Scalar());
    if (!seen.insert(k.Scalar()).second) {
      Error(ctx, k, key_path, "duplicate key");
      continue;
    }
    Locate(ctx, k, key_path);
    const auto e = std::find_if(core.entries.begin(), core.entries.end(),
                                [&](const Entry& x) { return x.key == k.Scalar(); });
    if (e == core.entries.end()) {
      const std::string near = Nearest(k.Scalar(), keys);
      Error(ctx, k, key_path,
            near.empty() ? "unknown key (valid keys: " + Join(keys) + ")"
                         : "unknown key (did you mean '" + near + "'?)");
      continue;
    }
    ApplyEntry(*e, kv.second, key_path, obj, ctx);
  }
  MissingRequired(core, node, path, seen, ctx);
}

void DescribeInto(const Core& core, const std::string& path, void* defaults, std::string* out) {
  for (const Entry& e : core.entries) {
    const std::string p = path.empty() ? e.key : path + "." + e.key;
    if (e.kind == Kind::kSection) {
      DescribeInto(*e.section, p, e.member(defaults), out);
      continue;
    }
    if (e.kind == Kind::kSectionList) {
      *out += p + ": " + TypeText(e) + (e.help.empty() ? "" : ": " + e.help) + "\n";
      continue;
    }
    std::string value;
    switch (e.kind) {
      case Kind::kBool:
        value = *static_cast<bool*>(e.member(defaults)) ? "true" : "false";
        break;
      case Kind::kInt:
        value = std::to_string(e.get_int(defaults));
        break;
      case Kind::kDouble: {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%g", *static_cast<double*>(e.member(defaults)));
        value = buf;
        break;
      }
      case Kind::kString:
      case Kind::kEnum:
        value = "'" + *static_cast<std::string*>(e.member(defaults)) + "'";
        break;
      case Kind::kChoice:
        value = "'" + e.allowed.at(e.get_choice(defaults)) + "'";
        break;
      case Kind::kStringList: {
        for (const auto& s : *static_cast<std::vector<std::string>*>(e.member(defaults))) {
          value += (value.empty() ? "'" : ", '") + s + "'";
        }
        value = "[" + value + "]";
        break;
      }
      case Kind::kSection:
      case Kind::kSectionList:
        break;
    }
    *out += p + ": " + TypeText(e) + ", default " + value + (e.help.empty() ? "" : ": " + e.help) +
            "\n";
  }
}

}  // namespace

Status Load(const Core& core, const std::string& text, const std::string& name, void* obj,
            const std::function<void(const void*, Problems*)>& check) {
  Problems ctx;
  ProblemsAccess::name(&ctx) = name;
  try {
    const YAML::Node root = YAML::Load(text);
    Locate(&ctx, root, "");
    ApplyMap(core, root, "", obj, &ctx);
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports syntax errors (and its depth limit) only by exception; this is the
    // boundary where they become a Status.
    return Status::InvalidArgument(Where(&ctx, e.mark) + ": YAML syntax error: " + e.msg);
  }
  if (check) check(obj, &ctx);
  const std::vector<std::string>& errors = ProblemsAccess::errors(&ctx);
  if (errors.empty()) return Status::Ok();
  std::string all;
  for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
  return Status::InvalidArgument(all);
}

std::string Describe(const Core& core, const void* defaults) {
  std::string out;
  // Entries hand out mutable pointers; Describe only reads through them.
  DescribeInto(core, "", const_cast<void*>(defaults), &out);
  return out;
}

}  // namespace internal
}  // namespace dv::config
