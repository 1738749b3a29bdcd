// Floating-point -> integer conversion with a defined result for every value. C++ leaves NaN,
// infinities and values outside the target's range undefined (UBSan reports them; the fuzzers
// found Pow int32 ^ float giving inf); x86's conversion instructions, which onnxruntime's
// static_casts compile to, give the "integer indefinite" value (the minimum int32 or int64).
// This is that rule, written without undefined behaviour: in range it truncates toward zero like
// static_cast; otherwise int32 and narrower types get INT32_MIN's low bits (through the 32-bit
// conversion, as compilers do for them), uint32 the low bits of the 64-bit one, int64 INT64_MIN,
// and uint64 values >= 2^63 are converted as v - 2^63 with the top bit set.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace quilt::cpu {

inline int64_t truncate_to_int64(double v) {
  // -2^63 and 2^63 are exact doubles; NaN fails both comparisons.
  return v >= -9223372036854775808.0 && v < 9223372036854775808.0
             ? static_cast<int64_t>(v)
             : std::numeric_limits<int64_t>::min();
}

inline int32_t truncate_to_int32(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? static_cast<int32_t>(v)
                                               : std::numeric_limits<int32_t>::min();
}

template <class D, class S>
D float_to_int(S s) {
  static_assert(std::is_floating_point_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>);
  const double v = static_cast<double>(s);  // exact for float and double
  if constexpr (std::is_same_v<D, int64_t>) {
    return truncate_to_int64(v);
  } else if constexpr (std::is_same_v<D, uint64_t>) {
    constexpr double k2p63 = 9223372036854775808.0;
    if (v < k2p63) return static_cast<uint64_t>(truncate_to_int64(v));
    return static_cast<uint64_t>(truncate_to_int64(v - k2p63)) ^ (uint64_t{1} << 63);
  } else if constexpr (sizeof(D) == 4 && std::is_unsigned_v<D>) {
    return static_cast<D>(static_cast<uint64_t>(truncate_to_int64(v)));
  } else {
    return static_cast<D>(truncate_to_int32(v));  // modular narrowing (C++20)
  }
}

}  // namespace quilt::cpu
