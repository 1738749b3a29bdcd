// Helpers shared by the detection family's CPU kernels (float16 in and out, dtype support).
#pragma once

#include <string>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

// Float inputs of the float16/32/64 kernels as float32 or float64 buffers.
template <class T>
inline std::vector<T> widened(const Tensor& t) {
  std::vector<T> out(static_cast<size_t>(t.numel()));
  const uint16_t* h = t.data<uint16_t>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(h[i]);
  return out;
}

inline void store_half(const std::vector<float>& v, Tensor& out) {
  uint16_t* h = out.data<uint16_t>();
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
}

inline std::string float_types_support(const NodeSignature& sig, size_t input, const char* name) {
  const DType d = input < sig.inputs.size() ? sig.inputs[input].dtype : DType::Undefined;
  if (d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::Undefined)
    return "";
  return std::string(name) + " is " + dtype_name(d) +
         "; the CPU kernel supports float16, float32 and float64";
}

}  // namespace quilt::cpu
