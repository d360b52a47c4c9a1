// data/rng.hpp — the data path's own small, portable RNG (std:: distributions differ between standard
// libraries; permutations must be identical on every rank and every machine).
#pragma once

#include <cstdint>
#include <vector>

namespace hetrain::data {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Counter-free generator seeded from any number of words.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(splitmix64(seed)) {}
  Rng(uint64_t a, uint64_t b) : s_(splitmix64(splitmix64(a) ^ (b * 0xD1B54A32D192ED03ull))) {}
  uint64_t next() { return splitmix64(s_++); }
  // Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t below(uint64_t n) {
    if (n <= 1) return 0;
    for (;;) {
      __uint128_t m = __uint128_t(next()) * n;
      uint64_t lo = uint64_t(m);
      if (lo >= n || lo >= (-n) % n) return uint64_t(m >> 64);
    }
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)

 private:
  uint64_t s_;
};

// Fisher–Yates permutation of 0..n-1 from one seed.
inline std::vector<int64_t> seeded_permutation(uint64_t seed, int64_t n) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = int64_t(rng.below(uint64_t(i) + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace hetrain::data
