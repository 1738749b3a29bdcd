// What the CPU backend's 16-lane (AVX-512) code shares: the runtime check, the mask of a
// row's last vector, exp and the activations built on it.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string_view>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/gcc12_avx512.hpp"

namespace quilt::cpu {

// Whether this CPU has AVX-512F (checked once) and QUILT_CPU_ISA does not ask for less
// (avx2 or scalar: the float kernels then take their AVX2 paths, as on a CPU without AVX-512,
// so that a machine with it tests those too). The packed GEMM, the 16-wide activations and
// Softmax take their AVX-512 paths on it; the depthwise kernel needs BW/VL/DQ too and checks
// for itself.
inline bool has_avx512f() {
  static const bool yes = [] {
    if (const char* isa = std::getenv("QUILT_CPU_ISA");
        isa && (std::string_view(isa) == "avx2" || std::string_view(isa) == "scalar"))
      return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}

// dst[r * width + j] = src[r * src_stride + j] for j < width <= 16: rows of a wider buffer
// gathered into contiguous narrow rows, one masked load and store per row (copy_row's 4-then-1
// tail was a quarter of a 10x4 stride-2 conv on a 25x5 map). AVX-512F only.
__attribute__((target("avx512f"))) inline void copy_narrow_rows(const float* src,
                                                                int64_t src_stride, float* dst,
                                                                int64_t width, int64_t rows) {
  const __mmask16 m = static_cast<__mmask16>((1u << width) - 1);
  for (int64_t r = 0; r < rows; ++r, src += src_stride, dst += width)
    _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
}

// dst[j] = row[j] for j in [lo, hi), pad for the rest of j < width <= 16: one row of an
// unfolded (im2col) input at stride 1. Lanes outside [lo, hi) are not read. AVX-512F only.
__attribute__((target("avx512f"))) inline void unfold_narrow_row(const float* row, int64_t lo,
                                                                 int64_t hi, int64_t width,
                                                                 float pad, float* dst) {
  const __mmask16 valid = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
  const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(pad), valid, row);
  _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << width) - 1), v);
}

// The lanes of a 16-float vector at element i of an n-element row: all of them, or the tail's.
inline __mmask16 lanes16(int64_t i, int64_t n) {
  return n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

// exp's constants, shared with the 8-lane exp_v of activation.cpp (Cephes expf): the input's
// clamp, log2(e), ln 2 in two parts, and e^r's polynomial from the highest power.
inline constexpr float kExpHi = 88.72283935546875f, kExpLo = -87.33654022216797f;
inline constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f,
                       kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                     4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
// e^x on 16 lanes after clamping x to [kExpLo, 89]: x = n ln2 + r, e^r by the Cephes
// polynomial, 2^n by vscalefps (exact; n = 128, from x above 88.72, overflows to +inf). The
// clamp keeps NaN (max and min return their second operand when one is NaN), and so does the
// rest. The same values as the 8-lane exp_v's two-factor scaling wherever the result is a
// normal float.
__attribute__((target("avx512f"), always_inline)) inline __m512 exp_clamped_v16(__m512 x) {
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(89.f), _mm512_max_ps(_mm512_set1_ps(kExpLo), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (size_t i = 1; i < std::size(kExpPoly); ++i)
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// exp on 16 lanes, shared by the 16-wide activations (activation.cpp) and Softmax: above 88.72
// +inf, below ln(FLT_MIN) exactly 0 (masked -inf logits give zeros), NaN stays NaN.
__attribute__((target("avx512f"), always_inline)) inline __m512 exp_v16(__m512 x) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_LT_OQ),
                              exp_clamped_v16(x), _mm512_setzero_ps());
}

// 1 / (1 + e^-x) on 16 lanes (the sigmoid activations' cost is mostly exp: SiLU after every
// conv of EfficientNet). Below the clamp e^-x is FLT_MIN instead of exp_v16's 0, and 1 + FLT_MIN
// is 1 either way, so no blend.
__attribute__((target("avx512f"), always_inline)) inline __m512 sigmoid_v16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one,
                       _mm512_add_ps(one, exp_clamped_v16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// erf's coefficients, shared with the 8-lane erf_v of activation.cpp: x P(x^2) below 1 (P's
// coefficients from the highest power), 1 - e^(-x^2) Q(1/x) from 1 to 4 (Q's likewise), 1 beyond
// (least-squares fits made for Quilt, relative error about 2e-7).
inline constexpr float kErfSmall[] = {-5.625398986e-04f, 4.916026606e-03f,  -2.670995524e-02f,
                                      1.128013062e-01f,  -3.761231982e-01f, 1.128379121e+00f};
inline constexpr float kErfLarge[] = {-1.351600260e-02f, 4.781874456e-02f, -1.503780392e-02f,
                                      -1.986543158e-01f, 4.677893854e-01f, -4.594637835e-01f,
                                      3.892770625e-02f,  5.594750218e-01f, 2.445133845e-04f};

// erf on 16 lanes (the same operations as erf_v of activation.cpp); NaN stays NaN.
__attribute__((target("avx512f"), always_inline)) inline __m512 erf_v16(__m512 x) {
  const __m512 a = _mm512_abs_ps(x), z = _mm512_mul_ps(a, a);
  __m512 p = _mm512_set1_ps(kErfSmall[0]);
  for (size_t i = 1; i < std::size(kErfSmall); ++i)
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(kErfSmall[i]));
  const __m512 small = _mm512_mul_ps(a, p);
  const __m512 ac = _mm512_min_ps(a, _mm512_set1_ps(4.f));
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.f), ac);
  __m512 q = _mm512_set1_ps(kErfLarge[0]);
  for (size_t i = 1; i < std::size(kErfLarge); ++i)
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(kErfLarge[i]));
  const __m512 large = _mm512_fnmadd_ps(
      exp_v16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(ac, ac))), q, _mm512_set1_ps(1.f));
  const __m512 r =
      _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(1.f), _CMP_LT_OQ), large, small);
  // |r| with x's sign; NaN x stays NaN.
  const __m512 signed_r = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(_mm512_abs_ps(r)),
                      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), signed_r, x);
}

