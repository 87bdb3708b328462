#include "dejaview/server/keyring.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "dejaview/transport/spool.h"
#include "dejaview/transport/upload.h"

namespace dv::server {

namespace fs = std::filesystem;

namespace {
// A keys directory is for a fleet, not a denial of service on the server's memory.
constexpr size_t kMaxKeyFiles = 1'000'000;
constexpr const char* kSuffix = ".public";

struct KeyFile {
  fs::path path;
  std::string vehicle;
  fs::file_time_type modified;
};
}  // namespace

StatusOr<KeyRing> KeyRing::Load(const std::string& dir, std::vector<std::string>* problems,
                                const KeyRing* previous) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::IoError(dir + ": keys directory: " + ec.message());
  std::vector<fs::path> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Status::IoError(dir + ": keys directory: " + ec.message());
    const std::string name = it->path().filename().string();
    const size_t n = std::strlen(kSuffix);
    if (name.size() <= n || name.compare(name.size() - n, n, kSuffix) != 0) continue;
    if (files.size() == kMaxKeyFiles) {
      return Status::OutOfRange(dir + ": more than 1000000 key files");
    }
    files.push_back(it->path());
  }
  // Sorted, so that the problems come in the same order whatever readdir's.
  std::sort(files.begin(), files.end());
  std::map<std::string, std::vector<KeyFile>> claims;  // Z85 public key -> the files holding it
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    const std::string vehicle = name.substr(0, name.size() - std::strlen(kSuffix));
    const Status named = transport::ValidateName(f.string() + ": vehicle id", vehicle);
    if (!named.ok()) {
      problems->push_back(named.message());
      continue;
    }
    auto key = transport::LoadCurvePublicKeyFile(f.string());
    if (!key.ok()) {
      problems->push_back(key.status().message());
      continue;
    }
    const fs::file_time_type modified = fs::last_write_time(f, ec);
    if (ec) {
      problems->push_back(f.string() + ": " + ec.message());
      continue;
    }
    claims[*key].push_back({f, vehicle, modified});
  }
  KeyRing ring;
  std::vector<std::pair<fs::path, std::string>> refused;  // file, the vehicle that kept its key
  for (const auto& [key, holders] : claims) {
    const std::string* enrolled = previous ? previous->VehicleOf(key) : nullptr;
    auto first = [enrolled](const KeyFile& a, const KeyFile& b) {
      const bool a_enrolled = enrolled && *enrolled == a.vehicle;
      const bool b_enrolled = enrolled && *enrolled == b.vehicle;
      if (a_enrolled != b_enrolled) return a_enrolled;
      if (a.modified != b.modified) return a.modified < b.modified;
      return a.vehicle < b.vehicle;
    };
    const KeyFile& kept = *std::min_element(holders.begin(), holders.end(), first);
    ring.by_key_.emplace(key, kept.vehicle);
    for (const KeyFile& h : holders) {
      if (&h != &kept) refused.emplace_back(h.path, kept.vehicle);
    }
  }
  std::sort(refused.begin(), refused.end());
  for (const auto& [file, vehicle] : refused) {
    problems->push_back(file.string() + ": the same key as vehicle '" + vehicle +
                        "'; one key identifies one vehicle");
  }
  return ring;
}

const std::string* KeyRing::VehicleOf(const std::string& public_z85) const {
  const auto it = by_key_.find(public_z85);
  return it == by_key_.end() ? nullptr : &it->second;
}

bool KeyRing::Enrolled(const std::string& vehicle, const std::string& public_z85) const {
  const std::string* v = VehicleOf(public_z85);
  return v != nullptr && *v == vehicle;
}

}  // namespace dv::server
