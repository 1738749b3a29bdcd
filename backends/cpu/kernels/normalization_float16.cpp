// float16 for the normalization and reduce kernels: widen the float16 inputs to float32, run the
// float32 kernel, round each float16 output once. The statistics these ops compute (sums,
// variances, exps) would lose too much precision in float16 anyway.
#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void run_in_float32(KernelContext& ctx, const KernelFn& fn);

void run_in_float32(KernelContext& ctx, const KernelFn& fn) {
  const size_t n_in = ctx.num_inputs(), n_out = ctx.num_outputs();
  std::vector<Tensor> widened(n_in);
  std::vector<const Tensor*> inputs(n_in, nullptr);
  for (size_t i = 0; i < n_in; ++i) {
    const Tensor* t = ctx.optional_input(i);
    if (t && t->dtype() == DType::Float16) {
      widened[i] = Tensor(DType::Float32, t->shape());
      const uint16_t* src = t->data<uint16_t>();
      float* dst = widened[i].data<float>();
      for (int64_t k = 0; k < t->numel(); ++k) dst[k] = half_to_float(src[k]);
      t = &widened[i];
    }
    inputs[i] = t;
  }
  // Outputs keep their inferred shapes; float16 ones are computed as float32.
  std::vector<TypeShape> types(n_out);
  for (size_t i = 0; i < n_out; ++i) {
    if (!ctx.wants_output(i)) continue;
    const Tensor& out = ctx.output(i);
    types[i] = {out.dtype() == DType::Float16 ? DType::Float32 : out.dtype(), true, out.shape()};
  }
  std::vector<Tensor> outputs(n_out);
  KernelContext inner(ctx.node, inputs, types, outputs, ctx.pool);
  fn(inner);
  for (size_t i = 0; i < n_out; ++i) {
    if (!ctx.wants_output(i) || !outputs[i].defined()) continue;
    Tensor& out = ctx.output(i);
    if (out.dtype() != DType::Float16) {
      ctx.set_output(i, outputs[i]);
      continue;
    }
    const float* src = outputs[i].data<float>();
    uint16_t* dst = out.data<uint16_t>();
    for (int64_t k = 0; k < out.numel(); ++k) dst[k] = float_to_half(src[k]);
  }
}

}  // namespace quilt::cpu
