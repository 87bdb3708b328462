// Which table of cpu/kernels.h this CPU runs. The build decides which tables exist (CMake
// compiles sse2.cpp and avx2.cpp for x86-64 alone, and defines DEJAVIEW_X86_64_KERNELS there);
// the CPU decides, once, whether AVX2 is among them.
#include <atomic>

#include "cpu/variants.h"

namespace dv::codec {
namespace {

#ifdef DEJAVIEW_X86_64_KERNELS
const cpu::Kernels* BuiltSse2() { return &cpu::kSse2Kernels; }
const cpu::Kernels* BuiltAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has ? &cpu::kAvx2Kernels : nullptr;
}
#else
const cpu::Kernels* BuiltSse2() { return nullptr; }
const cpu::Kernels* BuiltAvx2() { return nullptr; }
#endif

std::atomic<bool> avx2_allowed{true};

}  // namespace

bool CpuHasAvx2() { return BuiltAvx2() != nullptr && avx2_allowed.load(std::memory_order_relaxed); }

void AllowAvx2(bool allow) { avx2_allowed.store(allow, std::memory_order_relaxed); }

namespace cpu {

const Kernels& Scalar() { return kScalarKernels; }
const Kernels* Sse2() { return BuiltSse2(); }
const Kernels* Avx2() { return BuiltAvx2(); }

const Kernels& Best() {
  if (CpuHasAvx2()) return *Avx2();
  const Kernels* sse2 = Sse2();
  return sse2 ? *sse2 : Scalar();
}

std::vector<const Kernels*> Variants() {
  std::vector<const Kernels*> all = {&Scalar()};
  for (const Kernels* k : {Sse2(), Avx2()}) {
    if (k) all.push_back(k);
  }
  return all;
}

}  // namespace cpu
}  // namespace dv::codec
