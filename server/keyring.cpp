#include "dejaview/server/keyring.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "dejaview/transport/spool.h"
#include "dejaview/transport/upload.h"

namespace dv::server {

namespace fs = std::filesystem;

namespace {
// A keys directory is for a fleet, not a denial of service on the server's memory.
constexpr size_t kMaxKeyFiles = 1'000'000;
constexpr const char* kSuffix = ".public";
}  // namespace

StatusOr<KeyRing> KeyRing::Load(const std::string& dir, std::vector<std::string>* problems) {
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
  // Sorted, so that which of two files sharing one key is refused does not depend on readdir.
  std::sort(files.begin(), files.end());
  KeyRing ring;
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
    const auto [at, fresh] = ring.by_key_.emplace(*key, vehicle);
    if (!fresh) {
      problems->push_back(f.string() + ": the same key as vehicle '" + at->second +
                          "'; one key identifies one vehicle");
    }
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
