// CPU kernels of the elementwise op family: broadcasting binary ops, comparisons, logic, the
// variadic ops, PRelu and Where. Unary ops are in elementwise_unary.cpp, Cast in
// elementwise_cast.cpp.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/float_to_int.hpp"
#include "backends/cpu/kernels/wrapping.hpp"

namespace quilt::cpu {

void register_cpu_elementwise_unary(KernelRegistry& r);
void register_cpu_elementwise_cast(KernelRegistry& r);

namespace {

[[noreturn]] void fail_dtype(const KernelContext& ctx, size_t input) {
  ctx.node.fail(std::string("the CPU kernel does not support input ") + std::to_string(input) +
                " of dtype " + dtype_name(ctx.input(input).dtype()));
}

// All ops whose inputs share one dtype: fn(T{}) for input 0's dtype in Types.
template <class Types, class Fn>
void dispatch(const KernelContext& ctx, Types types, Fn&& fn) {
  if (!visit_dtype(ctx.input(0).dtype(), types, fn)) fail_dtype(ctx, 0);
}

// ---- arithmetic ----

// Integers wrap around (wrapping.hpp); floats are the plain operators.
struct AddOp {
  template <class T>
  T operator()(T a, T b) const {
    return wrapping_add(a, b);
  }
};
struct SubOp {
  template <class T>
  T operator()(T a, T b) const {
    return wrapping_sub(a, b);
  }
};
struct MulOp {
  template <class T>
  T operator()(T a, T b) const {
    return wrapping_mul(a, b);
  }
};
// Integer division truncates toward zero like C; x / 0 gives 0 and MIN / -1 wraps instead of
// trapping, so a bad value cannot crash the process.
struct DivOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return wrapping_neg(a);
      return static_cast<T>(a / b);
    }
  }
};

// Mod with fmod = 1: the result has the dividend's sign (C fmod / %). With fmod = 0: the
// divisor's sign (Python / numpy mod).
template <bool kFmod>
struct ModOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = std::fmod(a, b);
      if (!kFmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
        T r = static_cast<T>(a % b);
        if (!kFmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    }
  }
};

template <class Op, class Types>
KernelFn same_type_binary(Types types) {
  return [types](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor& out = ctx.output_uninitialized(0);
    dispatch(ctx, types, [&](auto tag) {
      using T = decltype(tag);
      broadcast_binary<T, T, T>(ctx.pool, a, b, out, Op{});
    });
  };
}

// ---- Pow ----

// Integer base and exponent: exact repeated squaring (pow through double loses int64 bits).
template <class T, class E>
T int_pow(T base, E exp) {
  if (std::is_signed_v<E> && exp < E(0)) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2) ? T(-1) : T(1);
    return 0;  // |base| >= 2: the true value truncates to 0 (base 0: undefined, give 0)
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  auto e = static_cast<uint64_t>(exp);
  while (e) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <class T, class E>
T pow_value(T a, E b) {
  if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
    return int_pow(a, b);
  } else if constexpr (std::is_same_v<T, float> && !std::is_same_v<E, double>) {
    return std::pow(a, static_cast<float>(b));
  } else if constexpr (std::is_integral_v<T>) {  // an integer base, a float exponent
    return float_to_int<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else {
    return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
}

using PowTypes = TypeList<float, double, int32_t, int64_t>;

void pow_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output_uninitialized(0);
  bool ok = visit_dtype(a.dtype(), PowTypes{}, [&](auto base_tag) {
    using T = decltype(base_tag);
    // A scalar float exponent of 2 or 3 (squares in norms, cubes in Gelu) is a multiply.
    if constexpr (std::is_floating_point_v<T>) {
      if (b.numel() == 1 && b.dtype() == a.dtype()) {
        const T e = b.data<T>()[0];
        if (e == 2) {
          broadcast_binary<T, T, T>(ctx.pool, a, b, out, [](T x, T) { return x * x; });
          return;
        }
        if (e == 3) {
          broadcast_binary<T, T, T>(ctx.pool, a, b, out, [](T x, T) { return x * x * x; });
          return;
        }
      }
    }
    if (!visit_dtype(b.dtype(), NumericTypes{}, [&](auto exp_tag) {
          using E = decltype(exp_tag);
          broadcast_binary<T, E, T>(ctx.pool, a, b, out, [](T x, E y) { return pow_value(x, y); });
        }))
      fail_dtype(ctx, 1);
  });
  if (!ok) fail_dtype(ctx, 0);
}

