// bfloat16, the four float8 formats of ONNX (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2,
// FLOAT8E5M2FNUZ), FLOAT4E2M1 and FLOAT8E8M0 <-> float/double. Tensors of these types hold raw
// bits (uint16_t for bfloat16, uint8_t for float8; float4e2m1 is packed two per byte, see
// core/int4.hpp).
//
// Formats (sign, exponent bits, mantissa bits, bias):
//   bfloat16   1.8.7  bias 127  IEEE: inf and NaN at exponent 255, subnormals
//   E4M3FN     1.4.3  bias 7    no inf; NaN is S.1111.111 only; max 448
//   E4M3FNUZ   1.4.3  bias 8    no inf, no -0; NaN is 0x80 only; max 240
//   E5M2       1.5.2  bias 15   IEEE: inf and NaN at exponent 31; max 57344
//   E5M2FNUZ   1.5.2  bias 16   no inf, no -0; NaN is 0x80 only; max 57344
//   E2M1       1.2.1  bias 1    no inf, no NaN (every code a number); max 6
//   E8M0       0.8.0  bias 127  2^(bits - 127); 0xFF is NaN; no sign, no zero (own functions below)
//
// Encoding rounds to nearest, ties to even, once, from the exact value (long double holds every
// float, double and 64-bit integer exactly). A finite value whose rounding exceeds the largest
// finite value overflows: with `saturate` (Cast-19 on float8 targets) it becomes +-max, else inf
// where the format has one, NaN otherwise. With `saturate`, +-inf also becomes +-max (as onnx's
// reference clips to [min, max] before converting). -0 becomes +0 in the FNUZ formats. E2M1 has
// neither inf nor NaN: it always saturates (+-inf and overflow become +-6) and NaN becomes 0x8
// (-0), as ml_dtypes' float4_e2m1fn does (onnx's reference casts with it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "quilt/quilt.hpp"

namespace quilt {

static_assert(std::numeric_limits<long double>::digits >= 64,
              "float8.hpp needs a long double that holds 64-bit integers exactly");

struct MiniFloatFormat {
  int exp_bits;
  int man_bits;
  int bias;
  bool ieee;            // inf and NaN at the all-ones exponent (bfloat16, E5M2)
  bool fnuz;            // NaN is the lone sign bit; no inf, no -0
  bool finite = false;  // no inf, no NaN: every code is a number (E2M1)
};

inline constexpr MiniFloatFormat kBFloat16{8, 7, 127, true, false};
inline constexpr MiniFloatFormat kE4M3FN{4, 3, 7, false, false};
inline constexpr MiniFloatFormat kE4M3FNUZ{4, 3, 8, false, true};
inline constexpr MiniFloatFormat kE5M2{5, 2, 15, true, false};
inline constexpr MiniFloatFormat kE5M2FNUZ{5, 2, 16, false, true};
inline constexpr MiniFloatFormat kE2M1{2, 1, 1, false, false, true};

// The format of a bfloat16 or float8 dtype; nullptr for any other.
inline const MiniFloatFormat* minifloat_format(DType d) {
  switch (d) {
    case DType::BFloat16:
      return &kBFloat16;
    case DType::Float8E4M3FN:
      return &kE4M3FN;
    case DType::Float8E4M3FNUZ:
      return &kE4M3FNUZ;
    case DType::Float8E5M2:
      return &kE5M2;
    case DType::Float8E5M2FNUZ:
      return &kE5M2FNUZ;
    case DType::Float4E2M1:
      return &kE2M1;
    default:
      return nullptr;
  }
}

inline bool is_float8(DType d) {
  return d == DType::Float8E4M3FN || d == DType::Float8E4M3FNUZ || d == DType::Float8E5M2 ||
         d == DType::Float8E5M2FNUZ;
}

namespace minifloat_detail {

constexpr uint32_t sign_bit(const MiniFloatFormat& f) {
  return 1u << (f.exp_bits + f.man_bits);
}
constexpr uint32_t mag_mask(const MiniFloatFormat& f) {
  return sign_bit(f) - 1;
}
// Magnitude bits of the largest finite value.
constexpr uint32_t max_mag(const MiniFloatFormat& f) {
  if (f.ieee) return (((1u << f.exp_bits) - 2) << f.man_bits) | ((1u << f.man_bits) - 1);
  if (f.fnuz || f.finite) return mag_mask(f);
  return mag_mask(f) - 1;  // E4M3FN: all ones is NaN
}
constexpr uint32_t nan_bits(const MiniFloatFormat& f) {
  if (f.fnuz || f.finite) return sign_bit(f);  // E2M1: -0, ml_dtypes' choice
  if (f.ieee) return ((1u << f.exp_bits) - 1) << f.man_bits | (1u << (f.man_bits - 1));
  return mag_mask(f);
}
constexpr uint32_t inf_mag(const MiniFloatFormat& f) {  // only for ieee formats
  return ((1u << f.exp_bits) - 1) << f.man_bits;
}

}  // namespace minifloat_detail

// The exact value of `bits` in format f (NaN for any NaN encoding).
inline double minifloat_to_double(const MiniFloatFormat& f, uint32_t bits) {
  using namespace minifloat_detail;
  const bool neg = bits & sign_bit(f);
  const uint32_t mag = bits & mag_mask(f);
  if (f.fnuz && neg && mag == 0) return std::numeric_limits<double>::quiet_NaN();
  const uint32_t e = mag >> f.man_bits, m = mag & ((1u << f.man_bits) - 1);
  double v;
  if (f.ieee && e == (1u << f.exp_bits) - 1) {
    if (m != 0) return std::numeric_limits<double>::quiet_NaN();
    v = std::numeric_limits<double>::infinity();
  } else if (!f.ieee && !f.fnuz && !f.finite && mag == mag_mask(f)) {
    return std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>((1u << f.man_bits) | m),
                   static_cast<int>(e) - f.bias - f.man_bits);
  }
  return neg ? -v : v;
}

