// What the ai.onnx.ml CPU kernels share: reading X as rows of floats or doubles, the
// post_transform attribute and its functions, computed in float as onnxruntime does so that
// scores and the labels chosen from them agree with it to the last bit where they can.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "core/ops/ml_attrs.hpp"

namespace quilt::cpu::ml {

using namespace quilt::ml;

inline float logistic(float v) {
  const float e = 1 / (1 + std::exp(-std::abs(v)));
  return v < 0 ? 1 - e : e;
}

// The inverse error function's approximation the ONNX ml reference uses (Winitzki's).
inline float erf_inv(float x) {
  const float sgn = x < 0 ? -1.0f : 1.0f;
  x = (1 - x) * (1 + x);
  const float lg = std::log(x);
  const float v = 2 / (std::numbers::pi_v<float> * 0.147f) + 0.5f * lg;
  const float v2 = 1 / 0.147f * lg;
  const float v3 = -v + std::sqrt(v * v - v2);
  return sgn * std::sqrt(v3);
}

inline float probit(float v) {
  return std::numbers::sqrt2_v<float> * erf_inv(2 * v - 1);
}

inline void softmax(float* v, size_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) {
    v[i] = std::exp(v[i] - mx);
    sum += v[i];
  }
  for (size_t i = 0; i < n; ++i) v[i] /= sum;
}

// Softmax that leaves zeros at zero (exp(0) would not be).
inline void softmax_zero(float* v, size_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  const float exp_neg_max = std::exp(-mx);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v[i] > 0.0000001f || v[i] < -0.0000001f) {
      v[i] = std::exp(v[i] - mx);
      sum += v[i];
    } else {
      v[i] *= exp_neg_max;
    }
  }
  for (size_t i = 0; i < n; ++i) v[i] /= sum;
}

// Applies the transform to a row of n >= 2 scores in place.
inline void transform_row(PostTransform t, float* v, size_t n) {
  switch (t) {
    case PostTransform::Probit:
      for (size_t i = 0; i < n; ++i) v[i] = probit(v[i]);
      break;
    case PostTransform::Logistic:
      for (size_t i = 0; i < n; ++i) v[i] = logistic(v[i]);
      break;
    case PostTransform::Softmax:
      softmax(v, n);
      break;
    case PostTransform::SoftmaxZero:
      softmax_zero(v, n);
      break;
    case PostTransform::None:
      break;
  }
}

// How a binary classifier with one score writes its two columns (onnxruntime's convention):
// 0/1 = all weights positive (a probability p: [1 - p, p]), 2/3 = mixed weights (a margin s:
// [-s, s], or under LOGISTIC [logistic(-s), logistic(s)]); -1 = one column only.
inline void write_binary(PostTransform t, int second_class, float score, float* z) {
  if (t == PostTransform::Probit) {
    z[0] = probit(score);
    return;
  }
  switch (second_class) {
    case 0:
    case 1:
      z[0] = 1 - score;
      z[1] = score;
      break;
    case 2:
    case 3:
      if (t == PostTransform::Logistic) {
        z[0] = logistic(-score);
        z[1] = logistic(score);
      } else {
        z[0] = -score;
        z[1] = score;
      }
      break;
    default:
      z[0] = score;
  }
}

// X as a row-major [rows, cols] array of T (float, double, int32 or int64 converted).
template <class T>
struct Rows {
  std::vector<T> storage;
  const T* data = nullptr;
  int64_t rows = 0, cols = 0;
};

template <class T>
Rows<T> rows_of(const Tensor& x) {
  Rows<T> r;
  r.rows = x.rank() == 1 ? 1 : x.dim(0);
  r.cols = x.rank() == 1 ? x.dim(0) : x.dim(1);
  if (x.dtype() == DType::Float32 && std::is_same_v<T, float>) {
    r.data = reinterpret_cast<const T*>(x.data<float>());
    return r;
  }
  if (x.dtype() == DType::Float64 && std::is_same_v<T, double>) {
    r.data = reinterpret_cast<const T*>(x.data<double>());
    return r;
  }
  r.storage.resize(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    T v{};
    switch (x.dtype()) {
      case DType::Float32:
        v = static_cast<T>(x.data<float>()[i]);
        break;
      case DType::Float64:
        v = static_cast<T>(x.data<double>()[i]);
        break;
      case DType::Int32:
        v = static_cast<T>(x.data<int32_t>()[i]);
        break;
      case DType::Int64:
        v = static_cast<T>(x.data<int64_t>()[i]);
        break;
      default:
        break;
    }
    r.storage[static_cast<size_t>(i)] = v;
  }
  r.data = r.storage.data();
  return r;
}

// Supported when X is float, double, int32 or int64.
inline std::string numeric_x(const NodeSignature& sig) {
  const DType d = sig.inputs[0].dtype;
  if (d == DType::Float32 || d == DType::Float64 || d == DType::Int32 || d == DType::Int64)
    return "";
  return std::string("X is ") + dtype_name(d) + "; expected float, double, int32 or int64";
}

}  // namespace quilt::cpu::ml
