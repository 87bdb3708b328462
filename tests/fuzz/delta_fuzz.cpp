// Delta container and every section decoder on arbitrary bytes: against no map (intra frames)
// and against a small synthetic map built once at start-up, without and with codec priors, so the
// map-section decoder is reached in both of its starts; on one thread and on two, which must agree.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "../maps/scene.h"
#include "dejaview/codec/codec.h"

namespace {

// The test suite's street map (codec_test.cpp StreetMap), without and with codec priors: the
// golden frames and the seeds were coded against these. Built in LLVMFuzzerInitialize, before
// libFuzzer times any input: building them takes seconds, more on a loaded machine, and must not
// count against the per-input limit.
std::unique_ptr<dv::maps::RouteMap> fuzz_maps[2];
// Their decoders, and one without a map.
std::unique_ptr<dv::codec::Decoder> fuzz_decoders[3];

std::unique_ptr<dv::maps::RouteMap> BuildFuzzMap(bool priors) {
  const std::string root = std::filesystem::temp_directory_path() /
                           (priors ? "dejaview-fuzz-delta-priors" : "dejaview-fuzz-delta");
  std::filesystem::remove_all(root);
  const dv::Drive drive = dv::test::WriteStreetDrive(root + "/drive", {0, 2, 4, 6});
  dv::maps::BuildOptions opt;
  opt.resolution_m = 0.1;
  const dv::Status built = priors ? dv::codec::BuildMapWithPriors({drive}, opt, root + "/map")
                                  : dv::maps::BuildMap({drive}, opt, root + "/map");
  if (!built.ok()) __builtin_trap();
  return dv::maps::OpenMap(root + "/map", 0).value();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz_maps[0] = BuildFuzzMap(false);
  fuzz_maps[1] = BuildFuzzMap(true);
  fuzz_decoders[0] = std::make_unique<dv::codec::Decoder>(nullptr);
  fuzz_decoders[1] = std::make_unique<dv::codec::Decoder>(fuzz_maps[0].get());
  fuzz_decoders[2] = std::make_unique<dv::codec::Decoder>(fuzz_maps[1].get());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!fuzz_decoders[2]) __builtin_trap();  // no set-up here: see above
  for (const auto& decoder : fuzz_decoders) {
    auto frame = decoder->Decode(data, size);
    if (frame.ok() && frame->cloud.size() != frame->source.size()) __builtin_trap();
    // Sections decoded side by side: the same frame, or the same error.
    auto threaded = decoder->Decode(data, size, 2);
    if (threaded.ok() != frame.ok()) __builtin_trap();
    if (frame.ok() && threaded->cloud.xyz != frame->cloud.xyz) __builtin_trap();
    if (!frame.ok() && threaded.status().message() != frame.status().message()) __builtin_trap();
  }
  (void)dv::codec::DecodeHeader(data, size);
  return 0;
}
