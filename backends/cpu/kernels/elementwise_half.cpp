// float16 for the float elementwise kernels: inputs are widened to float32, the float32 kernel
// runs, and float outputs are rounded back to float16 (round to nearest even). Computing in
// float32 and rounding once is at least as accurate as native float16 arithmetic.
#include <vector>

#include "backends/cpu/half_convert.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

// Declared where used (elementwise.cpp, elementwise_unary.cpp).
KernelFn via_float32(KernelFn fn, bool output_like_input);
SupportFn dtypes_or_float16(std::vector<DType> dtypes, size_t input = 0);

namespace {

Tensor widen(const Tensor& t, const ThreadPool& pool) {
  Tensor out(DType::Float32, t.shape());
  widen_half(t, out, pool);
  return out;
}

}  // namespace

KernelFn via_float32(KernelFn fn, bool output_like_input) {
  return [fn, output_like_input](KernelContext& ctx) {
    bool any_half = false;
    for (size_t i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.has_input(i) && ctx.input(i).dtype() == DType::Float16) any_half = true;
    if (!any_half) return fn(ctx);

    std::vector<Tensor> widened(ctx.num_inputs());
    std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& t = ctx.input(i);
      if (t.dtype() == DType::Float16) {
        widened[i] = widen(t, ctx.pool);
        inputs[i] = &widened[i];
      } else {
        inputs[i] = &t;
      }
    }
    // Elementwise ops have one output: of input 0's dtype (then float16 goes through float32),
    // or bool.
    const DType in0 = ctx.input(0).dtype();
    const bool narrow = output_like_input && in0 == DType::Float16;
    const DType inner_dtype = !output_like_input ? DType::Bool : narrow ? DType::Float32 : in0;
    std::vector<TypeShape> types = {{inner_dtype, true, ctx.output_shape(0)}};
    std::vector<Tensor> outputs(1);
    KernelContext inner(ctx.node, inputs, types, outputs, ctx.pool);
    fn(inner);
    if (narrow)
      narrow_half(outputs[0], ctx.output(0), ctx.pool);
    else
      ctx.set_output(0, outputs[0]);
  };
}

SupportFn dtypes_or_float16(std::vector<DType> dtypes, size_t input) {
  dtypes.push_back(DType::Float16);
  return dtypes_of_input(std::move(dtypes), input);
}

}  // namespace quilt::cpu
