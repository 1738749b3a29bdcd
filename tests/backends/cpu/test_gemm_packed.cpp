// Quilt's packed GEMM (backends/cpu/gemm_packed.hpp) against a double-precision reference, over
// shapes that hit every tile edge: rows not a multiple of 8, columns not a multiple of 16 or 48,
// depths across the 768 block, strided B and C, bias and activation, one and two threads; and
// gemm_channels (the small-map kernel) with its depth slices, C layouts and accumulation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/avx512.hpp"
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
  std::printf("native AVX-512 kernel: %s\n", has_avx512f() ? "yes" : "no (AVX2)");
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
  // In the micro-kernel's registers (the kinds of act16) and in a pass after it (Tanh, Gelu).
  for (Activation act :
       {Activation{Activation::Kind::Relu}, Activation{Activation::Kind::Silu},
        Activation{Activation::Kind::LeakyRelu, 0.1f}, Activation{Activation::Kind::HardSwish},
        Activation{Activation::Kind::Clip, -0.5f, 0.5f},
        Activation{Activation::Kind::HardSigmoid, 0.2f, 0.5f},
        Activation{Activation::Kind::Sigmoid}, Activation{Activation::Kind::Tanh},
        Activation{Activation::Kind::Gelu}})
    for (int64_t m : {3, 64})
      for (int64_t n : {49, 300}) check(m, n, 72, true, act, two, rng);
}

// MatMul's product: B (the weights) packed once, A (the activations) read in place from its rows
// (or packed per call when stored transposed), a bias per column and an activation.
TEST(GemmPacked, PackedBWithActivationsReadInPlace) {
  std::mt19937 rng(13);
  ThreadPool one(1), two(2);
  for (bool trans_a : {false, true})
    for (int64_t m :
         {1, 2, 3, 4, 7, 8, 9, 10, 12, 19, 21, 197})  // every tail: 1, 2, 4 or 8 rows live
      for (int64_t k : {1, 40, 769})
        for (int64_t n : {5, 48, 100}) {
          const int64_t lda = (trans_a ? m : k) + 3, ldc = n + 2;
          std::vector<float> a = random_floats(static_cast<size_t>((trans_a ? k : m) * lda), rng);
          std::vector<float> b = random_floats(static_cast<size_t>(k * n), rng);
          std::vector<float> bias = random_floats(static_cast<size_t>(n), rng);
          std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
          const Activation act{(m + k) % 2 ? Activation::Kind::Relu : Activation::Kind::Gelu};
          PackedB packed(b.data(), k, n, n, false);
          gemm_packed_b(a.data(), lda, trans_a, m, packed, c.data(), ldc, bias.data(), act,
                        m % 2 ? one : two);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double want = bias[static_cast<size_t>(j)];
              for (int64_t p = 0; p < k; ++p)
                want += double(trans_a ? a[p * lda + i] : a[i * lda + p]) * b[p * n + j];
              const float expect = act(static_cast<float>(want));
              ASSERT_NEAR(c[i * ldc + j], expect, 1e-4 * (1 + std::abs(expect)))
                  << "trans_a=" << trans_a << " m=" << m << " n=" << n << " k=" << k << " at " << i
                  << "," << j;
            }
            for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], 7.f);
          }
        }
}

