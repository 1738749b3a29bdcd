// CPU kernels of the unary elementwise ops (activations, math, Clip, IsNaN, IsInf).
//
// Each op is a scalar function applied over a contiguous buffer split across the pool. The hot
// float32 ones (Exp, Sigmoid, Tanh, Erf, Gelu) use branch-free polynomial forms of exp, tanh and
// erf so that the loops vectorise; they are within a few ulp of the libm result.

// Without these GCC keeps libm's errno path and refuses to if-convert selects that might raise
// FP exceptions, so the math loops would not vectorise. Quilt never reads errno or traps on FP
// exceptions, so results are unchanged. It comes before the includes because GCC does not
// inline functions compiled with other optimisation options into these loops.
#pragma GCC optimize("no-math-errno", "no-trapping-math")

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/float_to_int.hpp"
#include "backends/cpu/kernels/wrapping.hpp"

namespace quilt::cpu {

namespace {

// Transcendental ops cost ~10-50x a multiply: split them across threads earlier.
constexpr int64_t kMathGrain = 1 << 12;

// ---- vectorisable float32 exp and tanh ----

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// exp(x) by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 polynomial for e^r
// (Cephes expf coefficients). Below the float32 normal range the result flushes to 0.
inline float exp_f32(float x) {
  const float hi = 88.72283935546875f, lo = -87.33654022216797f;
  // NaN clamps to lo (the comparison is false): converting NaN to int below would be undefined
  // (UBSan, on the ONNX op cases); the result is NaN anyway (last line).
  float xc = x > lo ? x : lo;
  xc = xc > hi ? hi : xc;
  // Round to nearest by adding and subtracting 1.5 * 2^23 (valid as |xc * log2e| < 2^22).
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n split in two factors so that n = 128 (x just below the overflow limit) stays finite.
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float result = p * bits_to_float(static_cast<uint32_t>(n1 + 127) << 23) *
                 bits_to_float(static_cast<uint32_t>(n2 + 127) << 23);
  result = x > hi ? std::numeric_limits<float>::infinity() : result;
  result = x < lo ? 0.0f : result;
  return x != x ? x : result;
}

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the exp form elsewhere
// (Cephes tanhf).
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float e = exp_f32(2.0f * (ax < 10.0f ? ax : 10.0f));
  float big = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  float result = ax < 0.625f ? small : big;
  return x != x ? x : result;
}

// erf: x * P(x^2) below 1; 1 - e^(-x^2) Q(1/x) from 1 to 4; 1 beyond (erf(4) rounds to 1).
// P and Q are least-squares fits of erf(x)/x and erfc(x) e^(x^2) made for Quilt; the maximum
// relative error over all floats is about 2e-7.
inline float erf_f32(float x) {
  float a = std::fabs(x);
  float z = a * a;
  float p = -5.625398986e-04f;
  p = p * z + 4.916026606e-03f;
  p = p * z - 2.670995524e-02f;
  p = p * z + 1.128013062e-01f;
  p = p * z - 3.761231982e-01f;
  p = p * z + 1.128379121e+00f;
  float small = a * p;
  float ac = a > 4.0f ? 4.0f : a;  // NaN stays NaN
  float t = 1.0f / ac;
  float q = -1.351600260e-02f;
  q = q * t + 4.781874456e-02f;
  q = q * t - 1.503780392e-02f;
  q = q * t - 1.986543158e-01f;
  q = q * t + 4.677893854e-01f;
  q = q * t - 4.594637835e-01f;
  q = q * t + 3.892770625e-02f;
  q = q * t + 5.594750218e-01f;
  q = q * t + 2.445133845e-04f;
  float large = 1.0f - exp_f32(-(ac * ac)) * q;
  return std::copysign(a < 1.0f ? small : large, x);
}

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// log(x) = e ln2 + log(1 + m) with 1 + m in [sqrt(1/2), sqrt(2)) and a degree-9 polynomial
// (Cephes logf coefficients).
inline float log_f32(float x) {
  const bool subnormal = x < 1.17549435e-38f;
  const float xs = subnormal ? x * 8388608.0f : x;  // 2^23 brings subnormals into range
  const uint32_t bits = float_to_bits(xs);
  float e = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xff) - 126) -
            (subnormal ? 23.0f : 0.0f);
  float m = bits_to_float((bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float result = m + y + 0.693359375f * e;
  result = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : result;
  result = x == 0.0f ? -std::numeric_limits<float>::infinity() : result;
  result = x == std::numeric_limits<float>::infinity() ? x : result;
  return x != x ? x : result;
}

template <class T>
T log_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return log_f32(x);
  else
    return std::log(x);
}

