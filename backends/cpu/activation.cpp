#include "backends/cpu/activation.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gcc12_avx512.hpp"
#include "core/graph.hpp"

namespace quilt::cpu {
namespace {

// ---- 8-wide math (AVX2 + FMA) ----

inline __m256 splat(float v) {
  return _mm256_set1_ps(v);
}

// Lanes where x is NaN take x, the others r (the scalar ops propagate NaN the same way).
inline __m256 keep_nan(__m256 x, __m256 r) {
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline __m256 abs_v(__m256 x) {
  return _mm256_andnot_ps(splat(-0.f), x);
}

// |a| with the sign of b.
inline __m256 copysign_v(__m256 a, __m256 b) {
  const __m256 sign = splat(-0.f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
}

// e^r for x = n ln2 + r, |r| <= ln2/2 (n = x log2 e, rounded, returned in n): the Cephes
// polynomial, shared by exp_v and sigmoid_v.
inline __m256 exp_reduced(__m256 x, __m256& n) {
  n = _mm256_round_ps(_mm256_mul_ps(x, splat(kLog2e)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, splat(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, splat(kLn2Lo), r);
  __m256 p = splat(kExpPoly[0]);
  for (size_t i = 1; i < std::size(kExpPoly); ++i) p = _mm256_fmadd_ps(p, r, splat(kExpPoly[i]));
  return _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), splat(1.f));
}

// exp by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 polynomial for e^r (Cephes
// expf, the constants of avx512.hpp); 2^n in two factors so that n = 128 stays finite. Flushes
// to 0 below the normal range.
inline __m256 exp_v(__m256 x) {
  const __m256 hi = splat(kExpHi), lo = splat(kExpLo);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 n;
  const __m256 p = exp_reduced(xc, n);
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  result = _mm256_blendv_ps(result, splat(std::numeric_limits<float>::infinity()),
                            _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  result = _mm256_blendv_ps(result, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return keep_nan(x, result);
}

// 1 / (1 + e^-x): e^-x as exp_clamped_v16 computes it (avx512.hpp), so that the 8- and 16-lane
// sigmoids give the same values: the argument clamped to [kExpLo, 89] (NaN kept: max and min
// return their second operand when one is NaN), then (2p) 2^(n-1), which is exact where
// p 2^n is a normal float and overflows to +inf where it does, as vscalefps(p, n) does: p 2^n
// in one factor would be +inf for every n = 128 (e^88.5 = 2.7e38 is finite). At n = -126 (the
// lower clamp) 2^(n-1) has no normal form and reads as 0; 1 + 0 is 1 + FLT_MIN = 1 anyway. No
// blends. The SiLU after every conv of EfficientNet and YOLOv5s runs this: 0.53 ns an element
// against 0.76 through exp_v's two factors and blends (one Zen 3 core, 16K floats from L1, best
// of 30 x 200 passes, 4 alternating runs).
inline __m256 sigmoid_v(__m256 x) {
  const __m256 t = _mm256_sub_ps(_mm256_setzero_ps(), x);
  const __m256 tc = _mm256_min_ps(splat(89.f), _mm256_max_ps(splat(kExpLo), t));
  __m256 n;
  const __m256 p = exp_reduced(tc, n);
  const __m256 one = splat(1.f);
  const __m256 half_scale = _mm256_castsi256_ps(  // 2^(n-1)
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23));
  return _mm256_div_ps(one, _mm256_add_ps(one, _mm256_mul_ps(_mm256_add_ps(p, p), half_scale)));
}

// tanh: an odd polynomial below 0.625 (where 1 - 2/(e^2x + 1) would cancel), the exp form above
// (Cephes tanhf).
inline __m256 tanh_v(__m256 x) {
  const __m256 ax = abs_v(x), z = _mm256_mul_ps(x, x);
  __m256 p = splat(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, splat(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, splat(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, splat(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, splat(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 e = exp_v(_mm256_mul_ps(splat(2.f), _mm256_min_ps(ax, splat(10.f))));
  const __m256 big = copysign_v(
      _mm256_sub_ps(splat(1.f), _mm256_div_ps(splat(2.f), _mm256_add_ps(e, splat(1.f)))), x);
  return keep_nan(x, _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, splat(0.625f), _CMP_LT_OQ)));
}

// erf with the coefficients of avx512.hpp (kErfSmall, kErfLarge).
inline __m256 erf_v(__m256 x) {
  const __m256 a = abs_v(x), z = _mm256_mul_ps(a, a);
  __m256 p = splat(kErfSmall[0]);
  for (size_t i = 1; i < std::size(kErfSmall); ++i) p = _mm256_fmadd_ps(p, z, splat(kErfSmall[i]));
  const __m256 small = _mm256_mul_ps(a, p);
  const __m256 ac = _mm256_min_ps(a, splat(4.f));
  const __m256 t = _mm256_div_ps(splat(1.f), ac);
  __m256 q = splat(kErfLarge[0]);
  for (size_t i = 1; i < std::size(kErfLarge); ++i) q = _mm256_fmadd_ps(q, t, splat(kErfLarge[i]));
  const __m256 large = _mm256_fnmadd_ps(
      exp_v(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(ac, ac))), q, splat(1.f));
  const __m256 r = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, splat(1.f), _CMP_LT_OQ));
  return keep_nan(x, copysign_v(r, x));
}

// min/max that keep NaN: _mm256_max_ps(a, b) returns b when either is NaN.
inline __m256 max_keep_nan(__m256 x, __m256 bound) {
  return _mm256_max_ps(bound, x);  // NaN x -> x
}
inline __m256 min_keep_nan(__m256 x, __m256 bound) {
  return _mm256_min_ps(bound, x);
}

template <Activation::Kind K>
inline __m256 act_v(__m256 x, __m256 alpha, __m256 beta) {
  using Kind = Activation::Kind;
  const __m256 zero = _mm256_setzero_ps(), one = splat(1.f), half = splat(0.5f);
  if constexpr (K == Kind::Relu) {
    // x < 0 ? 0 : x (NaN stays NaN, -0 stays -0 as the scalar op)
    return _mm256_blendv_ps(x, zero, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
  } else if constexpr (K == Kind::LeakyRelu) {
    return _mm256_blendv_ps(_mm256_mul_ps(alpha, x), x, _mm256_cmp_ps(x, zero, _CMP_GE_OQ));
  } else if constexpr (K == Kind::Clip) {
    return min_keep_nan(max_keep_nan(x, alpha), beta);
  } else if constexpr (K == Kind::HardSigmoid) {
    return min_keep_nan(max_keep_nan(_mm256_fmadd_ps(alpha, x, beta), zero), one);
  } else if constexpr (K == Kind::HardSwish) {
    // alpha x + beta with alpha = 1/6 as the spec writes it: a multiply, not a divide (which
    // took half of MobileNetV3's activation time), rounded in two steps as the reference.
    const __m256 s = _mm256_add_ps(_mm256_mul_ps(x, splat(1.f / 6.f)), half);
    return _mm256_mul_ps(x, min_keep_nan(max_keep_nan(s, zero), one));
  } else if constexpr (K == Kind::Sigmoid) {
    return sigmoid_v(x);
  } else if constexpr (K == Kind::Silu) {
    return _mm256_mul_ps(x, sigmoid_v(x));
  } else if constexpr (K == Kind::Tanh) {
    return tanh_v(x);
  } else if constexpr (K == Kind::Gelu) {
    return _mm256_mul_ps(_mm256_mul_ps(half, x),
                         _mm256_add_ps(one, erf_v(_mm256_mul_ps(x, splat(0.7071067811865476f)))));
  } else if constexpr (K == Kind::GeluTanh) {
    const __m256 inner =
        _mm256_mul_ps(splat(0.7978845608028654f),
                      _mm256_fmadd_ps(_mm256_mul_ps(splat(0.044715f), _mm256_mul_ps(x, x)), x, x));
    return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, tanh_v(inner)));
  } else {
    return x;
  }
}

// ---- 16-wide activations (AVX-512) ----
// act16 (avx512.hpp) over a row, the tail masked: the kinds without exp, Sigmoid, SiLU, Gelu
// and GeluTanh (the AVX2 SiLU took a tenth of YOLOv5s, which runs it on every conv output; the
// 8-lane tail went through a copy, a third of a 196-float row's time in MobileNetV3's depthwise
// convs). Tanh keeps the 8-lane form.

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
template <Activation::Kind K>
__attribute__((target("avx512f"))) void apply_range16(const float* x, float* y, int64_t n, float a,
                                                      float b) {
  const __m512 alpha = _mm512_set1_ps(a), beta = _mm512_set1_ps(b);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes16(i, n);
    _mm512_mask_storeu_ps(y + i, m, act16(K, _mm512_maskz_loadu_ps(m, x + i), alpha, beta));
  }
}
QUILT_GCC12_AVX512_END

template <Activation::Kind K>
void apply_range(const float* x, float* y, int64_t n, float a, float b) {
  const __m256 alpha = splat(a), beta = splat(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, act_v<K>(_mm256_loadu_ps(x + i), alpha, beta));
  if (i < n) {
    // The tail through the same vector code, so every element gets the same arithmetic.
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm256_store_ps(buf, act_v<K>(_mm256_load_ps(buf), alpha, beta));
    std::memcpy(y + i, buf, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// One kind's loop: the 16-lane form when `wide` and act16 has the kind, else the 8-lane one.
template <Activation::Kind K>
void apply_as(const float* x, float* y, int64_t n, float a, float b, bool wide) {
  if constexpr (has_act16(K))
    if (wide) return apply_range16<K>(x, y, n, a, b);
  apply_range<K>(x, y, n, a, b);
}

// Rows of a matrix in place (rows of n floats, ld apart), a residual laid out the same way
// (add, may be null) added first.
struct RowBlock {
  int64_t rows = 1, ld = 0;
  const float* add = nullptr;
};

template <Activation::Kind K>
void apply_rows_as(float* y, int64_t n, float a, float b, bool wide, const RowBlock& blk) {
  for (int64_t r = 0; r < blk.rows; ++r) {
    float* row = y + r * blk.ld;
    if (blk.add) {
      const float* add = blk.add + r * blk.ld;
      for (int64_t i = 0; i < n; ++i) row[i] += add[i];
    }
    if constexpr (K != Activation::Kind::None) apply_as<K>(row, row, n, a, b, wide);
  }
}

// Activation::apply with or without the 16-lane forms.
void apply_kind(const Activation& act, const float* x, float* y, int64_t n, bool wide) {
  using Kind = Activation::Kind;
  const float a = act.alpha, b = act.beta;
  switch (act.kind) {
    case Kind::None:
      if (x != y) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case Kind::Relu:
      return apply_as<Kind::Relu>(x, y, n, a, b, wide);
    case Kind::LeakyRelu:
      return apply_as<Kind::LeakyRelu>(x, y, n, a, b, wide);
    case Kind::Clip:
      return apply_as<Kind::Clip>(x, y, n, a, b, wide);
    case Kind::HardSigmoid:
      return apply_as<Kind::HardSigmoid>(x, y, n, a, b, wide);
    case Kind::HardSwish:
      return apply_as<Kind::HardSwish>(x, y, n, a, b, wide);
    case Kind::Sigmoid:
      return apply_as<Kind::Sigmoid>(x, y, n, a, b, wide);
    case Kind::Silu:
      return apply_as<Kind::Silu>(x, y, n, a, b, wide);
    case Kind::Tanh:
      return apply_as<Kind::Tanh>(x, y, n, a, b, wide);
    case Kind::Gelu:
      return apply_as<Kind::Gelu>(x, y, n, a, b, wide);
    case Kind::GeluTanh:
      return apply_as<Kind::GeluTanh>(x, y, n, a, b, wide);
  }
}

// Activation::apply_added_rows with or without the 16-lane forms.
void apply_rows_kind(const Activation& act, float* y, int64_t n, bool wide, const RowBlock& blk) {
  using Kind = Activation::Kind;
  const float a = act.alpha, b = act.beta;
  switch (act.kind) {
    case Kind::None:
      return apply_rows_as<Kind::None>(y, n, a, b, wide, blk);
    case Kind::Relu:
      return apply_rows_as<Kind::Relu>(y, n, a, b, wide, blk);
    case Kind::LeakyRelu:
      return apply_rows_as<Kind::LeakyRelu>(y, n, a, b, wide, blk);
    case Kind::Clip:
      return apply_rows_as<Kind::Clip>(y, n, a, b, wide, blk);
    case Kind::HardSigmoid:
      return apply_rows_as<Kind::HardSigmoid>(y, n, a, b, wide, blk);
    case Kind::HardSwish:
      return apply_rows_as<Kind::HardSwish>(y, n, a, b, wide, blk);
    case Kind::Sigmoid:
      return apply_rows_as<Kind::Sigmoid>(y, n, a, b, wide, blk);
    case Kind::Silu:
      return apply_rows_as<Kind::Silu>(y, n, a, b, wide, blk);
    case Kind::Tanh:
      return apply_rows_as<Kind::Tanh>(y, n, a, b, wide, blk);
    case Kind::Gelu:
      return apply_rows_as<Kind::Gelu>(y, n, a, b, wide, blk);
    case Kind::GeluTanh:
      return apply_rows_as<Kind::GeluTanh>(y, n, a, b, wide, blk);
  }
}

}  // namespace

void Activation::apply(const float* x, float* y, int64_t n) const {
  apply_kind(*this, x, y, n, has_avx512f());
}

void apply_8_lanes(const Activation& act, const float* x, float* y, int64_t n) {
  apply_kind(act, x, y, n, false);
}

void Activation::apply_added(float* y, const float* add, int64_t n) const {
  if (!add) return apply(y, n);
  // A chunk at a time, so the activation reads the sums from L1.
  constexpr int64_t kChunk = 2048;
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = std::min(kChunk, n - i0);
    for (int64_t i = i0; i < i0 + len; ++i) y[i] += add[i];
    if (!none()) apply(y + i0, len);
  }
}

void Activation::apply_added_rows(float* y, int64_t ldy, const float* add, int64_t rows,
                                  int64_t n) const {
  if (none() && !add) return;
  apply_rows_kind(*this, y, n, has_avx512f(), RowBlock{rows, ldy, add});
}

float Activation::operator()(float x) const {
  float y = 0.f;
  apply(&x, &y, 1);
  return y;
}

std::string Activation::name() const {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Relu:
      return "Relu";
    case Kind::LeakyRelu:
      return "LeakyRelu(alpha=" + std::to_string(alpha) + ")";
    case Kind::Clip:
      return "Clip(min=" + std::to_string(alpha) + ", max=" + std::to_string(beta) + ")";
    case Kind::HardSigmoid:
      return "HardSigmoid(alpha=" + std::to_string(alpha) + ", beta=" + std::to_string(beta) + ")";
    case Kind::HardSwish:
      return "HardSwish";
    case Kind::Sigmoid:
      return "Sigmoid";
    case Kind::Silu:
      return "Silu";
    case Kind::Tanh:
      return "Tanh";
    case Kind::Gelu:
      return "Gelu";
    case Kind::GeluTanh:
      return "Gelu(approximate=tanh)";
  }
  return "?";
}

}  // namespace quilt::cpu
