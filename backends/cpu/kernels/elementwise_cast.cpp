// CPU kernels of Cast and CastLike: every pair among float32/64, float16, bfloat16, the five
// float8 types (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1, int2..int64, uint2..uint64
// and bool.
//
// Float to integer truncates toward zero (C conversion); anything to bool is "!= 0"; float16
// goes through float32 (exact for every float16 value, and one rounding on the way in).
// bfloat16, float8 and float4e2m1 values are read exactly and written with one rounding to
// nearest even from the exact source value (core/float8.hpp); the `saturate` attribute (Cast-19+,
// default 1) applies to float8 targets; float4e2m1 always saturates (it has no inf). float8e8m0
// targets take the source rounded to float32, then its exponent rounded by the `round_mode`
// attribute (Cast-24+, default "up") and `saturate`, as onnx's reference does. The packed integer
// types (int4/uint4/int2/uint2, core/int4.hpp) read as their integer value; a cast to them
// converts to a 64-bit integer first (floats truncate) and keeps its low 4 or 2 bits, wrapping
// like every other integer narrowing (onnx's reference: ml_dtypes' astype).
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

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

// float8e8m0 bits (its own conversions: no sign, no mantissa, a rounding mode).
struct E8M0 {
  uint8_t bits;
};

template <class T>
struct is_mini : std::false_type {};
template <DType D, class Bits>
struct is_mini<Mini<D, Bits>> : std::true_type {};

using CastTypes =
    TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
             uint64_t, bool, Half, BF16, E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0>;

// What a cast does besides the types: saturate and round_mode.
struct CastMode {
  bool saturate = true;
  E8M0Round round = E8M0Round::Up;
};