template <class T>
T erf_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return erf_f32(x);
  else
    return std::erf(x);
}

template <class T>
T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}

template <class T>
T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return tanh_f32(x);
  else
    return std::tanh(x);
}

// Clamps to [0, 1]; NaN stays NaN (std::fmin/fmax would drop it).
template <class T>
T clamp01(T v) {
  return std::min(std::max(v, T(0)), T(1));
}

// ---- the map helper ----

// y[i] = f(x[i]) with X = input 0 and Y = output 0.
template <class T, class O, class F>
void map_unary(KernelContext& ctx, F f, int64_t grain) {
  const Tensor& x = ctx.input(0);
  const T* px = x.data<T>();
  O* py = ctx.output_uninitialized(0).data<O>();
  ctx.pool.parallel_for(x.numel(), grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = f(px[i]);
  });
}

// An op defined by make(node, T{}) -> (T -> T) for each T of Types. make runs once per run to
// read attributes.
template <class Types, class Make>
KernelFn unary_kernel(Make make, int64_t grain) {
  return [make, grain](KernelContext& ctx) {
    bool ok = visit_dtype(ctx.input(0).dtype(), Types{}, [&](auto tag) {
      using T = decltype(tag);
      map_unary<T, T>(ctx, make(ctx.node, tag), grain);
    });
    if (!ok)
      ctx.node.fail(std::string("the CPU kernel does not support dtype ") +
                    dtype_name(ctx.input(0).dtype()));
  };
}

template <class Types, class Make>
void add_unary(KernelRegistry& r, const char* op, Make make, int64_t grain = kElementwiseGrain) {
  r.add(op, dtypes_of_input(dtypes_of(Types{})), unary_kernel<Types>(make, grain));
}

// A stateless float op given as a generic lambda T -> T.
template <class Types, class F>
void add_simple(KernelRegistry& r, const char* op, F f, int64_t grain = kMathGrain) {
  add_unary<Types>(
      r, op,
      [f](const Node&, auto tag) {
        using T = decltype(tag);
        return [f](T x) -> T { return f(x); };
      },
      grain);
}

// ---- Sqrt ----

// GCC keeps an errno branch around sqrt even with no-math-errno set per function, which stops
// vectorisation; the AVX instruction gives the same IEEE result (NaN for x < 0).
template <class T>
void sqrt_range(const T* x, T* y, int64_t begin, int64_t end) {
  int64_t i = begin;
#ifdef __AVX__
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 8 <= end; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  } else {
    for (; i + 4 <= end; i += 4) _mm256_storeu_pd(y + i, _mm256_sqrt_pd(_mm256_loadu_pd(x + i)));
  }
#endif
  for (; i < end; ++i) y[i] = std::sqrt(x[i]);
}

void sqrt_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool ok = visit_dtype(x.dtype(), FloatTypes{}, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = ctx.output_uninitialized(0).data<T>();
    ctx.pool.parallel_for(x.numel(), kElementwiseGrain,
                          [&](int64_t b, int64_t e) { sqrt_range(px, py, b, e); });
  });
  if (!ok)
    ctx.node.fail(std::string("the CPU kernel does not support dtype ") + dtype_name(x.dtype()));
}

// ---- Clip ----

template <class T>
T clip_bound(const KernelContext& ctx, size_t input, T fallback) {
  const Tensor* t = ctx.optional_input(input);
  if (!t || t->numel() == 0) return fallback;
  if (t->dtype() != dtype_of<T>())
    ctx.node.fail(std::string(input == 1 ? "min" : "max") + " has dtype " + dtype_name(t->dtype()) +
                  ", expected " + dtype_name(dtype_of<T>()));
  return t->data<T>()[0];
}

