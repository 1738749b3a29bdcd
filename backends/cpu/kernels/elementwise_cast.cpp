// CPU kernels of Cast and CastLike: every pair among float32/64, float16, bfloat16, the four
// float8 types, int8..int64, uint8..uint64 and bool.
//
// Float to integer truncates toward zero (C conversion); anything to bool is "!= 0"; float16
// goes through float32 (exact for every float16 value, and one rounding on the way in).
// bfloat16 and float8 values are read exactly and written with one rounding to nearest even
// from the exact source value (core/float8.hpp); the `saturate` attribute (Cast-19+, default 1)
// applies to float8 targets only. int4/uint4 (packed, core/int4.hpp) read as their integer value;
// a cast to them converts to a 64-bit integer first (floats truncate) and keeps its low 4 bits,
// wrapping like every other integer narrowing (onnx's reference: numpy astype).
#include <cstring>
#include <type_traits>

#include "backends/cpu/half_convert.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/float_to_int.hpp"
#include "core/float8.hpp"
#include "core/half.hpp"
#include "core/int4.hpp"

namespace quilt::cpu {
namespace {

// Stands for float16 in the dispatch below (its storage type uint16_t is taken by uint16).
struct Half {
  uint16_t bits;
};

// bfloat16 and float8 bits, tagged with their dtype.
template <DType D, class Bits>
struct Mini {
  Bits bits;
  static constexpr DType dtype = D;
};
using BF16 = Mini<DType::BFloat16, uint16_t>;
using E4M3FN = Mini<DType::Float8E4M3FN, uint8_t>;
using E4M3FNUZ = Mini<DType::Float8E4M3FNUZ, uint8_t>;
using E5M2 = Mini<DType::Float8E5M2, uint8_t>;
using E5M2FNUZ = Mini<DType::Float8E5M2FNUZ, uint8_t>;

template <class T>
struct is_mini : std::false_type {};
template <DType D, class Bits>
struct is_mini<Mini<D, Bits>> : std::true_type {};

using CastTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                           uint32_t, uint64_t, bool, Half, BF16, E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ>;

template <class T>
constexpr DType cast_dtype() {
  if constexpr (std::is_same_v<T, Half>)
    return DType::Float16;
  else if constexpr (is_mini<T>::value)
    return T::dtype;
  else
    return dtype_of<T>();
}

template <class... Ts, class Fn>
bool visit_cast_dtype(DType d, TypeList<Ts...>, Fn&& fn) {
  return ((d == cast_dtype<Ts>() ? (fn(Ts{}), true) : false) || ...);
}

template <class S, class D>
D convert(S v, bool saturate) {
  if constexpr (is_mini<S>::value) {  // every value is a float exactly
    return convert<float, D>(minifloat_to_float(*minifloat_format(S::dtype), v.bits), saturate);
  } else if constexpr (std::is_same_v<S, Half>) {
    return convert<float, D>(half_to_float(v.bits), saturate);
  } else if constexpr (is_mini<D>::value) {
    const bool sat = saturate && D::dtype != DType::BFloat16;
    return D{static_cast<decltype(D::bits)>(
        minifloat_from(*minifloat_format(D::dtype), static_cast<long double>(v), sat))};
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return float_to_int<D>(v);  // NaN and out-of-range values too
  } else {
    return static_cast<D>(v);
  }
}

template <class S, class D>
void convert_range(const S* src, D* dst, int64_t begin, int64_t end, bool saturate) {
  for (int64_t i = begin; i < end; ++i) dst[i] = convert<S, D>(src[i], saturate);
}

SupportFn cast_support(bool like) {
  return [like](const NodeSignature& sig) -> std::string {
    DType from = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
    DType to = like ? (sig.inputs.size() > 1 ? sig.inputs[1].dtype : DType::Undefined)
                    : static_cast<DType>(sig.node.attr_int("to", 0));
    for (DType d : {from, to}) {
      if (d == DType::Undefined || dtype_is_4bit(d)) continue;
      bool known = visit_cast_dtype(d, CastTypes{}, [](auto) {});
      if (!known)
        return std::string("the CPU Cast kernel does not support dtype ") + dtype_name(d) + " (" +
               std::to_string(static_cast<int>(d)) + ")";
    }
    return "";
  };
}

// Casts from or to int4/uint4. Each task writes whole bytes of a packed output, never half of
// one another task writes.
void cast_4bit(KernelContext& ctx, const Tensor& x, Tensor& y, bool saturate) {
  const bool from4 = dtype_is_4bit(x.dtype()), to4 = dtype_is_4bit(y.dtype());
  if (from4 && to4) {  // int4 <-> uint4: the same 4 bits
    if (x.nbytes()) std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
    return;
  }
  bool ok = false;
  if (from4) {
    const bool is_signed = x.dtype() == DType::Int4;
    const auto* src = x.data<uint8_t>();
    ok = visit_cast_dtype(y.dtype(), CastTypes{}, [&](auto dest) {
      using D = decltype(dest);
      D* dst = static_cast<D*>(y.raw_data());
      ctx.pool.parallel_for(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          dst[i] = convert<int32_t, D>(int4_get(src, i, is_signed), saturate);
      });
    });
  } else {
    auto* dst = y.data<uint8_t>();
    const int64_t n = x.numel();
    ok = visit_cast_dtype(x.dtype(), CastTypes{}, [&](auto from) {
      using S = decltype(from);
      const S* src = static_cast<const S*>(x.raw_data());
      const auto low4 = [&](int64_t i) {
        return i < n ? static_cast<uint8_t>(convert<S, int64_t>(src[i], saturate) & 0xF) : 0;
      };
      ctx.pool.parallel_for(static_cast<int64_t>(y.nbytes()), kElementwiseGrain,
                            [&](int64_t b, int64_t e) {
                              for (int64_t k = b; k < e; ++k)
                                dst[k] = static_cast<uint8_t>(low4(2 * k) | low4(2 * k + 1) << 4);
                            });
    });
  }
  if (!ok)
    ctx.node.fail(std::string("the CPU kernel cannot cast ") + dtype_name(x.dtype()) + " to " +
                  dtype_name(y.dtype()));
}

void cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType to = ctx.node.op_type == "CastLike" ? ctx.input(1).dtype()
                                                  : static_cast<DType>(ctx.node.attr_int("to", 0));
  if (x.dtype() == to) {  // a no-op cast: the output is the input
    ctx.set_output(0, x);
    return;
  }
  // saturate (Cast-19+, default 1) only matters for float8 targets; CastLike has it too.
  const bool saturate = ctx.node.attr_int("saturate", 1) != 0;
  Tensor& y = ctx.output(0);
  if (dtype_is_4bit(x.dtype()) || dtype_is_4bit(y.dtype())) return cast_4bit(ctx, x, y, saturate);
  // float16 <-> float32, the casts half models are full of: in bulk (F16C), same rounding.
  if ((x.dtype() == DType::Float16 && to == DType::Float32) ||
      (x.dtype() == DType::Float32 && to == DType::Float16)) {
    (to == DType::Float32 ? widen_half : narrow_half)(x, y, ctx.pool);
    return;
  }
  bool ok = visit_cast_dtype(x.dtype(), CastTypes{}, [&](auto from) {
    using S = decltype(from);
    return visit_cast_dtype(y.dtype(), CastTypes{}, [&](auto dest) {
      using D = decltype(dest);
      const S* src = static_cast<const S*>(x.raw_data());
      D* dst = static_cast<D*>(y.raw_data());
      ctx.pool.parallel_for(x.numel(), kElementwiseGrain,
                            [&](int64_t b, int64_t e) { convert_range(src, dst, b, e, saturate); });
    });
  });
  if (!ok)
    ctx.node.fail(std::string("the CPU kernel cannot cast ") + dtype_name(x.dtype()) + " to " +
                  dtype_name(y.dtype()));
}

}  // namespace

void register_cpu_elementwise_cast(KernelRegistry& r) {
  r.add("Cast", cast_support(false), cast_kernel);
  r.add("CastLike", cast_support(true), cast_kernel);
}

}  // namespace quilt::cpu
