// CPU kernels of the signal op family: DFT and STFT here, the generators (windows,
// MelWeightMatrix) in signal_generators.cpp.
//
// Every line (one signal along the transformed axis) is gathered into a double-precision complex
// buffer, zero-padded or truncated to the DFT length, transformed with an FftPlan and scattered
// back; lines are spread over the thread pool.
#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/signal_fft.hpp"
#include "backends/cpu/kernels/signal_kernels.hpp"

namespace quilt::cpu {

namespace {

// Work per parallel chunk, in complex values transformed.
constexpr int64_t kLineGrainValues = 1 << 14;

int64_t line_grain(int64_t n) {
  return std::max<int64_t>(1, kLineGrainValues / std::max<int64_t>(n, 1));
}

struct DftParams {
  int64_t axis = 0;
  int64_t n = 0;  // DFT length
  bool inverse = false;
  bool onesided = false;
};

// The same values infer_dft derived (core/ops/signal.cpp), now that every input is known.
DftParams dft_params(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  DftParams p;
  p.inverse = ctx.node.attr_int("inverse", 0) != 0;
  p.onesided = ctx.node.attr_int("onesided", 0) != 0;
  if (ctx.node.opset < 20)
    p.axis = ctx.node.attr_int("axis", 1);
  else
    p.axis = ctx.has_input(2) ? scalar_int(ctx, ctx.input(2), "axis") : -2;
  if (p.axis < 0) p.axis += rank;
  if (ctx.has_input(1)) {
    p.n = scalar_int(ctx, ctx.input(1), "dft_length");
  } else {
    const int64_t dim = x.dim(p.axis);
    p.n = p.inverse && p.onesided ? 2 * (dim - 1) : dim;
  }
  return p;
}

template <class T>
void run_dft(KernelContext& ctx, const DftParams& p, const FftPlan& plan) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const auto& shape = x.shape();
  const size_t axis = static_cast<size_t>(p.axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d + 1 < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[axis], in_c = shape.back();
  const int64_t out_len = y.dim(p.axis), out_c = y.shape().back();
  const bool irfft = p.inverse && p.onesided;
  const int64_t n = p.n;
  const T* in = static_cast<const T*>(x.raw_data());
  T* out = static_cast<T*>(y.raw_data());
  const double scale = p.inverse ? 1.0 / static_cast<double>(n) : 1.0;

  ctx.pool.parallel_for(outer * inner, line_grain(n), [&](int64_t begin, int64_t end) {
    FftArray<Complex> line(n), scratch;
    for (int64_t l = begin; l < end; ++l) {
      const int64_t o = l / inner, i = l % inner;
      const T* src = in + (o * len * inner + i) * in_c;
      auto load = [&](int64_t t) {
        const T* e = src + t * inner * in_c;
        return Complex(to_double(e[0]), in_c == 2 ? to_double(e[1]) : 0.0);
      };
      if (irfft) {
        // Rebuild the full spectrum from its first n/2 + 1 values by conjugate symmetry.
        const int64_t known = std::min(len, n / 2 + 1);
        for (int64_t k = 0; k < n; ++k) {
          const int64_t from = k <= n / 2 ? k : n - k;
          Complex v = from < known ? load(from) : Complex();
          line[static_cast<size_t>(k)] = k <= n / 2 ? v : std::conj(v);
        }
      } else {
        for (int64_t t = 0; t < n; ++t)
          line[static_cast<size_t>(t)] = t < len ? load(t) : Complex();
      }
      plan.run(line.data(), p.inverse, scratch);
      T* dst = out + (o * out_len * inner + i) * out_c;
      for (int64_t k = 0; k < out_len; ++k) {
        T* e = dst + k * inner * out_c;
        const Complex v = line[static_cast<size_t>(k)] * scale;
        e[0] = from_double<T>(v.real());
        if (out_c == 2) e[1] = from_double<T>(v.imag());
      }
    }
  });
}

class DftKernel : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    const DftParams p = dft_params(ctx);
    // The output first: its size is checked against memory before the plan's tables (a few
    // times its size) are made, and an empty one needs no plan. fuzz_run's x [2, 2^31 - 1, 0, 1]
    // (no elements) asked for a 2^31-point plan, 32 GiB.
    if (ctx.output(0).numel() == 0 || ctx.input(0).numel() == 0) return;
    const auto plan = plans_.get(p.n);
    visit_float(ctx.input(0).dtype(), [&](auto tag) { run_dft<decltype(tag)>(ctx, p, *plan); });
  }

 private:
  FftPlanCache plans_;
};

template <class T>
void run_stft(KernelContext& ctx, const FftPlanCache& plans) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t step = scalar_int(ctx, ctx.input(1), "frame_step");
  const Tensor* window = ctx.optional_input(2);
  const int64_t signal_length = x.dim(1), in_c = x.dim(2);
  int64_t frame_length = signal_length;
  if (ctx.has_input(3))
    frame_length = scalar_int(ctx, ctx.input(3), "frame_length");
  else if (window)
    frame_length = window->dim(0);
  const int64_t frames = y.dim(1), bins = y.dim(2);
  const T* in = static_cast<const T*>(x.raw_data());
  const T* w = window ? static_cast<const T*>(window->raw_data()) : nullptr;
  T* out = static_cast<T*>(y.raw_data());
  if (y.numel() == 0 || x.numel() == 0) return;  // as DftKernel: no plan for nothing
  const auto plan_ptr = plans.get(frame_length);
  const FftPlan& plan = *plan_ptr;

  ctx.pool.parallel_for(
      x.dim(0) * frames, line_grain(frame_length), [&](int64_t begin, int64_t end) {
        FftArray<Complex> line(frame_length), scratch;
        for (int64_t l = begin; l < end; ++l) {
          const int64_t b = l / frames, f = l % frames;
          const T* src = in + (b * signal_length + f * step) * in_c;
          for (int64_t t = 0; t < frame_length; ++t) {
            const double weight = w ? to_double(w[t]) : 1.0;
            const T* e = src + t * in_c;
            line[static_cast<size_t>(t)] =
                Complex(to_double(e[0]) * weight, in_c == 2 ? to_double(e[1]) * weight : 0.0);
          }
          plan.run(line.data(), false, scratch);
          T* dst = out + l * bins * 2;
          for (int64_t k = 0; k < bins; ++k) {
            dst[2 * k] = from_double<T>(line[static_cast<size_t>(k)].real());
            dst[2 * k + 1] = from_double<T>(line[static_cast<size_t>(k)].imag());
          }
        }
      });
}

class StftKernel : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    visit_float(ctx.input(0).dtype(), [&](auto tag) { run_stft<decltype(tag)>(ctx, plans_); });
  }

 private:
  FftPlanCache plans_;
};

template <class K>
KernelFactory make() {
  return [](const NodeSignature&) -> std::unique_ptr<Kernel> { return std::make_unique<K>(); };
}

}  // namespace

void register_cpu_signal(KernelRegistry& r) {
  const std::vector<DType> floats = {DType::Float32, DType::Float64, DType::Float16};
  r.add("DFT", dtypes_of_input(floats), make<DftKernel>());
  r.add("STFT", dtypes_of_input(floats), make<StftKernel>());
  register_cpu_signal_generators(r);
}

}  // namespace quilt::cpu