void clip_kernel(KernelContext& ctx) {
  bool ok = visit_dtype(ctx.input(0).dtype(), NumericTypes{}, [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (ctx.node.opset < 11) {
      if constexpr (std::is_floating_point_v<T>) {
        lo = static_cast<T>(ctx.node.attr_float("min", std::numeric_limits<float>::lowest()));
        hi = static_cast<T>(ctx.node.attr_float("max", std::numeric_limits<float>::max()));
      }
    } else {
      lo = clip_bound<T>(ctx, 1, lo);
      hi = clip_bound<T>(ctx, 2, hi);
    }
    // min > max gives max everywhere, as the spec asks; NaN passes through.
    map_unary<T, T>(
        ctx, [lo, hi](T x) { return std::min(std::max(x, lo), hi); }, kElementwiseGrain);
  });
  if (!ok)
    ctx.node.fail(std::string("the CPU kernel does not support dtype ") +
                  dtype_name(ctx.input(0).dtype()));
}

SupportFn clip_support() {
  auto numeric = dtypes_of_input(dtypes_of(NumericTypes{}));
  auto floats = dtypes_of_input(dtypes_of(FloatTypes{}));
  return [numeric, floats](const NodeSignature& sig) {
    return sig.node.opset < 11 ? floats(sig) : numeric(sig);
  };
}

// The activations of backends/cpu/activation.hpp: float32 through its vector code (the same
// one Conv/Gemm/MatMul use when the activation is fused into them), other dtypes through the
// scalar kernel registered before, as are the forms `make` answers Kind::None for.
template <class MakeActivation>
void add_activation(KernelRegistry& r, const char* op, MakeActivation make, int64_t grain) {
  KernelFactory generic = r.find(op, "")->create;
  r.replace_kernel(
      op,
      KernelFactory([make, generic, grain](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
        struct Fast : Kernel {
          Activation act;
          std::unique_ptr<Kernel> other;
          int64_t grain = 0;
          void run(KernelContext& ctx) const override {
            const Tensor& x = ctx.input(0);
            if (x.dtype() != DType::Float32) return other->run(ctx);
            const float* px = x.data<float>();
            float* py = ctx.output_uninitialized(0).data<float>();
            ctx.pool.parallel_for(x.numel(), grain,
                                  [&](int64_t b, int64_t e) { act.apply(px + b, py + b, e - b); });
          }
        };
        const Activation act = make(sig.node);
        if (act.none()) return generic(sig);  // a form the vectorised activations lack
        auto k = std::make_unique<Fast>();
        k->act = act;
        k->other = generic(sig);
        k->grain = grain;
        return k;
      }));
}

}  // namespace

