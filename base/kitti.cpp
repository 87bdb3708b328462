#include "dejaview/base/kitti.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "dejaview/base/file_util.h"

namespace dv {

std::vector<uint8_t> EncodeKittiBin(const PointCloud& cloud) {
  std::vector<uint8_t> out(cloud.size() * 16);
  for (size_t i = 0; i < cloud.size(); ++i) {
    const float v[4] = {cloud.xyz[i].x(), cloud.xyz[i].y(), cloud.xyz[i].z(), cloud.intensity[i]};
    std::memcpy(out.data() + i * 16, v, 16);
  }
  return out;
}

StatusOr<PointCloud> DecodeKittiBin(const uint8_t* data, size_t size, const std::string& name) {
  if (size % 16 != 0) {
    return Status::Corruption(name + ": size " + std::to_string(size) +
                              " is not a multiple of 16 bytes (x, y, z, reflectance float32)");
  }
  const size_t n = size / 16;
  if (n > kMaxPointsPerFrame) {
    return Status::OutOfRange(name + ": " + std::to_string(n) + " points exceeds the limit of " +
                              std::to_string(kMaxPointsPerFrame));
  }
  PointCloud cloud;
  cloud.xyz.resize(n);
  cloud.intensity.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float v[4];
    std::memcpy(v, data + i * 16, 16);
    cloud.xyz[i] = Eigen::Vector3f(v[0], v[1], v[2]);
    cloud.intensity[i] = v[3];
  }
  return cloud;
}

StatusOr<PointCloud> ReadKittiBin(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path, kMaxPointsPerFrame * 16));
  return DecodeKittiBin(bytes.data(), bytes.size(), path);
}

Status WriteKittiBin(const std::string& path, const PointCloud& cloud) {
  return WriteFileAtomic(path, EncodeKittiBin(cloud));
}

namespace {

// Splits text into lines, skipping blank ones, keeping 1-based line numbers for messages.
template <typename Fn>
Status ForEachLine(const std::string& text, Fn&& fn) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    DV_RETURN_IF_ERROR(fn(line, line_no));
  }
  return Status::Ok();
}

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9e", v);
  return buf;
}

}  // namespace

StatusOr<std::vector<Pose>> ReadKittiPoses(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, 256u << 20));
  return ParseKittiPoses(text, path);
}

StatusOr<std::vector<std::array<double, 12>>> ReadKittiPoseRows(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, 256u << 20));
  return ParseKittiPoseRows(text, path);
}

StatusOr<std::vector<Pose>> ParseKittiPoses(const std::string& text, const std::string& path) {
  DV_ASSIGN_OR_RETURN(const auto rows, ParseKittiPoseRows(text, path));
  std::vector<Pose> poses;
  poses.reserve(rows.size());
  for (const auto& v : rows) poses.push_back(PoseFromKitti12(v));
  return poses;
}

StatusOr<std::vector<std::array<double, 12>>> ParseKittiPoseRows(const std::string& text,
                                                                 const std::string& path) {
  std::vector<std::array<double, 12>> rows;
  Status s = ForEachLine(text, [&](const std::string& line, int line_no) {
    std::istringstream ls(line);
    std::array<double, 12> v{};
    for (int k = 0; k < 12; ++k) {
      if (!(ls >> v[k])) {
        return Status::Corruption(path + ":" + std::to_string(line_no) +
                                  ": expected 12 numbers, got " + std::to_string(k));
      }
      if (!std::isfinite(v[k])) {
        return Status::Corruption(path + ":" + std::to_string(line_no) + ": non-finite number");
      }
    }
    std::string extra;
    if (ls >> extra) {
      return Status::Corruption(path + ":" + std::to_string(line_no) +
                                ": more than 12 numbers (unexpected '" + extra + "')");
    }
    rows.push_back(v);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return rows;
}

Status WriteKittiPoses(const std::string& path, const std::vector<Pose>& poses) {
  std::string out;
  for (const Pose& T : poses) {
    const auto v = PoseToKitti12(T);
    for (int k = 0; k < 12; ++k) {
      out += FormatDouble(v[k]);
      out += k == 11 ? '\n' : ' ';
    }
  }
  return WriteFileAtomic(path, out);
}

StatusOr<std::vector<double>> ReadTimestamps(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, 64u << 20));
  return ParseTimestamps(text, path);
}

StatusOr<std::vector<double>> ParseTimestamps(const std::string& text, const std::string& path) {
  std::vector<double> ts;
  Status s = ForEachLine(text, [&](const std::string& line, int line_no) {
    std::istringstream ls(line);
    double v;
    std::string extra;
    if (!(ls >> v) || !std::isfinite(v) || (ls >> extra)) {
      return Status::Corruption(path + ":" + std::to_string(line_no) +
                                ": expected one finite number, got '" + line + "'");
    }
    ts.push_back(v);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return ts;
}

Status WriteTimestamps(const std::string& path, const std::vector<double>& seconds) {
  std::string out;
  for (double t : seconds) out += FormatDouble(t) + "\n";
  return WriteFileAtomic(path, out);
}

Status WriteTimestampsNs(const std::string& path, const std::vector<int64_t>& ns) {
  std::string out;
  for (int64_t t : ns) {
    // The magnitude as unsigned: -INT64_MIN does not fit an int64_t.
    const uint64_t abs_ns = t < 0 ? 0 - uint64_t(t) : uint64_t(t);
    char line[32];
    std::snprintf(line, sizeof(line), "%s%llu.%09llu\n", t < 0 ? "-" : "",
                  (unsigned long long)(abs_ns / 1'000'000'000),
                  (unsigned long long)(abs_ns % 1'000'000'000));
    out += line;
  }
  return WriteFileAtomic(path, out);
}

StatusOr<std::vector<uint32_t>> ReadLabels(const std::string& path, size_t expected_points) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path, kMaxPointsPerFrame * 4));
  if (bytes.size() != expected_points * 4) {
    return Status::Corruption(path + ": " + std::to_string(bytes.size()) + " bytes holds " +
                              std::to_string(bytes.size() / 4) + " labels, the frame has " +
                              std::to_string(expected_points) + " points");
  }
  std::vector<uint32_t> labels(expected_points);
  std::memcpy(labels.data(), bytes.data(), bytes.size());
  return labels;
}

Status WriteLabels(const std::string& path, const std::vector<uint32_t>& labels) {
  return WriteFileAtomic(path, labels.data(), labels.size() * 4);
}

}  // namespace dv