// ---- comparisons and logic ----

template <class Op, class Types>
KernelFn compare_kernel(Types types) {
  return [types](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor& out = ctx.output_uninitialized(0);
    dispatch(ctx, types, [&](auto tag) {
      using T = decltype(tag);
      broadcast_binary<T, T, bool>(ctx.pool, a, b, out, Op{});
    });
  };
}

struct EqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct LessOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct LessOrEqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterOrEqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct BitAndOp {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct BitOrOp {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct BitXorOp {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};
// Shifts by the type's width or more give 0 (a C++ shift would be undefined).
template <bool kLeft>
struct ShiftOp {
  template <class T>
  T operator()(T a, T b) const {
    if (b >= sizeof(T) * 8) return 0;
    return static_cast<T>(kLeft ? a << b : a >> b);
  }
};

struct AndOp {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  bool operator()(bool a, bool b) const { return a || b; }
};
struct XorOp {
  bool operator()(bool a, bool b) const { return a != b; }
};

// ---- variadic ----

// Min and Max propagate NaN like numpy's minimum/maximum.
struct MinOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a < b || a != a) ? a : b;
    return a < b ? a : b;
  }
};
struct MaxOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a > b || a != a) ? a : b;
    return a > b ? a : b;
  }
};

// out = in0 op in1 op ... with broadcasting across all inputs; Mean divides by the count.
template <class Op, bool kMean, class Types>
KernelFn variadic_kernel(Types types) {
  return [types](KernelContext& ctx) {
    Tensor& out = ctx.output_uninitialized(0);
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape());
    BroadcastPlan plan(out.shape(), shapes);
    dispatch(ctx, types, [&](auto tag) {
      using T = decltype(tag);
      std::vector<const T*> in;
      for (size_t i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.input(i).data<T>());
      T* po = out.data<T>();
      const Op op;
      parallel_runs(ctx.pool, plan, kElementwiseGrain,
                    [&](int64_t o, const int64_t* off, int64_t n, const int64_t* step) {
                      T* y = po + o;
                      const T* x0 = in[0] + off[0];
                      if (step[0])
                        for (int64_t i = 0; i < n; ++i) y[i] = x0[i];
                      else
                        for (int64_t i = 0; i < n; ++i) y[i] = *x0;
                      for (size_t k = 1; k < in.size(); ++k) {
                        const T* xk = in[k] + off[k];
                        binary_run(y, y, 1, xk, step[k], n, op);
                      }
                      if constexpr (kMean) {
                        const T scale = static_cast<T>(in.size());
                        for (int64_t i = 0; i < n; ++i) y[i] /= scale;
                      }
                    });
    });
  };
}

// ---- PRelu and Where ----

void prelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  Tensor& out = ctx.output_uninitialized(0);
  dispatch(ctx, SignedTypes{}, [&](auto tag) {
    using T = decltype(tag);
    broadcast_binary<T, T, T>(ctx.pool, x, slope, out,
                              [](T v, T s) { return v < 0 ? static_cast<T>(v * s) : v; });
  });
}

