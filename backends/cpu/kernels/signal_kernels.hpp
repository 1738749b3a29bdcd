// Helpers shared by the CPU kernels of the signal family (signal.cpp, signal_generators.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

// float16 storage as a distinct type, so dispatch cannot confuse it with uint16.
struct Half {
  uint16_t bits;
};

inline double to_double(float v) {
  return v;
}
inline double to_double(double v) {
  return v;
}
inline double to_double(Half v) {
  return half_to_float(v.bits);
}

template <class T>
inline T from_double(double v) {
  return static_cast<T>(v);
}
template <>
inline Half from_double<Half>(double v) {
  return Half{float_to_half(static_cast<float>(v))};
}

// Calls fn(T{}) with T = float, double or Half for the float dtype d; false for other dtypes.
template <class Fn>
bool visit_float(DType d, Fn&& fn) {
  switch (d) {
    case DType::Float32:
      fn(float{});
      return true;
    case DType::Float64:
      fn(double{});
      return true;
    case DType::Float16:
      fn(Half{});
      return true;
    default:
      return false;
  }
}

// The single value of an integer (int32/int64) tensor.
inline int64_t scalar_int(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.node.fail(std::string(what) + " must hold one value", ErrorCode::Runtime);
  if (t.dtype() == DType::Int64) return t.data<int64_t>()[0];
  if (t.dtype() == DType::Int32) return t.data<int32_t>()[0];
  ctx.node.fail(std::string(what) + " is " + dtype_name(t.dtype()) + ", expected int32 or int64",
                ErrorCode::Runtime);
}

// The window and mel-matrix generators, in signal_generators.cpp.
void register_cpu_signal_generators(KernelRegistry& r);

}  // namespace quilt::cpu