void register_cpu_elementwise_unary(KernelRegistry& r) {
  // Cheap float ops.
  add_simple<SignedTypes>(
      r, "Relu", [](auto x) { return x < 0 ? decltype(x)(0) : x; }, kElementwiseGrain);
  add_simple<SignedTypes>(
      r, "Neg", [](auto x) { return wrapping_neg(x); }, kElementwiseGrain);
  add_simple<NumericTypes>(
      r, "Abs",
      [](auto x) {
        using T = decltype(x);
        if constexpr (std::is_unsigned_v<T>)
          return x;
        else if constexpr (std::is_floating_point_v<T>)
          return std::fabs(x);
        else
          return x < 0 ? wrapping_neg(x) : x;  // the most negative integer stays itself
      },
      kElementwiseGrain);
  add_simple<NumericTypes>(
      r, "Sign",
      [](auto x) {
        using T = decltype(x);
        if constexpr (std::is_floating_point_v<T>)
          if (x != x) return x;
        return static_cast<T>((x > T(0)) - (x < T(0)));
      },
      kElementwiseGrain);
  add_simple<FloatTypes>(
      r, "Floor", [](auto x) { return std::floor(x); }, kElementwiseGrain);
  add_simple<FloatTypes>(
      r, "Ceil", [](auto x) { return std::ceil(x); }, kElementwiseGrain);
  // rint rounds half to even in the default rounding mode.
  add_simple<FloatTypes>(
      r, "Round", [](auto x) { return std::rint(x); }, kElementwiseGrain);
  add_simple<FloatTypes>(
      r, "Reciprocal", [](auto x) { return decltype(x)(1) / x; }, kElementwiseGrain);
  r.add("Sqrt", dtypes_of_input(dtypes_of(FloatTypes{})), sqrt_kernel);
  add_simple<FloatTypes>(
      r, "Softsign", [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); }, kElementwiseGrain);
  add_simple<FloatTypes>(
      r, "HardSwish",
      [](auto x) {
        using T = decltype(x);
        return x * clamp01(x * (T(1) / T(6)) + T(0.5));  // alpha = 1/6
      },
      kElementwiseGrain);

  // Transcendental float ops.
  add_simple<FloatTypes>(r, "Exp", [](auto x) { return exp_of(x); });
  add_simple<FloatTypes>(r, "Log", [](auto x) { return log_of(x); });
  add_simple<FloatTypes>(r, "Sin", [](auto x) { return std::sin(x); });
  add_simple<FloatTypes>(r, "Cos", [](auto x) { return std::cos(x); });
  add_simple<FloatTypes>(r, "Erf", [](auto x) { return erf_of(x); });
  add_simple<FloatTypes>(r, "Tanh", [](auto x) { return tanh_of(x); });
  add_simple<FloatTypes>(r, "Sigmoid", [](auto x) {
    using T = decltype(x);
    return T(1) / (T(1) + exp_of(-x));
  });
  // log(1 + e^x) without overflow for large x.
  add_simple<FloatTypes>(r, "Softplus", [](auto x) {
    using T = decltype(x);
    return std::fmax(x, T(0)) + std::log1p(std::exp(-std::fabs(x)));
  });

  // Trigonometric and hyperbolic functions (libm; no fast forms: rare in models).
  add_simple<FloatTypes>(r, "Tan", [](auto x) { return std::tan(x); });
  add_simple<FloatTypes>(r, "Asin", [](auto x) { return std::asin(x); });
  add_simple<FloatTypes>(r, "Acos", [](auto x) { return std::acos(x); });
  add_simple<FloatTypes>(r, "Atan", [](auto x) { return std::atan(x); });
  add_simple<FloatTypes>(r, "Sinh", [](auto x) { return std::sinh(x); });
  add_simple<FloatTypes>(r, "Cosh", [](auto x) { return std::cosh(x); });
  add_simple<FloatTypes>(r, "Asinh", [](auto x) { return std::asinh(x); });
  add_simple<FloatTypes>(r, "Acosh", [](auto x) { return std::acosh(x); });
  add_simple<FloatTypes>(r, "Atanh", [](auto x) { return std::atanh(x); });
  // x * tanh(softplus(x)).
  add_simple<FloatTypes>(r, "Mish", [](auto x) {
    using T = decltype(x);
    return x * tanh_of(std::fmax(x, T(0)) + std::log1p(std::exp(-std::fabs(x))));
  });

  // Ops with attributes.
  add_unary<FloatTypes>(r, "ThresholdedRelu", [](const Node& node, auto tag) {
    using T = decltype(tag);
    const T alpha = static_cast<T>(node.attr_float("alpha", 1.0f));
    return [alpha](T x) { return x > alpha ? x : T(0); };
  });
  add_unary<FloatTypes>(
      r, "Celu",
      [](const Node& node, auto tag) {
        using T = decltype(tag);
        const T alpha = static_cast<T>(node.attr_float("alpha", 1.0f));
        return [alpha](T x) { return x > 0 ? x : alpha * std::expm1(x / alpha); };
      },
      kMathGrain);
  add_unary<FloatTypes>(
      r, "Swish",
      [](const Node& node, auto tag) {
        using T = decltype(tag);
        const T alpha = static_cast<T>(node.attr_float("alpha", 1.0f));
        return [alpha](T x) { return x / (T(1) + exp_of(-alpha * x)); };
      },
      kMathGrain);
  // Shrink is defined for integers too; the comparison and offset are done in double, and an
  // integer result outside the type's range (a float bias of -3.4e38) is converted as
  // onnxruntime's x86 conversion does (float_to_int), not by an undefined static_cast.
  add_unary<NumericTypes>(r, "Shrink", [](const Node& node, auto tag) {
    using T = decltype(tag);
    const double bias = node.attr_float("bias", 0.0f);
    const double lambd = node.attr_float("lambd", 0.5f);
    return [bias, lambd](T x) {
      const double v = static_cast<double>(x);
      const double y = v < -lambd ? v + bias : v > lambd ? v - bias : 0.0;
      if constexpr (std::is_integral_v<T>)
        return float_to_int<T>(y);
      else
        return static_cast<T>(y);
    };
  });

  add_unary<FloatTypes>(r, "LeakyRelu", [](const Node& node, auto tag) {
    using T = decltype(tag);
    const T alpha = static_cast<T>(node.attr_float("alpha", 0.01f));
    return [alpha](T x) { return x >= 0 ? x : alpha * x; };
  });
  add_unary<FloatTypes>(
      r, "Elu",
      [](const Node& node, auto tag) {
        using T = decltype(tag);
        const T alpha = static_cast<T>(node.attr_float("alpha", 1.0f));
        return [alpha](T x) { return x >= 0 ? x : alpha * std::expm1(x); };
      },
      kMathGrain);
  add_unary<FloatTypes>(
      r, "Selu",
      [](const Node& node, auto tag) {
        using T = decltype(tag);
        const T alpha = static_cast<T>(node.attr_float("alpha", 1.67326319217681884765625f));
        const T gamma = static_cast<T>(node.attr_float("gamma", 1.05070102214813232421875f));
        return [alpha, gamma](T x) { return x > 0 ? gamma * x : gamma * alpha * std::expm1(x); };
      },
      kMathGrain);
  add_unary<FloatTypes>(r, "HardSigmoid", [](const Node& node, auto tag) {
    using T = decltype(tag);
    const T alpha = static_cast<T>(node.attr_float("alpha", 0.2f));
    const T beta = static_cast<T>(node.attr_float("beta", 0.5f));
    return [alpha, beta](T x) { return clamp01(alpha * x + beta); };
  });
  add_unary<FloatTypes>(
      r, "Gelu",
      [](const Node& node, auto tag) {
        using T = decltype(tag);
        const bool tanh_form = node.attr_string("approximate", "none") == "tanh";
        return [tanh_form](T x) -> T {
          if (tanh_form) {
            const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
            return T(0.5) * x * (T(1) + tanh_of(k * (x + T(0.044715) * x * x * x)));
          }
          return T(0.5) * x * (T(1) + erf_of(x * static_cast<T>(0.7071067811865476)));
        };
      },
      kMathGrain);

  // Float -> bool predicates.
  r.add("IsNaN", dtypes_of_input(dtypes_of(FloatTypes{})),

        [](KernelContext& ctx) {
          visit_dtype(ctx.input(0).dtype(), FloatTypes{}, [&](auto tag) {
            using T = decltype(tag);
            map_unary<T, bool>(
                ctx, [](T x) { return x != x; }, kElementwiseGrain);
          });
        });
  r.add("IsInf", dtypes_of_input(dtypes_of(FloatTypes{})),

        [](KernelContext& ctx) {
          const bool neg = ctx.node.attr_int("detect_negative", 1) != 0;
          const bool pos = ctx.node.attr_int("detect_positive", 1) != 0;
          visit_dtype(ctx.input(0).dtype(), FloatTypes{}, [&](auto tag) {
            using T = decltype(tag);
            const T inf = std::numeric_limits<T>::infinity();
            map_unary<T, bool>(
                ctx, [=](T x) { return (pos && x == inf) || (neg && x == -inf); },
                kElementwiseGrain);
          });
        });

  r.add("Clip", clip_support(), clip_kernel);

  using Kind = Activation::Kind;
  auto fixed = [](Kind kind) { return [kind](const Node&) { return Activation{kind}; }; };
  add_activation(r, "Relu", fixed(Kind::Relu), kElementwiseGrain);
  add_activation(r, "HardSwish", fixed(Kind::HardSwish), kElementwiseGrain);
  add_activation(r, "Sigmoid", fixed(Kind::Sigmoid), kMathGrain);
  add_activation(
      r, "Swish",
      [](const Node& n) {
        return Activation{n.attr_float("alpha", 1.f) == 1.f ? Kind::Silu : Kind::None};
      },
      kMathGrain);
  add_activation(r, "Tanh", fixed(Kind::Tanh), kMathGrain);
  add_activation(
      r, "LeakyRelu",
      [](const Node& n) {
        return Activation{Kind::LeakyRelu, n.attr_float("alpha", 0.01f)};
      },
      kElementwiseGrain);
  add_activation(
      r, "HardSigmoid",
      [](const Node& n) {
        return Activation{Kind::HardSigmoid, n.attr_float("alpha", 0.2f),
                          n.attr_float("beta", 0.5f)};
      },
      kElementwiseGrain);
  add_activation(
      r, "Gelu",
      [](const Node& n) {
        return Activation{n.attr_string("approximate", "none") == "tanh" ? Kind::GeluTanh
                                                                         : Kind::Gelu};
      },
      kMathGrain);
}

}  // namespace quilt::cpu
