// The activations the conv kernels' tests check, in double: the reference their outputs meet.
#pragma once

#include <algorithm>
#include <cmath>

#include "backends/cpu/activation.hpp"

namespace quilt::cpu::testing {

inline double activate(Activation::Kind k, double v) {
  switch (k) {
    case Activation::Kind::Relu:
      return std::max(v, 0.0);
    case Activation::Kind::HardSwish:
      return v * std::clamp(v / 6 + 0.5, 0.0, 1.0);
    case Activation::Kind::Silu:
      return v / (1 + std::exp(-v));
    case Activation::Kind::Tanh:
      return std::tanh(v);
    default:
      return v;
  }
}

// ONNX's output size along one dim for explicit begin/end pads.
inline int64_t window_out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pad_begin,
                               int64_t pad_end) {
  return (in + pad_begin + pad_end - (k - 1) * d - 1) / s + 1;
}

}  // namespace quilt::cpu::testing
