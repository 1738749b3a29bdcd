// Helpers shared by the quantization kernels: reading scale / zero-point tensors into plain
// vectors, round-half-to-even with saturation, and the support checks for element types Quilt
// cannot hold.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

// A value of a float32 or float16 tensor as float.
inline float load_float(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::Float16) return half_to_float(t.data<uint16_t>()[i]);
  return t.data<float>()[i];
}

inline std::vector<float> float_values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_float(t, i);
  return out;
}

// Integer tensor values (int8/uint8/int16/uint16/int32) as int64; `count` zeros when absent.
inline std::vector<int64_t> int_values(const Tensor* t, int64_t count) {
  if (!t) return std::vector<int64_t>(static_cast<size_t>(count), 0);
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t v = 0;
    switch (t->dtype()) {
      case DType::Int8:
        v = t->data<int8_t>()[i];
        break;
      case DType::UInt8:
        v = t->data<uint8_t>()[i];
        break;
      case DType::Int16:
        v = t->data<int16_t>()[i];
        break;
      case DType::UInt16:
        v = t->data<uint16_t>()[i];
        break;
      case DType::Int32:
        v = t->data<int32_t>()[i];
        break;
      default:
        throw Error(ErrorCode::NotImplemented, std::string("zero point of dtype ") +
                                                   dtype_name(t->dtype()) + " is not supported");
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// Rounds to float16 precision and back.
inline float round_to_half(float v) {
  return half_to_float(float_to_half(v));
}

// saturate(round_half_even(q) + zero_point) into T's range; NaN gives the zero point.
template <class T>
inline T saturate_round(double q, int64_t zero_point) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  double v = std::nearbyint(q);  // the default rounding mode: to nearest, ties to even
  if (std::isnan(v)) v = 0;
  v = std::clamp(v + static_cast<double>(zero_point), lo, hi);
  return static_cast<T>(v);
}

// True when input i's element type is one the model declares but Quilt cannot hold (float8,
// 4-bit, 2-bit, bfloat16): the importer gives those dtype Undefined with a known shape. An
// Undefined dtype with unknown shape is merely not inferred yet and is checked at run time.
inline bool unholdable_input(const NodeSignature& sig, size_t i) {
  return i < sig.inputs.size() && sig.node.has_input(i) &&
         sig.inputs[i].dtype == DType::Undefined && sig.inputs[i].has_shape;
}

inline bool dtype_in(DType d, std::initializer_list<DType> allowed) {
  return d == DType::Undefined || std::find(allowed.begin(), allowed.end(), d) != allowed.end();
}

// Number of elements of input i when its shape is known at creation, else -1.
inline int64_t known_numel(const NodeSignature& sig, size_t i) {
  if (i >= sig.inputs.size() || !sig.inputs[i].is_static()) return -1;
  int64_t n = 1;
  for (int64_t d : sig.inputs[i].dims) n *= d;
  return n;
}

}  // namespace quilt::cpu
