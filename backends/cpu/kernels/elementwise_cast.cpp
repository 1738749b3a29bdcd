// CPU kernels of Cast and CastLike: every pair among float32/64, float16, int8..int64,
// uint8..uint64 and bool.
//
// Float to integer truncates toward zero (C conversion); anything to bool is "!= 0"; float16
// goes through float32 (exact for every float16 value, and one rounding on the way in).
#include <type_traits>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "core/half.hpp"

namespace quilt::cpu {
namespace {

// Stands for float16 in the dispatch below (its storage type uint16_t is taken by uint16).
struct Half {
  uint16_t bits;
};

using CastTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                           uint32_t, uint64_t, bool, Half>;

template <class T>
constexpr DType cast_dtype() {
  if constexpr (std::is_same_v<T, Half>)
    return DType::Float16;
  else
    return dtype_of<T>();
}

template <class... Ts, class Fn>
bool visit_cast_dtype(DType d, TypeList<Ts...>, Fn&& fn) {
  return ((d == cast_dtype<Ts>() ? (fn(Ts{}), true) : false) || ...);
}

template <class S, class D>
D convert(S v) {
  if constexpr (std::is_same_v<S, Half>) {
    return convert<float, D>(half_to_float(v.bits));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else {
    return static_cast<D>(v);
  }
}

template <class S, class D>
void convert_range(const S* src, D* dst, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dst[i] = convert<S, D>(src[i]);
}

SupportFn cast_support(bool like) {
  return [like](const NodeSignature& sig) -> std::string {
    DType from = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
    DType to = like ? (sig.inputs.size() > 1 ? sig.inputs[1].dtype : DType::Undefined)
                    : static_cast<DType>(sig.node.attr_int("to", 0));
    for (DType d : {from, to}) {
      if (d == DType::Undefined) continue;
      bool known = visit_cast_dtype(d, CastTypes{}, [](auto) {});
      if (!known)
        return std::string("the CPU Cast kernel does not support dtype ") + dtype_name(d) + " (" +
               std::to_string(static_cast<int>(d)) + ")";
    }
    return "";
  };
}

void cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType to = ctx.node.op_type == "CastLike" ? ctx.input(1).dtype()
                                                  : static_cast<DType>(ctx.node.attr_int("to", 0));
  if (x.dtype() == to) {  // a no-op cast: the output is the input
    ctx.set_output(0, x);
    return;
  }
  Tensor& y = ctx.output(0);
  bool ok = visit_cast_dtype(x.dtype(), CastTypes{}, [&](auto from) {
    using S = decltype(from);
    return visit_cast_dtype(y.dtype(), CastTypes{}, [&](auto dest) {
      using D = decltype(dest);
      const S* src = static_cast<const S*>(x.raw_data());
      D* dst = static_cast<D*>(y.raw_data());
      ctx.pool.parallel_for(x.numel(), kElementwiseGrain,
                            [&](int64_t b, int64_t e) { convert_range(src, dst, b, e); });
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
