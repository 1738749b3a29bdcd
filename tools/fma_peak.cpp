// The machine's float32 multiply-add peak, measured: every thread runs a loop of fused
// multiply-adds on registers only (no memory operand), independent chains enough to fill the
// FMA pipes (two per core, 4 cycles deep, on the AVX-512 cores seen here). tools/zoo.py bench
// divides each model's multiply-adds by its latency and reports that against this figure.
//
//   quilt_fma_peak [--threads N] [--json]
//
// Prints the best of 5 runs of about 40 ms each, for N threads (default 1): GFLOP/s counting a
// multiply-add as two operations, as GEMM literature does.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/gcc12_avx512.hpp"

namespace {

// Independent accumulators: 2 pipes x 4 cycles, and then some, all in registers: AVX-512 has
// 32 of them, AVX2 16 (24 chains of ymm spilled to the stack and measured 114 GFLOP/s on a Zen 3
// where a 3x3 conv ran at 156 on onnxruntime).
constexpr int kChains = 24;
constexpr int kChains256 = 12;

// Each returns a value that depends on every chain, so that nothing is optimised away.
QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
__attribute__((target("avx512f"))) float run512(long iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m512 mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
QUILT_GCC12_AVX512_END

__attribute__((target("avx2,fma"))) float run256(long iterations) {
  __m256 acc[kChains256];
  for (int i = 0; i < kChains256; ++i)
    acc[i] = _mm256_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m256 mul = _mm256_set1_ps(0.9999999f), add = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  __m256 s = acc[0];
  for (int i = 1; i < kChains256; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float f[8];
  _mm256_store_ps(f, s);
  float sum = 0;
  for (float x : f) sum += x;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--json]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || threads > 1024) {
    std::fprintf(stderr, "--threads must be in [1, 1024], got %d\n", threads);
    return 2;
  }
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    std::fprintf(stderr, "this CPU has neither AVX-512F nor AVX2 with FMA\n");
    return 1;
  }
  const int lanes = avx512 ? 16 : 8;
  float (*run)(long) = avx512 ? run512 : run256;
  // About 40 ms a run at 4 GHz: 24 multiply-adds an iteration, two issued per cycle.
  const long iterations = 16'000'000;
  double best = 0;
  float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<float> out(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { out[static_cast<size_t>(t)] = run(iterations); });
    for (std::thread& t : pool) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int chains = avx512 ? kChains : kChains256;
    best = std::max(best, 2.0 * lanes * chains * static_cast<double>(iterations) * threads / s);
    for (float v : out) sink += v;
  }
  const char* isa = avx512 ? "avx512f" : "avx2";
  if (json)
    std::printf("{\"isa\": \"%s\", \"threads\": %d, \"gflops\": %.1f, \"check\": %g}\n", isa,
                threads, best / 1e9, static_cast<double>(sink));
  else
    std::printf("float32 FMA peak, %s, %d thread%s: %.1f GFLOP/s\n", isa, threads,
                threads == 1 ? "" : "s", best / 1e9);
  return 0;
}