template <class T>
constexpr DType cast_dtype() {
  if constexpr (std::is_same_v<T, Half>)
    return DType::Float16;
  else if constexpr (std::is_same_v<T, E8M0>)
    return DType::Float8E8M0;
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
D convert(S v, CastMode mode) {
  if constexpr (std::is_same_v<S, E8M0>) {  // every value is a float exactly
    return convert<float, D>(e8m0_to_float(v.bits), mode);
  } else if constexpr (std::is_same_v<D, E8M0>) {
    return E8M0{e8m0_from_float(convert<S, float>(v, mode), mode.saturate, mode.round)};
  } else if constexpr (is_mini<S>::value) {  // every value is a float exactly
    return convert<float, D>(minifloat_to_float(*minifloat_format(S::dtype), v.bits), mode);
  } else if constexpr (std::is_same_v<S, Half>) {
    return convert<float, D>(half_to_float(v.bits), mode);
  } else if constexpr (is_mini<D>::value) {
    const bool sat = mode.saturate && D::dtype != DType::BFloat16;
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
void convert_range(const S* src, D* dst, int64_t begin, int64_t end, CastMode mode) {
  for (int64_t i = begin; i < end; ++i) dst[i] = convert<S, D>(src[i], mode);
}

SupportFn cast_support(bool like) {
  return [like](const NodeSignature& sig) -> std::string {
    DType from = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
    DType to = like ? (sig.inputs.size() > 1 ? sig.inputs[1].dtype : DType::Undefined)
                    : static_cast<DType>(sig.node.attr_int("to", 0));
    for (DType d : {from, to}) {
      if (d == DType::Undefined || dtype_is_packed(d)) continue;
      bool known = visit_cast_dtype(d, CastTypes{}, [](auto) {});
      if (!known)
        return std::string("the CPU Cast kernel does not support dtype ") + dtype_name(d) + " (" +
               std::to_string(static_cast<int>(d)) + ")";
    }
    return "";
  };
}

// x cast to y, neither packed; false when a dtype has no conversion here.
bool cast_dense(KernelContext& ctx, const Tensor& x, Tensor& y, CastMode mode) {
  return visit_cast_dtype(x.dtype(), CastTypes{}, [&](auto from) {
    using S = decltype(from);
    return visit_cast_dtype(y.dtype(), CastTypes{}, [&](auto dest) {
      using D = decltype(dest);
      const S* src = static_cast<const S*>(x.raw_data());
      D* dst = static_cast<D*>(y.raw_data());
      ctx.pool.parallel_for(x.numel(), kElementwiseGrain,
                            [&](int64_t b, int64_t e) { convert_range(src, dst, b, e, mode); });
    });
  });
}

// A packed tensor's elements, one a byte: int8 (int4, int2), uint8 (uint4, uint2) or float32
// (float4e2m1, every value exact).
Tensor unpack(const Tensor& x, const ThreadPool& pool) {
  const DType d = x.dtype();
  const bool is_float = d == DType::Float4E2M1;
  const bool is_signed = d == DType::Int4 || d == DType::Int2;
  Tensor u = Tensor::uninitialized(
      is_float ? DType::Float32 : (is_signed ? DType::Int8 : DType::UInt8), x.shape());
  const auto* src = x.data<uint8_t>();
  pool.parallel_for(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (is_float)
        u.data<float>()[i] = minifloat_to_float(kE2M1, packed_code(src, i, 4));
      else if (is_signed)
        u.data<int8_t>()[i] = static_cast<int8_t>(packed_int_get(src, i, d));
      else
        u.data<uint8_t>()[i] = static_cast<uint8_t>(packed_int_get(src, i, d));
    }
  });
  return u;
}

// Casts from or to the packed types (int4, uint4, float4e2m1, int2, uint2): a packed source is
// unpacked first; a packed target's codes are computed one a byte, then packed, each task
// writing whole bytes.
void cast_packed(KernelContext& ctx, const Tensor& x, Tensor& y, CastMode mode) {
  const DType to = y.dtype();
  const int to_bits = dtype_packed_bits(to);
  if (dtype_is_packed_int(x.dtype()) && dtype_is_packed_int(to) &&
      dtype_packed_bits(x.dtype()) == to_bits) {  // int4 <-> uint4, int2 <-> uint2: same bits
    if (x.nbytes()) std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
    return;
  }
  const Tensor src = dtype_is_packed(x.dtype()) ? unpack(x, ctx.pool) : x;
  bool ok = false;
  if (!to_bits) {
    ok = cast_dense(ctx, src, y, mode);
  } else {
    const int64_t n = src.numel();
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    const uint32_t mask = (1u << to_bits) - 1;
    ok = visit_cast_dtype(src.dtype(), CastTypes{}, [&](auto from) {
      using S = decltype(from);
      const S* s = static_cast<const S*>(src.raw_data());
      ctx.pool.parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          codes[static_cast<size_t>(i)] = static_cast<uint8_t>(
              to == DType::Float4E2M1
                  ? minifloat_from(kE2M1, convert<S, double>(s[i], mode), true)
                  : static_cast<uint32_t>(convert<S, int64_t>(s[i], mode)) & mask);
      });
    });
    ctx.pool.parallel_for(static_cast<int64_t>(y.nbytes()), kElementwiseGrain,
                          [&](int64_t b, int64_t e) {
                            pack_codes(codes.data(), n, to_bits, y.data<uint8_t>(), b, e);
                          });
  }
  if (!ok)
    ctx.node.fail(std::string("the CPU kernel cannot cast ") + dtype_name(x.dtype()) + " to " +
                  dtype_name(to));
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
  // round_mode (Cast-24+, default "up", checked at load) only for float8e8m0 targets.
  CastMode mode;
  mode.saturate = ctx.node.attr_int("saturate", 1) != 0;
  const std::string round = ctx.node.attr_string("round_mode", "up");
  mode.round = round == "down"      ? E8M0Round::Down
               : round == "nearest" ? E8M0Round::Nearest
                                    : E8M0Round::Up;
  Tensor& y = ctx.output(0);
  if (dtype_is_packed(x.dtype()) || dtype_is_packed(y.dtype())) return cast_packed(ctx, x, y, mode);
  // float16 <-> float32, the casts half models are full of: in bulk (F16C), same rounding.
  if ((x.dtype() == DType::Float16 && to == DType::Float32) ||
      (x.dtype() == DType::Float32 && to == DType::Float16)) {
    (to == DType::Float32 ? widen_half : narrow_half)(x, y, ctx.pool);
    return;
  }
  if (!cast_dense(ctx, x, y, mode))
    ctx.node.fail(std::string("the CPU kernel cannot cast ") + dtype_name(x.dtype()) + " to " +
                  dtype_name(y.dtype()));
}

}  // namespace

void register_cpu_elementwise_cast(KernelRegistry& r) {
  r.add("Cast", cast_support(false), cast_kernel);
  r.add("CastLike", cast_support(true), cast_kernel);
}

}  // namespace quilt::cpu
