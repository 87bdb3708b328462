// A small deterministic random source (splitmix64). std::*_distribution output differs between
// standard libraries, so the simulator draws through this to keep a seed's bytes identical on
// every platform.
#pragma once

#include <cmath>
#include <cstdint>

namespace dv::sim {

inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// One stream per (seed, a, b): e.g. (seed, day, object id) or (seed, day, frame).
inline uint64_t StreamSeed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return Mix(Mix(Mix(seed) ^ a) ^ (b * 0x2545f4914f6cdd1dull));
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix(state_++); }
  double Uniform() { return double(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  bool Chance(double p) { return Uniform() < p; }
  double Normal() {  // Box-Muller; one value per call keeps the stream simple
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace dv::sim