// B read in place as a conv's input planes (BRows), with a residual and an activation: planes 4 KiB
// apart, whose rows collide in L1 and which the AVX2 kernel packs per strip, and planes that
// don't, read in place.
TEST(GemmPacked, RowsReadInPlaceWithResidual) {
  std::mt19937 rng(17);
  ThreadPool one(1), two(2);
  for (int64_t plane : {1024, 1104}) {
    for (int64_t m : {8, 70})
      for (int64_t n : {49, 1000})
        for (int64_t k : {16, 64, 128, 800}) {
          std::vector<float> x = random_floats(static_cast<size_t>(k * plane), rng);
          std::vector<int64_t> offsets(static_cast<size_t>(k));
          for (int64_t p = 0; p < k; ++p) offsets[static_cast<size_t>(p)] = p * plane;
          if (k >= 16) {
            // (Not past 128 rows: a packed strip would not fit in L1 either.)
            EXPECT_EQ(rows_collide(x.data(), offsets.data(), k), plane == 1024 && k <= 128)
                << "plane=" << plane << " k=" << k;
          }
          const int64_t ldc = n + 3;
          std::vector<float> a = random_floats(static_cast<size_t>(m * k), rng);
          std::vector<float> bias = random_floats(static_cast<size_t>(m), rng);
          std::vector<float> res = random_floats(static_cast<size_t>(m * ldc), rng);
          std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
          const Activation act{k == 64 ? Activation::Kind::Tanh : Activation::Kind::Silu};
          const bool with_res = n != 49;
          PackedA packed(a.data(), m, k, k);
          gemm_packed(packed, BRows{x.data(), offsets.data()}, n, c.data(), ldc, bias.data(), act,
                      m == 8 ? one : two, with_res ? res.data() : nullptr);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double want = bias[static_cast<size_t>(i)];
              for (int64_t p = 0; p < k; ++p)
                want += double(a[static_cast<size_t>(i * k + p)]) *
                        x[static_cast<size_t>(p * plane + j)];
              if (with_res) want += res[static_cast<size_t>(i * ldc + j)];
              const float expect = act(static_cast<float>(want));
              ASSERT_NEAR(c[static_cast<size_t>(i * ldc + j)], expect,
                          1e-4 * (1 + std::abs(expect)))
                  << "plane=" << plane << " m=" << m << " n=" << n << " k=" << k << " at " << i
                  << "," << j;
            }
            for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], 7.f);
          }
        }
  }
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
// gemm_channels (A packed along the channels, pixels broadcast): a map of `rows` x `width`
// pixels read from B planes `row_stride` wide, A's depth rows first + p * step (p < count) of a
// `full`-deep packing, C rows c_stride apart; stored with bias, residual and activation, or
// added to C.
void check_channels(int64_t m, int64_t rows, int64_t width, int64_t count, int64_t full,
                    int64_t first, int64_t step, bool accumulate, bool residual, Activation act,
                    const ThreadPool& pool, std::mt19937& rng) {
  const int64_t row_stride = width + 3, c_stride = width + 2, plane = (rows + 1) * row_stride;
  const int64_t ldc = rows * c_stride + 5;
  std::vector<float> a = random_floats(static_cast<size_t>(m * full), rng);
  std::vector<float> x = random_floats(static_cast<size_t>(count * plane), rng);
  std::vector<float> bias = random_floats(static_cast<size_t>(m), rng);
  std::vector<float> res = random_floats(static_cast<size_t>(m * ldc), rng);
  std::vector<float> c = random_floats(static_cast<size_t>(m * ldc), rng), c0 = c;
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) offsets[static_cast<size_t>(p)] = p * plane;
  PackedAChannels packed(a.data(), m, full, full);
  const ChannelSlice slice{.depth_first = first,
                           .depth_step = step,
                           .depth_count = count,
                           .c_row_stride = c_stride,
                           .accumulate = accumulate};
  gemm_channels(packed, BRows{x.data(), offsets.data()}, PixelRows{rows * width, width, row_stride},
                c.data(), ldc, accumulate ? nullptr : bias.data(), accumulate ? Activation{} : act,
                pool, residual && !accumulate ? res.data() : nullptr, slice);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < ldc; ++q) {
      const int64_t h = q / c_stride, w = q % c_stride;
      const size_t at = static_cast<size_t>(i * ldc + q);
      if (h >= rows || w >= width) {  // not a pixel of the map: untouched
        ASSERT_EQ(c[at], c0[at]) << "m=" << m << " at " << i << "," << q;
        continue;
      }
      double sum = accumulate ? c0[at] : bias[static_cast<size_t>(i)];
      for (int64_t p = 0; p < count; ++p)
        sum += double(a[static_cast<size_t>(i * full + first + p * step)]) *
               x[static_cast<size_t>(p * plane + h * row_stride + w)];
      if (residual && !accumulate) sum += res[at];
      const float want = accumulate ? static_cast<float>(sum) : act(static_cast<float>(sum));
      ASSERT_NEAR(c[at], want, 1e-4 * (1 + std::abs(want)))
          << "m=" << m << " rows=" << rows << " width=" << width << " count=" << count
          << " step=" << step << " at " << i << "," << h << "," << w;
    }
}

