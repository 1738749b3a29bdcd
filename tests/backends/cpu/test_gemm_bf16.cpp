// The bfloat16 GEMM (backends/cpu/gemm_bf16.hpp) through PackedA / PackedB made for bf16, against
// a double-precision reference on the operands rounded to bfloat16: every tile edge (rows not a
// multiple of 8, columns not of 16 or 48, odd depths, depths across the 768 block), B read in
// place or through row offsets (a conv's windows), a residual, activations in the tile and
// after it, A transposed; one and two threads. Each check also shows the result is not float32's
// (the operands were rounded), so the test cannot pass on the float32 kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/gemm_bf16.hpp"
#include "backends/cpu/gemm_packed.hpp"
#include "backends/cpu/half_convert.hpp"

namespace quilt::cpu {
namespace {

float round_bf16(float x) {
  const uint32_t bits = uint32_t{round_to_bfloat16(x)} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// c (m x n, row stride ldc) against act(bias + sum a*b + residual) on the operands rounded to
// bfloat16, within float32 accumulation's error (~k roundings of partial sums bounded by the sum
// of the products' magnitudes); at(i, p) and bt(p, j) give the operands. Returns the largest
// difference from the float32 (unrounded) product, to show the rounding happened.
template <class A, class B>
double compare(int64_t m, int64_t n, int64_t k, A at, B bt, const std::vector<float>& c,
               int64_t ldc, const float* row_bias, const float* col_bias, const float* residual,
               const Activation& act, const char* what) {
  std::vector<double> a(static_cast<size_t>(m * k)), ar(a.size()), b(static_cast<size_t>(k * n)),
      br(b.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      a[static_cast<size_t>(i * k + p)] = at(i, p);
      ar[static_cast<size_t>(i * k + p)] = round_bf16(at(i, p));
    }
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) {
      b[static_cast<size_t>(p * n + j)] = bt(p, j);
      br[static_cast<size_t>(p * n + j)] = round_bf16(bt(p, j));
    }
  double off_f32 = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double start = (row_bias ? row_bias[i] : 0.0) + (col_bias ? col_bias[j] : 0.0) +
                           (residual ? residual[i * ldc + j] : 0.0);
      double want = start, f32 = start, magnitude = std::abs(start) + 1;
      for (int64_t p = 0; p < k; ++p) {
        const size_t ia = static_cast<size_t>(i * k + p), ib = static_cast<size_t>(p * n + j);
        want += ar[ia] * br[ib];
        f32 += a[ia] * b[ib];
        magnitude += std::abs(a[ia] * b[ib]);
      }
      const float expect = act(static_cast<float>(want));
      const double tol = 1e-6 + static_cast<double>(k + 4) * 6e-8 * magnitude;
      const float got = c[static_cast<size_t>(i * ldc + j)];
      if (std::abs(got - expect) > tol) {
        ADD_FAILURE() << what << " m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j
                      << " " << act.name() << ": " << got << ", expected " << expect
                      << " (tolerance " << tol << ")";
        return 0;
      }
      off_f32 = std::max(off_f32, std::abs(double(got) - act(static_cast<float>(f32))));
    }
  return off_f32;
}

class GemmBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bf16::available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

TEST_F(GemmBf16, PackedAWithRawAndOffsetRowsOfB) {
  std::mt19937 rng(7);
  ThreadPool one(1), two(2);
  for (int64_t m : {1, 3, 9, 21, 64})
    for (int64_t n : {1, 17, 48, 49, 196})
      for (int64_t k : {1, 2, 5, 199, 769, 1600}) {
        const ThreadPool& pool = (m + n + k) % 2 ? two : one;
        const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
        const auto a = random_floats(static_cast<size_t>(m * lda), rng);
        const auto b = random_floats(static_cast<size_t>(k * ldb), rng);
        const auto bias = random_floats(static_cast<size_t>(m), rng);
        const PackedA packed(a.data(), m, k, lda, true);
        auto at = [&](int64_t i, int64_t p) { return a[static_cast<size_t>(i * lda + p)]; };
        // B in place, row stride ldb.
        std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
        gemm_packed(packed, b.data(), ldb, n, c.data(), ldc, bias.data(), Activation{}, pool);
        double off = compare(
            m, n, k, at, [&](int64_t p, int64_t j) { return b[static_cast<size_t>(p * ldb + j)]; },
            c, ldc, bias.data(), nullptr, nullptr, Activation{}, "raw B");
        for (int64_t i = 0; i < m; ++i)  // C's padding columns untouched
          for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], 7.f);
        // B through offsets, rows in reverse order, with a residual and a fused Relu.
        std::vector<int64_t> offsets(static_cast<size_t>(k));
        for (int64_t p = 0; p < k; ++p) offsets[static_cast<size_t>(p)] = (k - 1 - p) * ldb;
        const auto residual = random_floats(static_cast<size_t>(m * ldc), rng);
        gemm_packed(packed, BRows{b.data(), offsets.data()}, n, c.data(), ldc, nullptr,
                    Activation{Activation::Kind::Relu}, pool, residual.data());
        compare(
            m, n, k, at,
            [&](int64_t p, int64_t j) { return b[static_cast<size_t>((k - 1 - p) * ldb + j)]; }, c,
            ldc, nullptr, nullptr, residual.data(), Activation{Activation::Kind::Relu}, "rows");
        if (HasFailure()) return;
        if (k >= 199 && m * n >= 64) {
          EXPECT_GT(off, 1e-4) << "m=" << m << " n=" << n << " k=" << k
                               << ": the result equals float32's; were the operands rounded?";
        }
      }
}

