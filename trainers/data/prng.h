#pragma once
// ddx's own deterministic random numbers (SplitMix64). Data order and the builtin corpus must be
// identical on every platform and standard library, so nothing here uses <random>'s
// distributions, whose outputs are implementation-defined. Internal to ddx_data.
#include <cstdint>

namespace ddx::data {

// One SplitMix64 output step: a strong 64-bit mixer, also used to derive seeds.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Prng {
 public:
  explicit Prng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  // Uniform in [0, n), n > 0, by rejection (no modulo bias).
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1))); }
  template <typename T, size_t N>
  const T& pick(const T (&items)[N]) { return items[below(N)]; }
  bool chance(uint64_t percent) { return below(100) < percent; }

 private:
  uint64_t state_;
};

}  // namespace ddx::data
