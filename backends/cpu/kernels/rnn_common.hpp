// Pieces shared by the RNN, GRU and LSTM CPU kernels: activation functions with their
// alpha/beta, the attributes common to the three ops, the index maps of the two layouts, and a
// C = A * B product on sgemm or a streaming small-m loop (float32) or a plain loop (float64).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu::rnn {

// exp for float from its Taylor series on [-ln2/2, ln2/2] and a power of two: within ~2 ulp,
// branch-free (so loops over it vectorise) and several times faster than libm's tanhf. Inputs
// are clamped to the finite range of the result.
inline float exp_taylor(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round x / ln2 to the nearest integer with the 1.5 * 2^23 trick (exact in float).
  const float n = (x * 1.44269504f + 12582912.f) - 12582912.f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split for exactness
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid_fast(float x) {
  return 1.f / (1.f + exp_taylor(-x));
}

// tanh from its odd series near 0 (where (1 - t) / (1 + t) would cancel) and from
// exp(-2|x|) elsewhere.
inline float tanh_fast(float x) {
  const float a = std::abs(x);
  const float x2 = x * x;
  float s = -1382.f / 155925.f;
  s = s * x2 + 62.f / 2835.f;
  s = s * x2 - 17.f / 315.f;
  s = s * x2 + 2.f / 15.f;
  s = s * x2 - 1.f / 3.f;
  const float series = x + x * x2 * s;
  const float t = exp_taylor(-2.f * a);
  const float big = (1.f - t) / (1.f + t);
  return a < 0.25f ? series : (x < 0.f ? -big : big);
}

inline float activation_tanh(float x) {
  return tanh_fast(x);
}
inline double activation_tanh(double x) {
  return std::tanh(x);
}
inline float activation_sigmoid(float x) {
  return sigmoid_fast(x);
}
inline double activation_sigmoid(double x) {
  // Split on the sign so exp never overflows.
  if (x >= 0.0) return 1.0 / (1.0 + std::exp(-x));
  return std::exp(x) / (1.0 + std::exp(x));
}

enum class ActKind {
  Relu,
  Tanh,
  Sigmoid,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

struct Activation {
  ActKind kind = ActKind::Tanh;
  float alpha = 0.f;
  float beta = 0.f;

  template <class T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    switch (kind) {
      case ActKind::Relu:
        return x > T(0) ? x : T(0);
      case ActKind::Tanh:
        return activation_tanh(x);
      case ActKind::Sigmoid:
        return activation_sigmoid(x);
      case ActKind::Affine:
        return a * x + b;
      case ActKind::LeakyRelu:
        return x >= T(0) ? x : a * x;
      case ActKind::ThresholdedRelu:
        return x > a ? x : T(0);
      case ActKind::ScaledTanh:
        return a * activation_tanh(b * x);
      case ActKind::HardSigmoid: {
        T v = a * x + b;
        return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
      }
      case ActKind::Elu:
        return x >= T(0) ? x : a * (std::exp(x) - T(1));
      case ActKind::Softsign:
        return x / (T(1) + std::abs(x));
      case ActKind::Softplus:
        return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }

  // v[i] = act(v[i]) with the dispatch hoisted out of the loop.
  template <class T>
  void apply(T* v, int64_t n) const {
    switch (kind) {
      case ActKind::Tanh:
        for (int64_t i = 0; i < n; ++i) v[i] = activation_tanh(v[i]);
        return;
      case ActKind::Sigmoid:
        for (int64_t i = 0; i < n; ++i) v[i] = activation_sigmoid(v[i]);
        return;
      default:
        for (int64_t i = 0; i < n; ++i) v[i] = (*this)(v[i]);
    }
  }
};

// Attributes common to RNN, GRU and LSTM, parsed once when the kernel is created.
struct RnnAttrs {
  int64_t dirs = 1;
  bool reverse = false;  // direction == "reverse" (the one direction runs backwards)
  int64_t layout = 0;
  float clip = 0.f;  // > 0 when given
  // acts[d * per_dir + k]: activation k of direction d.
  std::vector<Activation> acts;
  int per_dir = 1;
  const Activation& act(int64_t d, int k) const {
    return acts[static_cast<size_t>(d * per_dir + k)];
  }
};

// Parses the common attributes into `out`. defaults: the op's default activation names (one per
// activation of a direction). positional_alpha: also require that onnxruntime's RNN reading of
// activation_alpha/beta (by position in the list) agrees with the spec's (in order of the
// activations that take the value). Returns "" or why the kernel cannot run this node.
std::string parse_rnn_attrs(const Node& node, const std::vector<std::string>& defaults,
                            bool positional_alpha, RnnAttrs& out);

// SupportFn shared by the three ops.
SupportFn rnn_support(std::vector<std::string> defaults, bool positional_alpha);

// Index maps of the two layouts.
struct Layout {
  int64_t layout, seq, batch, dirs, hidden;
  // Row of X (and of X * W^T) holding time step t of batch entry b.
  int64_t x_row(int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  // Offset of Y[t, d, b, :] (layout 0) or Y[b, t, d, :] (layout 1).
  int64_t y_offset(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
  // Offset of Y_h[d, b, :] (layout 0) or Y_h[b, d, :] (layout 1); same for initial_h/c, Y_c.
  int64_t state_offset(int64_t d, int64_t b) const {
    return (layout == 0 ? d * batch + b : b * dirs + d) * hidden;
  }
};

// Per-batch sequence lengths from the optional sequence_lens input (all `seq` when absent).
// Fails naming the node when a length is outside [0, seq].
std::vector<int64_t> sequence_lengths(const KernelContext& ctx, size_t input, int64_t seq,
                                      int64_t batch);

// C[m, n] = A[m, k] * B[k, n] + beta * C. With a pool, a small-m product (the recurrence of
// a small batch, which sgemm would not split) is split over it by columns.
void gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float beta, float* c, int64_t ldc, const ThreadPool* pool = nullptr);
void gemm_nn(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
             int64_t ldb, double beta, double* c, int64_t ldc, const ThreadPool* pool = nullptr);

// The [cols, rows] transpose of a row-major [rows, cols] matrix. The recurrence multiplies by
// the transposed R at every step; OpenBLAS repacks its operand on each call and packs a
// transposed one much more slowly, so the kernels transpose R once per run.
template <class T>
std::vector<T> transposed(const T* m, int64_t rows, int64_t cols) {
  std::vector<T> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[static_cast<size_t>(j * rows + i)] = m[i * cols + j];
  return out;
}

// W and R of every direction transposed, [input, gates] and [hid, gates]: the input projection
// and each step's recurrence then stream them with gemm_nn, whose small-m path needs no packing
// (sgemm's call for a one-row product and the transpose of R on every run were most of a
// VAD-sized LSTM step's 200 us). Made once by the kernel when W and R are constant, else per run.
template <class T>
class TransposedWeights {
 public:
  TransposedWeights(const T* w, const T* r, int64_t dirs, int64_t gates, int64_t input, int64_t hid)
      : w_size_(input * gates), r_size_(hid * gates) {
    for (int64_t d = 0; d < dirs; ++d) {
      auto wt = transposed(w + d * gates * input, gates, input);
      auto rt = transposed(r + d * gates * hid, gates, hid);
      wt_.insert(wt_.end(), wt.begin(), wt.end());
      rt_.insert(rt_.end(), rt.begin(), rt.end());
    }
  }
  const T* w(int64_t d) const { return wt_.data() + d * w_size_; }  // [input, gates]
  const T* r(int64_t d) const { return rt_.data() + d * r_size_; }  // [hid, gates]

 private:
  int64_t w_size_, r_size_;
  std::vector<T> wt_, rt_;
};

// The weights a kernel run uses: `made` when the kernel prepared them (float32, constant W and
// R), else transposed from ctx's inputs into `local`.
template <class T>
const TransposedWeights<T>& transposed_weights(const KernelContext& ctx,
                                               const TransposedWeights<float>* made, int64_t gates,
                                               std::optional<TransposedWeights<T>>& local) {
  if constexpr (std::is_same_v<T, float>)
    if (made) return *made;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  local.emplace(w.data<T>(), r.data<T>(), w.dim(0), gates, x.dim(2), r.dim(2));
  return *local;
}

template <class T>
T clip_value(T x, float clip) {
  if (clip <= 0.f) return x;
  const T c = static_cast<T>(clip);
  return x < -c ? -c : (x > c ? c : x);
}

template <class T>
void clip_all(T* v, int64_t n, float clip) {
  if (clip <= 0.f) return;
  for (int64_t i = 0; i < n; ++i) v[i] = clip_value(v[i], clip);
}

// The kernels, one per file. `weights`: W and R transposed at creation, or null.
void run_rnn(KernelContext& ctx, const RnnAttrs& attrs, const TransposedWeights<float>* weights);
void run_gru(KernelContext& ctx, const RnnAttrs& attrs, bool linear_before_reset,
             const TransposedWeights<float>* weights);
void run_lstm(KernelContext& ctx, const RnnAttrs& attrs, bool input_forget,
              const TransposedWeights<float>* weights);

}  // namespace quilt::cpu::rnn
