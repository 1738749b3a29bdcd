// Quilt's packed GEMM (backends/cpu/gemm_packed.hpp) against a double-precision reference, over
// shapes that hit every tile edge: rows not a multiple of 8, columns not a multiple of 16 or 48,
// depths across the 768 block, strided B and C, bias and activation, one and two threads.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/gemm_packed.hpp"

namespace quilt::cpu {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void check(int64_t m, int64_t n, int64_t k, bool with_bias, Activation act, const ThreadPool& pool,
           std::mt19937& rng) {
  const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;  // strides wider than the matrices
  std::vector<float> a = random_floats(static_cast<size_t>(m * lda), rng);
  std::vector<float> b = random_floats(static_cast<size_t>(std::max<int64_t>(k, 1) * ldb), rng);
  std::vector<float> bias = random_floats(static_cast<size_t>(m), rng);
  std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
  PackedA packed(a.data(), m, k, lda);
  gemm_packed(packed, b.data(), ldb, n, c.data(), ldc, with_bias ? bias.data() : nullptr, act,
              pool);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = with_bias ? bias[i] : 0.0;
      for (int64_t p = 0; p < k; ++p) want += double(a[i * lda + p]) * b[p * ldb + j];
      const float expect = act(static_cast<float>(want));
      ASSERT_NEAR(c[i * ldc + j], expect, 1e-4 * (1 + std::abs(expect)))
          << "m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j << " " << act.name();
    }
    for (int64_t j = n; j < ldc; ++j)  // padding columns of C are not touched
      ASSERT_EQ(c[i * ldc + j], 7.f) << "m=" << m << " n=" << n << " k=" << k;
  }
}

TEST(GemmPacked, MatchesReferenceOnEveryTileEdge) {
  std::printf("native AVX-512 kernel: %s\n", gemm_packed_native() ? "yes" : "no (OpenBLAS)");
  std::mt19937 rng(3);
  ThreadPool one(1), two(2);
  for (int64_t m : {1, 7, 8, 9, 16, 21})
    for (int64_t n : {1, 15, 16, 17, 47, 48, 49, 100, 196})
      for (int64_t k : {0, 1, 5, 200, 520, 769, 1600})
        check(m, n, k, (m + n + k) % 2 == 0, Activation{}, (n + k) % 3 ? two : one, rng);
}

TEST(GemmPacked, AppliesBiasAndActivation) {
  std::mt19937 rng(5);
  ThreadPool two(2);
  for (Activation act : {Activation{Activation::Kind::Relu}, Activation{Activation::Kind::Silu},
                         Activation{Activation::Kind::LeakyRelu, 0.1f}})
    for (int64_t m : {3, 64})
      for (int64_t n : {49, 300}) check(m, n, 72, true, act, two, rng);
}

TEST(GemmPacked, LargeShapesSplitAcrossThreads) {
  std::mt19937 rng(9);
  ThreadPool two(2);
  check(130, 784, 300, true, Activation{}, two, rng);  // many column strips
  check(520, 49, 600, false, Activation{}, two, rng);  // one strip: row ranges split instead
  check(72, 400, 1700, true, Activation{Activation::Kind::Relu}, two, rng);  // three depth blocks
}

// Throughput beside OpenBLAS on convolution-shaped products (run by hand:
// quilt_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*Throughput*').
TEST(GemmPacked, DISABLED_Throughput) {
  std::mt19937 rng(1);
  const char* env = std::getenv("QUILT_BENCH_THREADS");
  ThreadPool two(env ? std::atoi(env) : 2);
  blas_set_threads(two.threads());
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{64, 3136, 576}, Shape{256, 3136, 64}, Shape{64, 3136, 256},
                  Shape{512, 49, 4608}, Shape{2048, 49, 512}, Shape{256, 196, 2304},
                  Shape{16, 196, 200}, Shape{32, 65536, 576}, Shape{64, 4096, 1152}}) {
    std::vector<float> a = random_floats(static_cast<size_t>(s.m * s.k), rng);
    std::vector<float> b = random_floats(static_cast<size_t>(s.k * s.n), rng);
    std::vector<float> c(static_cast<size_t>(s.m * s.n));
    PackedA packed(a.data(), s.m, s.k, s.k);
    auto time = [&](auto fn) {
      double best = 1e30;
      for (int r = 0; r < 15; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return 2.0 * s.m * s.n * s.k / best / 1e9;
    };
    const double ours =
        time([&] { gemm_packed(packed, b.data(), s.n, s.n, c.data(), s.n, nullptr, {}, two); });
    const double blas = time([&] {
      sgemm(false, false, s.m, s.n, s.k, 1.f, a.data(), s.k, b.data(), s.n, 0.f, c.data(), s.n);
    });
    std::printf("%5ld x %6ld x %5ld  packed %6.1f GFLOP/s  OpenBLAS %6.1f GFLOP/s\n", (long)s.m,
                (long)s.n, (long)s.k, ours, blas);
  }
}

}  // namespace
}  // namespace quilt::cpu
