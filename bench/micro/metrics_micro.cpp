// The bench's own hot path: nearest-neighbour distances between two full frames (two of these
// per coded frame and setting), and the k-d tree build they start with.
#include <benchmark/benchmark.h>

#include "dejaview/bench/metrics.h"
#include "frame.h"

namespace dv::micro {
namespace {

void BM_NearestDistances(benchmark::State& state) {
  const auto& p = KittiFrame(0).xyz;
  const auto& q = KittiFrame(1).xyz;
  for (auto _ : state) benchmark::DoNotOptimize(bench::NearestDistances(p, q));
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(p.size()));
}
BENCHMARK(BM_NearestDistances)->Unit(benchmark::kMillisecond);

void BM_CompareFrames(benchmark::State& state) {
  const auto& p = KittiFrame(0).xyz;
  const auto& q = KittiFrame(1).xyz;
  for (auto _ : state) benchmark::DoNotOptimize(bench::CompareFrames(p, q));
}
BENCHMARK(BM_CompareFrames)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dv::micro
