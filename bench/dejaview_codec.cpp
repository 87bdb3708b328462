// The dejaview delta codec behind the bench's Codec interface, through the public API of
// dejaview_codec and dejaview_maps (COMMON.md contract). Built only when those libraries exist in
// the tree, so the bench builds and measures the peers without them.
#include "dejaview/bench/codec.h"

#ifdef DEJAVIEW_HAVE_CODEC
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "dejaview/codec/codec.h"
#include "dejaview/maps/route_map.h"

namespace dv::bench {
namespace {

// Enough for every tile of a KITTI-length pseudo-revisit; the map loader stays bounded by it.
constexpr size_t kMapMemoryBudgetBytes = size_t(512) << 20;

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

class DejaviewCodec : public Codec {
 public:
  std::string name() const override { return "dejaview"; }
  std::string knob_name() const override { return "T_m"; }
  std::vector<double> DefaultKnobs() const override { return {0.05, 0.1, 0.15, 0.2, 0.3, 0.4}; }

  // The protocol: the map is built at resolution T for tolerance T.
  Status Prepare(const std::vector<Drive>& map_drives, double tolerance_m,
                 const std::string& scratch_dir) override {
    map_.reset();
    map_bytes_ = 0;
    if (map_drives.empty()) return Status::Ok();  // intra coding of every frame
    std::ostringstream dir;
    dir << scratch_dir << "/map_T" << tolerance_m;
    std::error_code ec;
    std::filesystem::remove_all(dir.str(), ec);
    maps::BuildOptions options;
    options.resolution_m = tolerance_m;
    DV_RETURN_IF_ERROR(maps::BuildMap(map_drives, options, dir.str()));
    DV_ASSIGN_OR_RETURN(map_, maps::OpenMap(dir.str(), kMapMemoryBudgetBytes));
    map_bytes_ = DirectoryBytes(dir.str());
    return Status::Ok();
  }
  uint64_t map_bytes() const override { return map_bytes_; }

  StatusOr<EncodedFrame> Encode(const PointCloud& frame, const Pose& T_map_sensor_prior,
                                const FrameContext& context, double tolerance_m) override {
    codec::EncoderParams params;
    params.tolerance_m = tolerance_m;
    params.residual_precision_m = std::min(params.residual_precision_m, tolerance_m);
    params.intensity = context.intensity;
    codec::FrameInfo info;
    info.sequence = context.sequence;
    info.timestamp_ns = context.timestamp_ns;
    codec::EncodeReport report;
    DV_ASSIGN_OR_RETURN(
        auto bytes, codec::Encode(frame, T_map_sensor_prior, info, params, map_.get(), &report));
    EncodedFrame out;
    out.bytes = std::move(bytes);
    out.sections = report.section_bytes;
    out.fallback = report.intra_fallback;
    return out;
  }

  StatusOr<DecodedCloud> Decode(const std::vector<uint8_t>& bytes) override {
    DV_ASSIGN_OR_RETURN(codec::DecodedFrame frame,
                        codec::Decode(bytes.data(), bytes.size(), map_.get()));
    return DecodedCloud{std::move(frame.cloud), std::move(frame.source)};
  }

 private:
  std::unique_ptr<maps::RouteMap> map_;
  uint64_t map_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Codec> MakeDejaviewCodec() { return std::make_unique<DejaviewCodec>(); }

}  // namespace dv::bench
#else
namespace dv::bench {
std::unique_ptr<Codec> MakeDejaviewCodec() { return nullptr; }
}  // namespace dv::bench
#endif
