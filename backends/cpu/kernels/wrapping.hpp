// Integer arithmetic that wraps around (two's complement), as onnxruntime's and numpy's integer
// kernels do. In C++ signed overflow is undefined behaviour, and types narrower than int promote
// to int, where even uint16 * uint16 can overflow; so integers are computed in the unsigned twin
// of their promoted type and converted back (modular since C++20). Floating-point types take
// the plain operator: their code is unchanged.
//
//   out[i] = wrapping_add(a[i], b[i]);  // int32: 2147483647 + 1 == -2147483648
#pragma once

#include <type_traits>

namespace quilt::cpu {

// The unsigned type integer arithmetic on T is done in.
template <class T>
using WrapUnsigned = std::make_unsigned_t<std::common_type_t<T, int>>;

template <class T>
constexpr T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = WrapUnsigned<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <class T>
constexpr T wrapping_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = WrapUnsigned<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}

template <class T>
constexpr T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = WrapUnsigned<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// -x; the most negative integer stays itself, as in two's complement.
template <class T>
constexpr T wrapping_neg(T x) {
  if constexpr (std::is_integral_v<T>) {
    using U = WrapUnsigned<T>;
    return static_cast<T>(U(0) - static_cast<U>(x));
  } else {
    return -x;
  }
}

}  // namespace quilt::cpu