inline float minifloat_to_float(const MiniFloatFormat& f, uint32_t bits) {
  return static_cast<float>(minifloat_to_double(f, bits));  // exact: every value fits a float
}

// x rounded to format f (see the top of this file).
inline uint32_t minifloat_from(const MiniFloatFormat& f, long double x, bool saturate) {
  using namespace minifloat_detail;
  if (std::isnan(x)) return nan_bits(f);
  const uint32_t sign = std::signbit(x) ? sign_bit(f) : 0;
  const long double a = std::fabs(x);
  const uint32_t overflow =
      saturate || f.finite ? sign | max_mag(f) : (f.ieee ? sign | inf_mag(f) : nan_bits(f));
  if (std::isinf(a)) return overflow;
  if (a == 0) return f.fnuz ? 0 : sign;
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): a's binary exponent is e2 - 1
  const int emin = 1 - f.bias;
  int ex = std::max(e2 - 1, emin);
  if (ex > (1 << f.exp_bits)) return overflow;  // far beyond any finite value
  // Units of the last place at exponent ex: q in [0, 2^(man_bits + 1)].
  long double q = std::nearbyint(std::ldexp(a, f.man_bits - ex));  // ties to even
  const auto one = static_cast<long double>(1u << f.man_bits);
  if (q >= 2 * one) {
    q = one;
    ++ex;
  }
  uint32_t mag;
  if (q < one)  // subnormal (ex == emin) or zero
    mag = static_cast<uint32_t>(q);
  else
    mag = (static_cast<uint32_t>(ex + f.bias) << f.man_bits) | static_cast<uint32_t>(q - one);
  if (mag > max_mag(f)) return overflow;
  if (mag == 0 && f.fnuz) return 0;
  return sign | mag;
}

// ---- float8e8m0 ----

inline float e8m0_to_float(uint8_t bits) {
  if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

// The round_mode attribute of Cast-24+ for float8e8m0 targets.
enum class E8M0Round { Up, Down, Nearest };

// x (rounded to float32 first, as onnx's reference does) to float8e8m0, exactly as onnx's
// numpy_helper.to_float8e8m0: the exponent bits of |x|, rounded up when any mantissa bit is set
// ("up"), never ("down"), or by its guard/round/sticky bits ("nearest"); inf and NaN become NaN
// (0xFF); with `saturate`, rounding up stops at the largest value 2^127 instead of reaching NaN.
inline uint8_t e8m0_from_float(float x, bool saturate, E8M0Round mode) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  uint32_t e = (b >> 23) & 0xFF;
  if (e == 0xFF) return 0xFF;
  bool up = false;
  if (mode == E8M0Round::Up) {
    up = (b & 0x7FFFFF) != 0;
  } else if (mode == E8M0Round::Nearest) {
    const bool g = b & 0x400000, r = b & 0x200000, st = (b & 0x1FFFFF) != 0, lsb = e > 0;
    up = g && (r || st || lsb);
  }
  if (up && !(saturate && e == 0xFE)) ++e;
  return static_cast<uint8_t>(e);
}

inline float bfloat16_to_float(uint16_t b) {
  return minifloat_to_float(kBFloat16, b);
}
inline uint16_t float_to_bfloat16(float v) {
  return static_cast<uint16_t>(minifloat_from(kBFloat16, v, false));
}

}  // namespace quilt
