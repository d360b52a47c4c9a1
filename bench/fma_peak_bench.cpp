// bench/fma_peak_bench.cpp — the node's measured FP32 peak: independent fused multiply-adds in registers,
// per instruction set this CPU has, on 1..T threads (docs/cpu-performance.md, "Against the machine's peak").
//
// Each thread runs 12 independent accumulator chains of vector FMAs (enough to cover an FMA's latency on
// two FMA ports) for a fixed number of iterations, with nothing from memory; 2 FLOPs per lane per FMA.
// SSE has no FMA: there it is a multiply and an add (the x86-64-v2 baseline). The best of several repeats
// is kept. Prints one line per instruction set and thread count:
//   isa=avx512 threads=2 gflops=… per_thread=…
// and last "peak isa=… threads=… gflops=…", the best of them.
//
//   bench_fma_peak [--threads T] [--seconds S]   (T default: the cores OpenMP sees; S: ~0.2 s per line)
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kChains = 12;

// Each returns a value that depends on every FMA, so the compiler keeps them all.
__attribute__((target("avx512f"))) float chains_avx512(long iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) float chains_avx2(long iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(float(c) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0] + out[7];
}

float chains_sse(long iterations) {
  __m128 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm_set1_ps(float(c) * 1e-3f);
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], a), b);
  __m128 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm_add_ps(sum, acc[c]);
  float out[4];
  _mm_storeu_ps(out, sum);
  return out[0] + out[3];
}

struct Isa {
  const char* name;
  int lanes;
  bool present;
  float (*run)(long);
};

// GFLOP/s of `threads` threads each running `iterations` iterations; the best of `repeats`.
double measure(const Isa& isa, int threads, long iterations, int repeats) {
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += isa.run(iterations);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sink = sink + total;
    const double flops = 2.0 * isa.lanes * kChains * double(iterations) * threads;
    if (s > 0 && flops / s > best) best = flops / s;
  }
  return best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int max_threads = omp_get_max_threads();
  double seconds = 0.2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) max_threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_fma_peak: unknown option %s (--threads T, --seconds S)\n", argv[i]);
      return 2;
    }
  }
  if (max_threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "bench_fma_peak: --threads must be >= 1 and --seconds > 0\n");
    return 2;
  }
  __builtin_cpu_init();
  const Isa isas[] = {{"avx512", 16, bool(__builtin_cpu_supports("avx512f")), chains_avx512},
                      {"avx2", 8, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), chains_avx2},
                      {"sse", 4, true, chains_sse}};
  std::string best_isa;
  int best_threads = 0;
  double best = 0;
  for (const Isa& isa : isas) {
    if (!isa.present) {
      std::printf("isa=%s absent\n", isa.name);
      continue;
    }
    // Size the run from a short probe on one thread: about `seconds` per repeat.
    long iterations = 1 << 16;
    const double probe = measure(isa, 1, iterations, 1);
    if (probe > 0) iterations = long(seconds / 3 * probe * 1e9 / (2.0 * isa.lanes * kChains));
    if (iterations < 1024) iterations = 1024;
    for (int t = 1; t <= max_threads; ++t) {
      const double g = measure(isa, t, iterations, 3);
      std::printf("isa=%s threads=%d gflops=%.2f per_thread=%.2f\n", isa.name, t, g, g / t);
      if (g > best) best = g, best_isa = isa.name, best_threads = t;
    }
  }
  std::printf("peak isa=%s threads=%d gflops=%.2f\n", best_isa.c_str(), best_threads, best);
  return 0;
}
