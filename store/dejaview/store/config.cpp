#include "dejaview/store/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "dejaview/base/file_util.h"

namespace dv::store {
namespace {

// yaml-cpp reports with exceptions; they are turned into a Status naming the key right here.
template <typename T>
Status Read(const YAML::Node& node, const char* key, const std::string& where, T* out) {
  const YAML::Node v = node[key];
  if (!v) return Status::Ok();
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(where + "." + key + ": invalid value '" +
                                   (v.IsScalar() ? v.Scalar() : std::string("<not a scalar>")) +
                                   "'");
  }
  return Status::Ok();
}

Status ReadLimits(const YAML::Node& node, const std::string& where, TierLimits* limits) {
  DV_RETURN_IF_ERROR(Read(node, "max_inflight", where, &limits->max_inflight));
  DV_RETURN_IF_ERROR(Read(node, "bandwidth_mbps", where, &limits->bandwidth_mbps));
  if (limits->max_inflight < 1 || limits->max_inflight > 256) {
    return Status::InvalidArgument(where + ".max_inflight: must be 1..256");
  }
  if (!(limits->bandwidth_mbps > 0)) {
    return Status::InvalidArgument(where + ".bandwidth_mbps: must be positive");
  }
  return Status::Ok();
}

Status CheckKeys(const YAML::Node& node, const std::string& where,
                 std::initializer_list<const char*> known) {
  if (!node.IsMap()) return Status::InvalidArgument(where + ": expected a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) return Status::InvalidArgument(where + "." + key + ": unknown key");
  }
  return Status::Ok();
}

Status Parse(const YAML::Node& root, const std::string& what, StoreConfig* c) {
  DV_RETURN_IF_ERROR(CheckKeys(root, what, {"memory", "disk", "remote", "copier", "read"}));
  if (const YAML::Node m = root["memory"]) {
    const std::string w = what + ": memory";
    DV_RETURN_IF_ERROR(CheckKeys(m, w, {"budget_bytes", "max_inflight", "bandwidth_mbps"}));
    DV_RETURN_IF_ERROR(Read(m, "budget_bytes", w, &c->memory_budget_bytes));
    DV_RETURN_IF_ERROR(ReadLimits(m, w, &c->memory));
  }
  const YAML::Node d = root["disk"];
  if (!d) return Status::InvalidArgument(what + ": disk: required (the tier that acknowledges)");
  const std::string dw = what + ": disk";
  DV_RETURN_IF_ERROR(
      CheckKeys(d, dw, {"dir", "budget_bytes", "direct_io", "max_inflight", "bandwidth_mbps"}));
  DV_RETURN_IF_ERROR(Read(d, "direct_io", dw, &c->disk_direct_io));
  DV_RETURN_IF_ERROR(Read(d, "dir", dw, &c->disk_dir));
  if (c->disk_dir.empty()) return Status::InvalidArgument(dw + ".dir: required");
  DV_RETURN_IF_ERROR(Read(d, "budget_bytes", dw, &c->disk_budget_bytes));
  DV_RETURN_IF_ERROR(ReadLimits(d, dw, &c->disk));
  if (const YAML::Node r = root["remote"]) {
    const std::string w = what + ": remote";
    DV_RETURN_IF_ERROR(CheckKeys(r, w,
                                 {"endpoint", "bucket", "region", "prefix", "max_inflight",
                                  "bandwidth_mbps", "timeout_ms"}));
    c->remote_enabled = true;
    DV_RETURN_IF_ERROR(Read(r, "endpoint", w, &c->s3.endpoint));
    DV_RETURN_IF_ERROR(Read(r, "bucket", w, &c->s3.bucket));
    DV_RETURN_IF_ERROR(Read(r, "region", w, &c->s3.region));
    DV_RETURN_IF_ERROR(Read(r, "prefix", w, &c->remote_prefix));
    DV_RETURN_IF_ERROR(Read(r, "timeout_ms", w, &c->s3.timeout_ms));
    DV_RETURN_IF_ERROR(ReadLimits(r, w, &c->remote));
    if (c->s3.endpoint.find("://") == std::string::npos) {
      return Status::InvalidArgument(w + ".endpoint: expected http://host:port, got '" +
                                     c->s3.endpoint + "'");
    }
    if (c->s3.bucket.empty()) return Status::InvalidArgument(w + ".bucket: required");
    const char* id = std::getenv("AWS_ACCESS_KEY_ID");
    const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
    if (!id || !secret || !*id || !*secret) {
      return Status::InvalidArgument(
          w + ": AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set in the environment");
    }
    c->s3.access_key = id;
    c->s3.secret_key = secret;
  }
  if (const YAML::Node cp = root["copier"]) {
    const std::string w = what + ": copier";
    DV_RETURN_IF_ERROR(CheckKeys(
        cp, w,
        {"concurrency", "pack_target_bytes", "small_object_bytes", "coalesce_ms", "journal"}));
    DV_RETURN_IF_ERROR(Read(cp, "concurrency", w, &c->copy_concurrency));
    DV_RETURN_IF_ERROR(Read(cp, "pack_target_bytes", w, &c->pack_target_bytes));
    DV_RETURN_IF_ERROR(Read(cp, "small_object_bytes", w, &c->small_object_bytes));
    DV_RETURN_IF_ERROR(Read(cp, "coalesce_ms", w, &c->coalesce_ms));
    DV_RETURN_IF_ERROR(Read(cp, "journal", w, &c->journal_path));
    if (c->copy_concurrency < 1 || c->copy_concurrency > 64) {
      return Status::InvalidArgument(w + ".concurrency: must be 1..64");
    }
    if (c->pack_target_bytes > (1ull << 30)) {
      return Status::InvalidArgument(w + ".pack_target_bytes: at most 1 GiB");
    }
  }
  if (const YAML::Node rd = root["read"]) {
    const std::string w = what + ": read";
    DV_RETURN_IF_ERROR(CheckKeys(rd, w, {"chunk_bytes"}));
    DV_RETURN_IF_ERROR(Read(rd, "chunk_bytes", w, &c->read_chunk_bytes));
    if (c->read_chunk_bytes < 4096)
      return Status::InvalidArgument(w + ".chunk_bytes: at least 4096");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StoreConfig> ParseStoreConfig(const std::string& yaml, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(what + ": YAML: " + e.what());
  }
  StoreConfig c;
  try {
    DV_RETURN_IF_ERROR(Parse(root, what, &c));
  } catch (const YAML::Exception& e) {  // e.g. a key that is itself a mapping
    return Status::InvalidArgument(what + ": YAML: " + e.what());
  }
  return c;
}

StatusOr<StoreConfig> LoadStoreConfig(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, 1 << 20));
  return ParseStoreConfig(text, path);
}

}  // namespace dv::store
