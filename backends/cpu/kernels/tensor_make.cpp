// CPU kernels of the tensor family's generators: Constant, ConstantOfShape, Range, Trilu.
#include <algorithm>
#include <array>
#include <cstring>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/wrapping.hpp"
#include "core/float8.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_tensor_make(KernelRegistry& r);

namespace {

std::string constant_support(const NodeSignature& sig) {
  const Node& n = sig.node;
  if (n.has_attr("value_string") || n.has_attr("value_strings"))
    return "string constants are not supported";
  if (n.has_attr("sparse_value")) return "sparse_value constants are not supported";
  if (const Attribute* a = n.attr("value"); a && a->kind != Attribute::Kind::Tensor)
    return "attribute 'value' is not a tensor";
  return "";
}

void constant(KernelContext& ctx) {
  const Node& n = ctx.node;
  Tensor& out = ctx.output(0);
  if (const Tensor* t = n.attr_tensor("value")) {
    if (t->nbytes()) std::memcpy(out.raw_data(), t->raw_data(), t->nbytes());
  } else if (n.has_attr("value_float")) {
    out.data<float>()[0] = n.attr_float("value_float", 0);
  } else if (n.has_attr("value_int")) {
    out.data<int64_t>()[0] = n.attr_int("value_int", 0);
  } else if (n.has_attr("value_floats")) {
    const auto v = n.attr_floats("value_floats");
    std::copy(v.begin(), v.end(), out.data<float>());
  } else if (n.has_attr("value_ints")) {
    const auto v = n.attr_ints("value_ints");
    std::copy(v.begin(), v.end(), out.data<int64_t>());
  }
}

void constant_of_shape(KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  const Tensor* value = ctx.node.attr_tensor("value");
  if (!value) return;  // the default is float 0, and outputs start zero-filled
  const size_t es = dtype_size(out.dtype());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const auto* v = static_cast<const uint8_t*>(value->raw_data());
  bool zero = true;
  for (size_t b = 0; b < es; ++b) zero = zero && v[b] == 0;
  if (zero) return;
  ctx.pool.parallel_for(out.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::memcpy(dst + i * static_cast<int64_t>(es), v, es);
  });
}

template <class T>
void range_as(KernelContext& ctx) {
  const T start = ctx.input(0).data<T>()[0], delta = ctx.input(2).data<T>()[0];
  Tensor& out = ctx.output(0);
  T* o = out.data<T>();
  if constexpr (std::is_integral_v<T>) {
    // Every value lies between start and limit, but i * delta alone may not fit T (start
    // -2^63, delta 2^62): wrapping arithmetic ends at the exact value instead of overflowing.
    for (int64_t i = 0; i < out.numel(); ++i)
      o[i] = wrapping_add(start, wrapping_mul(static_cast<T>(i), delta));
  } else {
    for (int64_t i = 0; i < out.numel(); ++i)
      o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  }
}

void range(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float32:
      return range_as<float>(ctx);
    case DType::Float64:
      return range_as<double>(ctx);
    case DType::Float16: {
      const float start = half_to_float(ctx.input(0).data<uint16_t>()[0]);
      const float delta = half_to_float(ctx.input(2).data<uint16_t>()[0]);
      Tensor& out = ctx.output(0);
      uint16_t* o = out.data<uint16_t>();
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = float_to_half(start + static_cast<float>(i) * delta);
      return;
    }
    case DType::BFloat16: {
      // As onnx's reference: start + i * delta in double, rounded once to bfloat16. With
      // stash_type the reference computes in that type instead: not implemented.
      if (ctx.node.has_attr("stash_type"))
        ctx.node.fail("Range of bfloat16 with stash_type is not supported",
                      ErrorCode::NotImplemented);
      const double start = bfloat16_to_float(ctx.input(0).data<uint16_t>()[0]);
      const double delta = bfloat16_to_float(ctx.input(2).data<uint16_t>()[0]);
      Tensor& out = ctx.output(0);
      uint16_t* o = out.data<uint16_t>();
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = static_cast<uint16_t>(
            minifloat_from(kBFloat16, start + static_cast<double>(i) * delta, false));
      return;
    }
    case DType::Int16:
      return range_as<int16_t>(ctx);
    case DType::Int32:
      return range_as<int32_t>(ctx);
    default:
      return range_as<int64_t>(ctx);
  }
}

void trilu(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t k = 0;
  if (const Tensor* kt = ctx.optional_input(1)) {
    if (kt->numel() != 1) ctx.node.fail("k must have exactly one element");
    k = kt->data<int64_t>()[0];
    // At -rows or cols every row keeps all or nothing already; clamping there avoids overflow
    // in i + k (and in the bounds: rows + 1 overflowed for a declared 2^63 - 1 dim of an empty
    // input, fuzz_run, UBSan).
    k = std::clamp<int64_t>(k, -in.dim(in.rank() - 2), in.dim(in.rank() - 1));
  }
  const bool upper = ctx.node.attr_int("upper", 1) != 0;
  const int64_t rows = in.dim(in.rank() - 2), cols = in.dim(in.rank() - 1);
  const int64_t es = static_cast<int64_t>(dtype_size(in.dtype()));
  const int64_t matrices = rows > 0 && cols > 0 ? in.numel() / (rows * cols) : 0;
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  // Row i keeps columns j with j - i >= k (upper) or j - i <= k (lower); the rest stay zero.
  ctx.pool.parallel_for(matrices * rows, std::max<int64_t>(1, 16384 / (cols * es + 1)),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t r = begin; r < end; ++r) {
                            const int64_t i = r % rows;
                            int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
                            int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
                            if (hi > lo)
                              std::memcpy(dst + (r * cols + lo) * es, src + (r * cols + lo) * es,
                                          static_cast<size_t>((hi - lo) * es));
                          }
                        });
}

}  // namespace

void register_cpu_tensor_make(KernelRegistry& r) {
  r.add("Constant", constant_support, KernelFn(constant));
  r.add("ConstantOfShape", dtypes_of_input({DType::Int64}), KernelFn(constant_of_shape));
  r.add("Range",
        dtypes_of_input({DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                         DType::Int16, DType::Int32, DType::Int64}),
        KernelFn(range));
  r.add("Trilu", any_dtype(), KernelFn(trilu));
}

}  // namespace quilt::cpu
