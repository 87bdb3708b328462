// Encode and decode of every built-in codec on one real frame, at a setting near CD 0.10 m for
// the lossy ones (the knob is the benchmark argument).
#include <benchmark/benchmark.h>

#include "dejaview/bench/codec.h"
#include "frame.h"

namespace dv::micro {
namespace {

void Encode(benchmark::State& state, const char* name) {
  auto codec = std::move(bench::MakeCodec(name)).value();
  const double knob = double(state.range(0)) / 1000.0;
  const bench::FrameContext ctx{0, 0, true};
  for (auto _ : state) {
    auto e = codec->Encode(KittiFrame(1), Pose::Identity(), ctx, knob);
    benchmark::DoNotOptimize(e);
  }
}

void Decode(benchmark::State& state, const char* name) {
  auto codec = std::move(bench::MakeCodec(name)).value();
  const double knob = double(state.range(0)) / 1000.0;
  const auto bytes =
      codec->Encode(KittiFrame(1), Pose::Identity(), bench::FrameContext{0, 0, true}, knob)->bytes;
  for (auto _ : state) {
    auto d = codec->Decode(bytes);
    benchmark::DoNotOptimize(d);
  }
}

// Arguments are knob * 1000: zstd level 3, LZ4 level 1, grid step 0.2 m, Draco 10 bits.
BENCHMARK_CAPTURE(Encode, zstd, "zstd")->Arg(3000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Decode, zstd, "zstd")->Arg(3000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Encode, lz4, "lz4")->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Decode, lz4, "lz4")->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Encode, grid_zstd, "grid+zstd")->Arg(200)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Decode, grid_zstd, "grid+zstd")->Arg(200)->Unit(benchmark::kMillisecond);
#ifdef DEJAVIEW_HAVE_DRACO
BENCHMARK_CAPTURE(Encode, draco, "draco")->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Decode, draco, "draco")->Arg(10000)->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace dv::micro