// Where moves elements without looking at them, so one instantiation per element size serves
// every dtype.
template <class U>
void where_typed(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  Tensor& out = ctx.output_uninitialized(0);
  BroadcastPlan plan(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
  const bool* pc = c.data<bool>();
  const U* px = static_cast<const U*>(x.raw_data());
  const U* py = static_cast<const U*>(y.raw_data());
  U* po = static_cast<U*>(out.raw_data());
  parallel_runs(ctx.pool, plan, kElementwiseGrain,
                [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
                  const bool* cc = pc + off[0];
                  const U* xx = px + off[1];
                  const U* yy = py + off[2];
                  U* oo = po + o;
                  if (s[0] && s[1] && s[2]) {
                    for (int64_t i = 0; i < n; ++i) oo[i] = cc[i] ? xx[i] : yy[i];
                  } else {
                    for (int64_t i = 0; i < n; ++i)
                      oo[i] = cc[i * s[0]] ? xx[i * s[1]] : yy[i * s[2]];
                  }
                });
}

void where_kernel(KernelContext& ctx) {
  switch (dtype_size(ctx.input(1).dtype())) {
    case 1:
      return where_typed<uint8_t>(ctx);
    case 2:
      return where_typed<uint16_t>(ctx);
    case 4:
      return where_typed<uint32_t>(ctx);
    case 8:
      return where_typed<uint64_t>(ctx);
    default:
      fail_dtype(ctx, 1);
  }
}

// ---- legacy broadcasting (opsets before 7) ----

// Runs fn with input 1 replaced by `b` (a reshaped view of it); the output is input 0's dtype.
void run_with_input1(KernelContext& ctx, const KernelFn& fn, const Tensor& b) {
  const Tensor* inputs[] = {&ctx.input(0), &b};
  const TypeShape types[] = {{ctx.input(0).dtype(), true, ctx.output_shape(0)}};
  Tensor outputs[1];
  KernelContext inner(ctx.node, inputs, types, outputs, ctx.pool);
  fn(inner);
  ctx.set_output(0, outputs[0]);
}

// Add, Sub, Mul, Div, Pow before opset 7: with broadcast = 1, B broadcasts to A aligned at
// `axis` (default: the trailing dims), or everywhere when it has one element. Shape inference
// (core/ops/legacy.cpp) checked the shapes; appending 1s to B's shape makes numpy broadcasting
// align it at `axis`. With broadcast = 0 the shapes are equal and fn runs as is.
KernelFn with_legacy_broadcast(KernelFn fn) {
  return [fn](KernelContext& ctx) {
    if (ctx.node.opset >= 7 || ctx.node.attr_int("broadcast", 0) == 0) return fn(ctx);
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    std::vector<int64_t> shape;  // one element: a scalar
    if (b.numel() != 1) {
      const int64_t ra = a.rank(), rb = b.rank();
      const int64_t axis = ctx.node.has_attr("axis") ? ctx.node.attr_int("axis", 0) : ra - rb;
      if (axis < 0 || axis > ra - rb)
        ctx.node.fail("axis " + std::to_string(axis) + " does not fit B of shape " +
                          to_string(b.shape()) + " inside A of shape " + to_string(a.shape()),
                      ErrorCode::InvalidArgument);
      shape = b.shape();
      shape.resize(static_cast<size_t>(ra - axis), 1);
    }
    run_with_input1(ctx, fn, b.reshaped(std::move(shape)));
  };
}

// PRelu before opset 7: a one-element slope applies everywhere, otherwise there is one slope
// per channel (shape [C] against X of shape [N, C, ...]; checked by shape inference).
KernelFn with_legacy_prelu(KernelFn fn) {
  return [fn](KernelContext& ctx) {
    if (ctx.node.opset >= 7) return fn(ctx);
    const Tensor& x = ctx.input(0);
    const Tensor& slope = ctx.input(1);
    std::vector<int64_t> shape;  // one element: a scalar
    if (slope.numel() != 1) {
      if (x.rank() < 2 || slope.rank() != 1 || slope.dim(0) != x.dim(1))
        ctx.node.fail("slope of shape " + to_string(slope.shape()) +
                          " is neither one element nor one per channel of X " +
                          to_string(x.shape()),
                      ErrorCode::InvalidArgument);
      shape.assign(static_cast<size_t>(x.rank() - 1), 1);
      shape[0] = x.dim(1);
    }
    run_with_input1(ctx, fn, slope.reshaped(std::move(shape)));
  };
}

SupportFn all_of(std::vector<SupportFn> fns) {
  return [fns](const NodeSignature& sig) {
    for (const auto& f : fns)
      if (std::string reason = f(sig); !reason.empty()) return reason;
    return std::string();
  };
}

}  // namespace

