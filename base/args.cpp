#include "dejaview/base/args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace dv::cli {

StatusOr<Args> Args::Parse(int argc, char** argv, const std::set<std::string>& value_keys,
                           const std::set<std::string>& flag_keys) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "-h" && flag_keys.count("help")) {
      a.flags_.insert("help");
      continue;
    }
    if (s.rfind("--", 0) != 0 || s == "--") {
      a.positional_.push_back(s);
      continue;
    }
    // "--key value" or "--key=value" (the value may itself hold '=').
    const size_t eq = s.find('=');
    const std::string key = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (flag_keys.count(key)) {
      if (eq != std::string::npos)
        return Status::InvalidArgument("option --" + key + " takes no value");
      a.flags_.insert(key);
    } else if (value_keys.count(key)) {
      if (eq != std::string::npos) {
        a.values_.emplace(key, s.substr(eq + 1));
        continue;
      }
      if (i + 1 >= argc) return Status::InvalidArgument("option --" + key + " needs a value");
      a.values_.emplace(key, argv[++i]);
    } else {
      return Status::InvalidArgument("unknown option --" + key);
    }
  }
  return a;
}

std::string Args::Get(const std::string& key, const std::string& def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

std::vector<std::string> Args::GetAll(const std::string& key) const {
  std::vector<std::string> out;
  for (auto [it, end] = values_.equal_range(key); it != end; ++it) out.push_back(it->second);
  return out;
}

StatusOr<double> Args::GetDouble(const std::string& key, double def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(it->second.c_str(), &end);
  if (errno != 0 || end == it->second.c_str() || *end != '\0') {
    return Status::InvalidArgument("--" + key + ": '" + it->second + "' is not a number");
  }
  return v;
}

StatusOr<long> Args::GetInt(const std::string& key, long def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(it->second.c_str(), &end, 10);
  if (errno != 0 || end == it->second.c_str() || *end != '\0') {
    return Status::InvalidArgument("--" + key + ": '" + it->second + "' is not an integer");
  }
  return v;
}

int Fail(const std::string& cmd, const Status& s) {
  std::fprintf(stderr, "dejaview %s: %s\n", cmd.c_str(), s.ToString().c_str());
  switch (s.code()) {
    case Status::Code::kInvalidArgument:
      return kUsage;
    case Status::Code::kCorruption:
    case Status::Code::kOutOfRange:
      return kBadInput;
    default:
      return kFailure;
  }
}

}  // namespace dv::cli
