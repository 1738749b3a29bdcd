// Element conversion for the attention kernels, which compute in float (float32 and float16
// tensors) or double (float64 tensors).
#pragma once

#include <limits>

#include "backends/cpu/kernels/broadcast.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

// All numel() elements of a numeric or float16 tensor, converted to A.
template <class A>
void load_as(const Tensor& t, A* out) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::Float16) {
    const uint16_t* p = t.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<A>(half_to_float(p[i]));
    return;
  }
  bool ok = visit_dtype(t.dtype(), AllTypes{}, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<A>(p[i]);
  });
  if (!ok)
    throw Error(ErrorCode::NotImplemented,
                std::string("attention kernels cannot read ") + dtype_name(t.dtype()));
}

// An attention mask as an additive bias: bool true -> 0, false -> -inf; numbers as they are.
template <class A>
void load_mask(const Tensor& m, A* out) {
  if (m.dtype() != DType::Bool) return load_as(m, out);
  const bool* p = m.data<bool>();
  for (int64_t i = 0; i < m.numel(); ++i)
    out[i] = p[i] ? A(0) : -std::numeric_limits<A>::infinity();
}

// Writes n values to t (float32, float16 or float64) from element `offset` on.
template <class A>
void store_as(const A* in, Tensor& t, int64_t offset, int64_t n) {
  switch (t.dtype()) {
    case DType::Float32: {
      float* p = t.data<float>() + offset;
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(in[i]);
      return;
    }
    case DType::Float64: {
      double* p = t.data<double>() + offset;
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(in[i]);
      return;
    }
    case DType::Float16: {
      uint16_t* p = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_half(static_cast<float>(in[i]));
      return;
    }
    default:
      throw Error(ErrorCode::NotImplemented,
                  std::string("attention kernels cannot write ") + dtype_name(t.dtype()));
  }
}

}  // namespace quilt::cpu