void register_cpu_elementwise(KernelRegistry& r) {
  // float16 and bfloat16 run through these float32 kernels (the widening of
  // backends/cpu/widen.cpp).
  auto arith = [&](const char* op, KernelFn fn) {
    r.add(op, dtypes_of_input(dtypes_of(NumericTypes{})), std::move(fn));
  };
  // Opsets before 7 broadcast B to A by the legacy `broadcast`/`axis` rules.
  auto legacy_arith = [&](const char* op, KernelFn fn) {
    r.add(op, dtypes_of_input(dtypes_of(NumericTypes{})), with_legacy_broadcast(std::move(fn)));
  };
  legacy_arith("Add", same_type_binary<AddOp>(NumericTypes{}));
  legacy_arith("Sub", same_type_binary<SubOp>(NumericTypes{}));
  legacy_arith("Mul", same_type_binary<MulOp>(NumericTypes{}));
  legacy_arith("Div", same_type_binary<DivOp>(NumericTypes{}));
  arith("Mod", [](KernelContext& ctx) {
    if (ctx.node.attr_int("fmod", 0))
      same_type_binary<ModOp<true>>(NumericTypes{})(ctx);
    else
      same_type_binary<ModOp<false>>(NumericTypes{})(ctx);
  });
  r.add("Pow",
        all_of({dtypes_of_input(dtypes_of(PowTypes{}), 0),
                dtypes_of_input(dtypes_of(NumericTypes{}), 1)}),
        with_legacy_broadcast(pow_kernel));

  auto compare = [&](const char* op, auto types, KernelFn fn) {
    r.add(op, dtypes_of_input(dtypes_of(types)), std::move(fn));
  };
  compare("Equal", AllTypes{}, compare_kernel<EqualOp>(AllTypes{}));
  compare("Less", NumericTypes{}, compare_kernel<LessOp>(NumericTypes{}));
  compare("Greater", NumericTypes{}, compare_kernel<GreaterOp>(NumericTypes{}));
  compare("LessOrEqual", NumericTypes{}, compare_kernel<LessOrEqualOp>(NumericTypes{}));
  compare("GreaterOrEqual", NumericTypes{}, compare_kernel<GreaterOrEqualOp>(NumericTypes{}));

  const SupportFn boolean = dtypes_of_input({DType::Bool});
  r.add("And", boolean, compare_kernel<AndOp>(TypeList<bool>{}));
  r.add("Or", boolean, compare_kernel<OrOp>(TypeList<bool>{}));
  r.add("Xor", boolean, compare_kernel<XorOp>(TypeList<bool>{}));
  r.add("Not", boolean, [](KernelContext& ctx) {
    const bool* x = ctx.input(0).data<bool>();
    bool* y = ctx.output(0).data<bool>();
    ctx.pool.parallel_for(ctx.input(0).numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = !x[i];
    });
  });

  arith("Min", variadic_kernel<MinOp, false>(NumericTypes{}));
  arith("Max", variadic_kernel<MaxOp, false>(NumericTypes{}));
  auto float_op = [&](const char* op, auto types, KernelFn fn) {
    r.add(op, dtypes_of_input(dtypes_of(types)), std::move(fn));
  };
  float_op("Sum", FloatTypes{}, variadic_kernel<AddOp, false>(FloatTypes{}));
  float_op("Mean", FloatTypes{}, variadic_kernel<AddOp, true>(FloatTypes{}));
  r.add("PRelu", dtypes_of_input(dtypes_of(SignedTypes{})), with_legacy_prelu(prelu_kernel));
  r.add("Where", dtypes_of_input({DType::Bool}), where_kernel);

  const SupportFn ints = dtypes_of_input(dtypes_of(IntTypes{}));
  r.add("BitwiseAnd", ints, same_type_binary<BitAndOp>(IntTypes{}));
  r.add("BitwiseOr", ints, same_type_binary<BitOrOp>(IntTypes{}));
  r.add("BitwiseXor", ints, same_type_binary<BitXorOp>(IntTypes{}));
  r.add("BitwiseNot", ints, [](KernelContext& ctx) {
    dispatch(ctx, IntTypes{}, [&](auto tag) {
      using T = decltype(tag);
      const T* x = ctx.input(0).data<T>();
      T* y = ctx.output(0).data<T>();
      ctx.pool.parallel_for(ctx.input(0).numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = static_cast<T>(~x[i]);
      });
    });
  });
  using UnsignedTypes = TypeList<uint8_t, uint16_t, uint32_t, uint64_t>;
  r.add("BitShift", dtypes_of_input(dtypes_of(UnsignedTypes{})), [](KernelContext& ctx) {
    if (ctx.node.attr_string("direction", "") == "LEFT")
      same_type_binary<ShiftOp<true>>(UnsignedTypes{})(ctx);
    else
      same_type_binary<ShiftOp<false>>(UnsignedTypes{})(ctx);
  });

  register_cpu_elementwise_unary(r);
  register_cpu_elementwise_cast(r);
}

}  // namespace quilt::cpu