TEST_F(GemmBf16, ActivationsInTheTileAndAfterIt) {
  std::mt19937 rng(11);
  ThreadPool two(2);
  for (Activation act :
       {Activation{Activation::Kind::Silu}, Activation{Activation::Kind::Tanh},
        Activation{Activation::Kind::Gelu}, Activation{Activation::Kind::Clip, -0.5f, 0.5f}})
    for (bool with_residual : {false, true}) {
      const int64_t m = 40, n = 150, k = 300;
      const auto a = random_floats(static_cast<size_t>(m * k), rng);
      const auto b = random_floats(static_cast<size_t>(k * n), rng);
      const auto bias = random_floats(static_cast<size_t>(m), rng);
      const auto residual = random_floats(static_cast<size_t>(m * n), rng);
      std::vector<int64_t> offsets(static_cast<size_t>(k));
      for (int64_t p = 0; p < k; ++p) offsets[static_cast<size_t>(p)] = p * n;
      std::vector<float> c(static_cast<size_t>(m * n));
      gemm_packed(PackedA(a.data(), m, k, k, true), BRows{b.data(), offsets.data()}, n, c.data(), n,
                  bias.data(), act, two, with_residual ? residual.data() : nullptr);
      compare(
          m, n, k, [&](int64_t i, int64_t p) { return a[static_cast<size_t>(i * k + p)]; },
          [&](int64_t p, int64_t j) { return b[static_cast<size_t>(p * n + j)]; }, c, n,
          bias.data(), nullptr, with_residual ? residual.data() : nullptr, act, "activation");
    }
}

TEST_F(GemmBf16, PackedBWithAConvertedPerCall) {
  std::mt19937 rng(13);
  ThreadPool one(1), two(2);
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true})
      for (int64_t m : {1, 2, 5, 33, 197})
        for (int64_t n : {1, 17, 130})
          for (int64_t k : {1, 3, 771}) {
            const ThreadPool& pool = (m + k) % 2 ? two : one;
            const int64_t lda = (trans_a ? m : k) + 1, ldb = (trans_b ? k : n) + 2, ldc = n + 1;
            const auto a = random_floats(static_cast<size_t>((trans_a ? k : m) * lda), rng);
            const auto b = random_floats(static_cast<size_t>((trans_b ? n : k) * ldb), rng);
            const auto col_bias = random_floats(static_cast<size_t>(n), rng);
            const PackedB packed(b.data(), k, n, ldb, trans_b, true);
            std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
            const Activation act{Activation::Kind::LeakyRelu, 0.1f};
            gemm_packed_b(a.data(), lda, trans_a, m, packed, c.data(), ldc, col_bias.data(), act,
                          pool);
            compare(
                m, n, k,
                [&](int64_t i, int64_t p) {
                  return a[static_cast<size_t>(trans_a ? p * lda + i : i * lda + p)];
                },
                [&](int64_t p, int64_t j) {
                  return b[static_cast<size_t>(trans_b ? j * ldb + p : p * ldb + j)];
                },
                c, ldc, nullptr, col_bias.data(), nullptr, act, "packed B");
            if (HasFailure()) return;
          }
}

TEST(GemmBf16Cpu, DescribesThePrecisions) {
  const std::string d = bf16::precisions_description();
  EXPECT_EQ(d.rfind("fp32", 0), 0u) << d;
  EXPECT_NE(d.find(bf16::available() ? "bf16 (AVX512-BF16" : "bf16 not accelerated"),
            std::string::npos)
      << d;
}

}  // namespace
}  // namespace quilt::cpu