TEST(GemmChannels, MatchesReference) {
  // AVX-512 tiles, or AVX2 ones where the CPU lacks it or QUILT_CPU_ISA=avx2 (cpu_kernels_avx2).
  std::mt19937 rng(11);
  ThreadPool one(1), two(2);
  const Activation relu{Activation::Kind::Relu};
  // Channel tails (m not a multiple of 64), widths that leave 1..6-pixel tiles (and, past 16,
  // more than one 16-pixel group of the transposed store, the last one partial), depths across
  // the 1024 block; all of A's depth, and one offset of nine.
  for (int64_t m : {1, 63, 64, 70, 200})
    for (int64_t width : {1, 7, 9, 14, 17, 28})
      for (int64_t count : {0, 3, 1030}) {
        const bool slice = (m + width) % 2 == 0;
        check_channels(m, width == 1 ? 1 : 3, width, count, slice ? count * 9 : count,
                       slice ? 4 : 0, slice ? 9 : 1, false, count % 2 == 1, relu,
                       (m + count) % 3 ? two : one, rng);
      }
  check_channels(128, 5, 7, 40, 360, 8, 9, true, false, Activation{}, two, rng);  // accumulate
  check_channels(64, 2, 3, 17, 17, 0, 1, false, true, Activation{Activation::Kind::HardSwish}, one,
                 rng);  // a pass-activation
  // An SE block's 1x1 map: the activation on the tile before its transpose (one float per row).
  check_channels(1152, 1, 1, 48, 48, 0, 1, false, false, Activation{Activation::Kind::Sigmoid}, two,
                 rng);
  check_channels(70, 2, 5, 9, 9, 0, 1, false, false, Activation{Activation::Kind::Silu}, one, rng);
}

TEST(GemmPacked, DISABLED_Throughput) {
  std::mt19937 rng(1);
  const char* env = std::getenv("QUILT_BENCH_THREADS");
  ThreadPool two(env ? std::atoi(env) : 2);
  blas_set_threads(two.threads());
  struct Shape {
    int64_t m, n, k;
  };
  std::vector<Shape> shapes = {Shape{64, 3136, 576}, Shape{256, 3136, 64},  Shape{64, 3136, 256},
                               Shape{512, 49, 4608}, Shape{2048, 49, 512},  Shape{256, 196, 2304},
                               Shape{16, 196, 200},  Shape{32, 65536, 576}, Shape{64, 4096, 1152}};
  // QUILT_BENCH_SHAPES="m,n,k;m,n,k": other shapes instead.
  if (const char* list = std::getenv("QUILT_BENCH_SHAPES")) {
    shapes.clear();
    std::istringstream in(list);
    std::string item;
    while (std::getline(in, item, ';')) {
      Shape s{};
      if (std::sscanf(item.c_str(), "%ld,%ld,%ld", &s.m, &s.n, &s.k) == 3) shapes.push_back(s);
    }
  }
  for (Shape s : shapes) {
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
    // B read in place, a row per depth step (a 1x1 conv's input planes).
    std::vector<int64_t> offsets(static_cast<size_t>(s.k));
    for (int64_t p = 0; p < s.k; ++p) offsets[static_cast<size_t>(p)] = p * s.n;
    const double in_place = time([&] {
      gemm_packed(packed, BRows{b.data(), offsets.data()}, s.n, c.data(), s.n, nullptr, {}, two);
    });
    const double blas = time([&] {
      sgemm(false, false, s.m, s.n, s.k, 1.f, a.data(), s.k, b.data(), s.n, 0.f, c.data(), s.n);
    });
    std::printf("%5ld x %6ld x %5ld  packed %6.1f  in place %6.1f  OpenBLAS %6.1f GFLOP/s\n",
                (long)s.m, (long)s.n, (long)s.k, ours, in_place, blas);
  }
}

}  // namespace
}  // namespace quilt::cpu
