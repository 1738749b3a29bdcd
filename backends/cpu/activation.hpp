// Element-wise activations on float32 buffers, vectorised (AVX2 + FMA, the build's baseline),
// shared by the unary kernels (Relu, Sigmoid, Gelu, ...) and by the kernels that apply an
// activation fused into their output (Conv, Gemm, MatMul: see backends/cpu/fusion.cpp).
//
//   Activation act{Activation::Kind::LeakyRelu, 0.2f};
//   act.apply(x, y, n);  // y[i] = act(x[i]); x may equal y
//
// exp, tanh and erf are branch-free polynomial forms (Cephes coefficients for exp and tanh, a
// fit made for Quilt for erf) within a few ulp of libm; NaN propagates as in the scalar ops.
#pragma once

#include <cstdint>
#include <string>

namespace quilt {
struct Node;
}

namespace quilt::cpu {

struct Activation {
  enum class Kind {
    None,
    Relu,
    LeakyRelu,    // x >= 0 ? x : alpha * x
    Clip,         // min(max(x, alpha), beta); NaN stays NaN
    HardSigmoid,  // clamp(alpha * x + beta, 0, 1)
    HardSwish,    // x * clamp(x * (1/6) + 1/2, 0, 1)
    Sigmoid,
    Silu,  // x * sigmoid(x) (Sigmoid followed by Mul with its input)
    Tanh,
    Gelu,      // 0.5 x (1 + erf(x / sqrt 2))
    GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  };
  Kind kind = Kind::None;
  float alpha = 0.f, beta = 0.f;

  bool none() const { return kind == Kind::None; }
  // y[i] = act(x[i]) for i in [0, n); x may equal y (in place).
  void apply(const float* x, float* y, int64_t n) const;
  void apply(float* y, int64_t n) const { apply(y, y, n); }
  // y[i] = act(y[i] + add[i]) (a fused residual, then the activation); add may be null.
  void apply_added(float* y, const float* add, int64_t n) const;
  // The same over `rows` rows of n floats, ldy apart, in place (add laid out as y): a GEMM's
  // finished block while it is in L1.
  void apply_added_rows(float* y, int64_t ldy, const float* add, int64_t rows, int64_t n) const;
  // One value, the same arithmetic as apply (for tails and tests).
  float operator()(float x) const;
  std::string name() const;  // "Relu", "LeakyRelu(alpha=0.2)", ...
};

// What a GEMM tile (gemm_packed, gemm_channels, the bfloat16 GEMM) does in registers after its
// last depth block, before its one store: add the residual (laid out as C; null: none), then
// apply the activation (act16's kinds; the others run in a pass after).
struct Finish {
  const float* residual = nullptr;
  Activation act;
};

// Activation::apply on the 8-lane (AVX2) forms only, as on CPUs without AVX-512 (for tests: the
// 16-lane forms take over where the CPU has them).
void apply_8_lanes(const Activation& act, const float* x, float* y, int64_t n);

}  // namespace quilt::cpu