// Whether act16 computes this activation (the others have AVX2 forms only, activation.cpp).
constexpr bool has_act16(Activation::Kind k) {
  using Kind = Activation::Kind;
  return k == Kind::None || k == Kind::Relu || k == Kind::LeakyRelu || k == Kind::Clip ||
         k == Kind::HardSigmoid || k == Kind::HardSwish || k == Kind::Sigmoid || k == Kind::Silu ||
         k == Kind::Gelu || k == Kind::GeluTanh;
}

// The activation on 16 lanes, with the same operations in the same order as the 8-lane act_v of
// activation.cpp (bit for bit; NaN propagates as there: max/min take the bound first), except
// GeluTanh: 0.5 x (1 + tanh(u)) = x sigmoid(2 u), so it needs exp only (GPT-2's Gelu took 2.2 ms
// per run in the 8-lane tanh form). For the kinds of has_act16; any other kind returns x. Applied
// by Activation::apply on AVX-512 CPUs and by the depthwise conv's tiles to their registers before
// the store.
// Always inlined: it runs on registers of tiles that hold up to 31 live vectors, and a call
// spills them all. GCC stopped inlining it into the narrow depthwise kernel once the file grew
// (its unit-growth limit): 1152 7x7 planes 39 -> 47 us with no activation at all.
__attribute__((target("avx512f"), always_inline)) inline __m512 act16(Activation::Kind k, __m512 x,
                                                                      __m512 alpha, __m512 beta) {
  using Kind = Activation::Kind;
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f);
  switch (k) {
    case Kind::Relu:  // x < 0 ? 0 : x (NaN stays NaN, -0 stays -0)
      return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, zero);
    case Kind::LeakyRelu:
      return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_GE_OQ), _mm512_mul_ps(alpha, x),
                                  x);
    case Kind::Clip:
      return _mm512_min_ps(beta, _mm512_max_ps(alpha, x));
    case Kind::HardSigmoid:
      return _mm512_min_ps(one, _mm512_max_ps(zero, _mm512_fmadd_ps(alpha, x, beta)));
    case Kind::HardSwish: {
      const __m512 s =
          _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.f / 6.f)), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(x, _mm512_min_ps(one, _mm512_max_ps(zero, s)));
    }
    case Kind::Sigmoid:
      return sigmoid_v16(x);
    case Kind::Silu:
      return _mm512_mul_ps(x, sigmoid_v16(x));
    case Kind::Gelu: {  // 0.5 x (1 + erf(x / sqrt 2))
      const __m512 half = _mm512_set1_ps(0.5f);
      return _mm512_mul_ps(
          _mm512_mul_ps(half, x),
          _mm512_add_ps(one, erf_v16(_mm512_mul_ps(x, _mm512_set1_ps(0.7071067811865476f)))));
    }
    case Kind::GeluTanh: {  // x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))
      const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
      const __m512 u2 = _mm512_mul_ps(_mm512_set1_ps(1.5957691216057308f),
                                      _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
      return _mm512_mul_ps(x, sigmoid_v16(u2));
    }
    default:
      return x;
  }
}
// r[i][j] = r[j][i]: a 16 x 16 block of floats transposed in registers (unpacks, then two
// rounds of 128-bit shuffles), 64 shuffles.
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int j = 0; j < 8; ++j) {
    t[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512d a = _mm512_castps_pd(t[4 * j]), b = _mm512_castps_pd(t[4 * j + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * j + 2]), d = _mm512_castps_pd(t[4 * j + 3]);
    r[4 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // r[4 q + s] now holds, in 128-bit lane L, elements s of rows 4 L' .. for the quad q: two
  // rounds of 128-bit shuffles gather the lanes.
  for (int j = 0; j < 2; ++j)
    for (int s = 0; s < 4; ++s) {
      t[8 * j + s] = _mm512_shuffle_f32x4(r[8 * j + s], r[8 * j + 4 + s], 0x88);
      t[8 * j + 4 + s] = _mm512_shuffle_f32x4(r[8 * j + s], r[8 * j + 4 + s], 0xdd);
    }
  for (int s = 0; s < 8; ++s) {
    r[s] = _mm512_shuffle_f32x4(t[s], t[8 + s], 0x88);
    r[8 + s] = _mm512_shuffle_f32x4(t[s], t[8 + s], 0xdd);
  }
}

QUILT_GCC12_AVX512_END

}  // namespace quilt::cpu
