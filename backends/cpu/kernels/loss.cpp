// CPU kernels of the loss op family: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss here
// (float32, float64; float16 through float32), Hardmax/LRN/CumProd in loss_axis.cpp and
// EyeLike/ReverseSequence/Compress in loss_copy.cpp.
//
// Both losses view the scores as [N, C, D] (D = product of the trailing dims) and the targets
// as [N, D]. Per-element losses are computed in the input's precision, like the spec's
// reference, and reductions are summed in double so that the result does not depend on how
// the work was split across threads.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_loss_axis(KernelRegistry& r);               // loss_axis.cpp
void register_cpu_loss_copy(KernelRegistry& r);               // loss_copy.cpp
void run_in_float32(KernelContext& ctx, const KernelFn& fn);  // normalization_float16.cpp

namespace {

struct LossShape {
  int64_t n = 1, c = 1, d = 1;
};

LossShape loss_shape(const Tensor& x) {
  LossShape s{x.dim(0), x.dim(1), 1};
  for (int64_t i = 2; i < x.rank(); ++i) s.d *= x.dim(i);
  return s;
}

// y[n, :, d] = log_softmax(x[n, :, d]) over the class dim, whose stride is D. Works on blocks
// of consecutive d so every inner loop reads memory in order.
template <class T>
void log_softmax_classes(const ThreadPool& pool, const T* x, T* y, const LossShape& s) {
  if (s.c == 0) return;
  const int64_t block = std::clamp<int64_t>(s.d, 1, 256);
  const int64_t blocks = (s.d + block - 1) / block;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s.c * block));
  pool.parallel_for(s.n * blocks, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> mx(static_cast<size_t>(block)), sum(static_cast<size_t>(block));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / blocks, d0 = (task % blocks) * block;
      const int64_t len = std::min(block, s.d - d0);
      const T* xs = x + n * s.c * s.d + d0;
      T* ys = y + n * s.c * s.d + d0;
      for (int64_t i = 0; i < len; ++i) mx[i] = xs[i];
      for (int64_t c = 1; c < s.c; ++c)
        for (int64_t i = 0; i < len; ++i) mx[i] = std::max<double>(mx[i], xs[c * s.d + i]);
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t i = 0; i < len; ++i) sum[i] += std::exp(xs[c * s.d + i] - mx[i]);
      for (int64_t i = 0; i < len; ++i) sum[i] = mx[i] + std::log(sum[i]);
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t i = 0; i < len; ++i)
          ys[c * s.d + i] = static_cast<T>(xs[c * s.d + i] - sum[i]);
    }
  });
}

// Negative log-likelihood of log-probabilities `lp` ([N, C, D]) at the targets, weighted, and
// reduced as the node says into output 0.
template <class T, class TI>
void nll_from_log_prob(KernelContext& ctx, const T* lp, const LossShape& s) {
  const Tensor& target = ctx.input(1);
  const Tensor* weight = ctx.optional_input(2);
  const std::string reduction = ctx.node.attr_string("reduction", "mean");
  const bool has_ignore = ctx.node.has_attr("ignore_index");
  const int64_t ignore = ctx.node.attr_int("ignore_index", 0);
  const TI* t = target.data<TI>();
  const T* w = weight ? weight->data<T>() : nullptr;
  const int64_t count = s.n * s.d;
  if (target.numel() != count)
    ctx.node.fail("target has shape " + to_string(target.shape()) + ", expected " +
                      std::to_string(s.n) + " x " + std::to_string(s.d) + " elements",
                  ErrorCode::InvalidArgument);
  if (w && weight->numel() != s.c)
    ctx.node.fail("weight has " + std::to_string(weight->numel()) +
                      " elements, expected C = " + std::to_string(s.c),
                  ErrorCode::InvalidArgument);
  // Checked up front so the parallel loop below cannot fail half-way.
  for (int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<int64_t>(t[i]);
    if (has_ignore && v == ignore) continue;
    if (v < 0 || v >= s.c)
      ctx.node.fail("target value " + std::to_string(v) + " is out of range [0, " +
                        std::to_string(s.c) + ")" +
                        (has_ignore ? " and is not ignore_index " + std::to_string(ignore) : ""),
                    ErrorCode::InvalidArgument);
  }
  // Each element's loss and its weight (0 when ignored).
  const bool none = reduction == "none";
  std::vector<T> scratch(none ? 0 : static_cast<size_t>(count));
  T* loss = none ? ctx.output(0).data<T>() : scratch.data();
  ctx.pool.parallel_for(count, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto v = static_cast<int64_t>(t[i]);
      if (has_ignore && v == ignore) {
        loss[i] = T(0);
        continue;
      }
      const int64_t n = i / s.d, d = i % s.d;
      const T l = -lp[(n * s.c + v) * s.d + d];
      loss[i] = w ? static_cast<T>(l * w[v]) : l;
    }
  });
  if (none) return;
  double total = 0, total_weight = 0;
  for (int64_t i = 0; i < count; ++i) {
    total += static_cast<double>(loss[i]);
    const auto v = static_cast<int64_t>(t[i]);
    if (!(has_ignore && v == ignore)) total_weight += w ? static_cast<double>(w[v]) : 1.0;
  }
  // An all-ignored mean is 0 / 0 = NaN, as in onnxruntime and the reference.
  ctx.output(0).data<T>()[0] = static_cast<T>(reduction == "sum" ? total : total / total_weight);
}

