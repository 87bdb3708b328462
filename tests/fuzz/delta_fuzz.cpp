// Delta container and every section decoder on arbitrary bytes: against no map (intra frames)
// and against a small synthetic map built once, so the map-section decoder is reached too.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "../maps/scene.h"
#include "dejaview/codec/codec.h"

namespace {

dv::maps::RouteMap* FuzzMap() {
  static std::unique_ptr<dv::maps::RouteMap> map = [] {
    const std::string root = std::filesystem::temp_directory_path() / "dejaview-fuzz-delta";
    std::filesystem::remove_all(root);
    const dv::Drive drive = dv::test::WriteStreetDrive(root + "/drive", {0, 2, 4, 6});
    dv::maps::BuildOptions opt;
    opt.resolution_m = 0.1;
    if (!dv::maps::BuildMap({drive}, opt, root + "/map").ok()) __builtin_trap();
    return dv::maps::OpenMap(root + "/map", 0).value();
  }();
  return map.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (dv::maps::RouteMap* map : {static_cast<dv::maps::RouteMap*>(nullptr), FuzzMap()}) {
    auto frame = dv::codec::Decode(data, size, map);
    if (frame.ok() && frame->cloud.size() != frame->source.size()) __builtin_trap();
  }
  (void)dv::codec::DecodeHeader(data, size);
  return 0;
}