template <class T, class TI, bool Softmax>
void loss_typed(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const LossShape s = loss_shape(x);
  if (!Softmax) return nll_from_log_prob<T, TI>(ctx, x.data<T>(), s);
  // The log-probabilities go straight into output 1 when it is wanted.
  Tensor log_prob = ctx.wants_output(1) ? ctx.output(1) : Tensor(x.dtype(), x.shape());
  log_softmax_classes(ctx.pool, x.data<T>(), log_prob.data<T>(), s);
  nll_from_log_prob<T, TI>(ctx, log_prob.data<T>(), s);
}

template <bool Softmax>
void run_loss(KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype();
  if (dtype == DType::Float16) {
    return run_in_float32(ctx, run_loss<Softmax>);
  }
  const DType target = ctx.input(1).dtype();
  const Tensor* weight = ctx.optional_input(2);
  if ((dtype != DType::Float32 && dtype != DType::Float64) ||
      (target != DType::Int32 && target != DType::Int64) || (weight && weight->dtype() != dtype))
    ctx.node.fail(std::string("unsupported dtypes: input ") + dtype_name(dtype) + ", target " +
                  dtype_name(target) +
                  (weight ? std::string(", weight ") + dtype_name(weight->dtype()) : "") +
                  "; expected float32/float64/float16 input and weight, int32/int64 target");
  const bool i64 = target == DType::Int64;
  if (dtype == DType::Float32)
    return i64 ? loss_typed<float, int64_t, Softmax>(ctx)
               : loss_typed<float, int32_t, Softmax>(ctx);
  return i64 ? loss_typed<double, int64_t, Softmax>(ctx)
             : loss_typed<double, int32_t, Softmax>(ctx);
}

std::string loss_support(const NodeSignature& sig) {
  // Undefined: not known before run time (the kernel checks again then).
  const DType x = sig.inputs[0].dtype;
  if (x != DType::Undefined && x != DType::Float32 && x != DType::Float64 && x != DType::Float16)
    return std::string("input 0 is ") + dtype_name(x) +
           "; the CPU kernel supports float32, float64, float16";
  const DType t = sig.inputs[1].dtype;
  if (t != DType::Undefined && t != DType::Int32 && t != DType::Int64)
    return std::string("target is ") + dtype_name(t) + "; the CPU kernel supports int32, int64";
  if (sig.inputs.size() > 2 && sig.node.has_input(2) && x != DType::Undefined &&
      sig.inputs[2].dtype != DType::Undefined && sig.inputs[2].dtype != x)
    return std::string("weight is ") + dtype_name(sig.inputs[2].dtype) + " but input 0 is " +
           dtype_name(x);
  const std::string reduction = sig.node.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return "reduction '" + reduction + "' is not one of none, sum, mean";
  return "";
}

}  // namespace

void register_cpu_loss(KernelRegistry& r) {
  r.add("SoftmaxCrossEntropyLoss", loss_support, run_loss<true>);
  r.add("NegativeLogLikelihoodLoss", loss_support, run_loss<false>);
  register_cpu_loss_axis(r);
  register_cpu_loss_copy(r);
}

}  // namespace quilt::cpu
