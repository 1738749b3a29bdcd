// CPU kernels of the signal family that generate tensors from scalars: HannWindow,
// HammingWindow, BlackmanWindow and MelWeightMatrix. Values are computed in double and then
// converted to output_datatype the way numpy's astype does (truncation toward zero for ints).
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/signal_kernels.hpp"

namespace quilt::cpu {

namespace {

// Writes values (already in range for the output type) into out converted to its dtype.
void store(const KernelContext& ctx, Tensor& out, const std::vector<double>& values) {
  if (out.dtype() == DType::Float16) {
    Half* dst = static_cast<Half*>(out.raw_data());
    for (size_t i = 0; i < values.size(); ++i) dst[i] = from_double<Half>(values[i]);
    return;
  }
  const bool is_float = out.dtype() == DType::Float32 || out.dtype() == DType::Float64;
  if (!is_float)
    for (double v : values)
      if (!std::isfinite(v))
        ctx.node.fail(std::string("a value is ") + std::to_string(v) + ", which " +
                          dtype_name(out.dtype()) + " cannot hold",
                      ErrorCode::Runtime);
  visit_dtype(out.dtype(), NumericTypes{}, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.data<T>();
    for (size_t i = 0; i < values.size(); ++i) dst[i] = static_cast<T>(values[i]);
  });
}

// The cosine-sum windows a0 - a1 cos(x) + a2 cos(2x), x = 2 pi n / N, where N is size
// (periodic) or size - 1 (symmetric), as in the ONNX function bodies of these ops.
struct CosineWindow {
  double a0, a1, a2;
};

KernelFn window_kernel(CosineWindow c) {
  return [c](KernelContext& ctx) {
    const int64_t size = scalar_int(ctx, ctx.input(0), "size");
    const bool periodic = ctx.node.attr_int("periodic", 1) != 0;
    // A symmetric window of size 1 divides by zero: NaN, as the function body computes.
    const double period = static_cast<double>(periodic ? size : size - 1);
    std::vector<double> values(static_cast<size_t>(size));
    for (int64_t n = 0; n < size; ++n) {
      const double x = 2.0 * std::numbers::pi * static_cast<double>(n) / period;
      values[static_cast<size_t>(n)] = (-c.a1 * std::cos(x) + c.a2 * std::cos(2.0 * x)) + c.a0;
    }
    store(ctx, ctx.output(0), values);
  };
}

template <class F>
double float_scalar(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.node.fail(std::string(what) + " must hold one value", ErrorCode::Runtime);
  return static_cast<double>(t.data<F>()[0]);
}

// Python's float floor division (a // b), which the ONNX reference uses to pick the bins.
double floor_divide(double a, double b) {
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

// Triangular filters between mel-spaced bins, following the ONNX reference implementation:
// num_mel_bins + 2 edges over [lower, upper] on the mel scale (steps of 1/(num_mel_bins + 2)
// of the range), each edge mapped to spectrogram bin floor((dft_length + 1) * hz / sample_rate).
template <class F>
void mel_weight_matrix(KernelContext& ctx) {
  const int64_t mel_bins = scalar_int(ctx, ctx.input(0), "num_mel_bins");
  const int64_t dft_length = scalar_int(ctx, ctx.input(1), "dft_length");
  const int64_t sample_rate = scalar_int(ctx, ctx.input(2), "sample_rate");
  if (sample_rate < 1)
    ctx.node.fail("sample_rate is " + std::to_string(sample_rate) + ", expected >= 1",
                  ErrorCode::Runtime);
  // The reference computes the mel edges in the input's precision, then the bins in double.
  const F lower = static_cast<F>(float_scalar<F>(ctx, ctx.input(3), "lower_edge_hertz"));
  const F upper = static_cast<F>(float_scalar<F>(ctx, ctx.input(4), "upper_edge_hertz"));
  const F low_mel = F(2595) * std::log10(F(1) + lower / F(700));
  const F high_mel = F(2595) * std::log10(F(1) + upper / F(700));
  const F mel_step = (high_mel - low_mel) / static_cast<F>(mel_bins + 2);

  const int64_t spectrogram_bins = dft_length / 2 + 1;
  std::vector<int64_t> edges(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double mel =
        static_cast<double>(i) * static_cast<double>(mel_step) + static_cast<double>(low_mel);
    const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    const double bin =
        floor_divide(static_cast<double>(dft_length + 1) * hz, static_cast<double>(sample_rate));
    edges[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  std::vector<double> w(static_cast<size_t>(spectrogram_bins * mel_bins), 0.0);
  auto at = [&](int64_t bin, int64_t band) -> double& {
    if (bin < 0 || bin >= spectrogram_bins)
      ctx.node.fail("mel band " + std::to_string(band) + " reaches spectrogram bin " +
                        std::to_string(bin) + ", outside [0, " + std::to_string(spectrogram_bins) +
                        "): expected 0 <= lower_edge_hertz and upper_edge_hertz <= sample_rate / 2",
                    ErrorCode::Runtime);
    return w[static_cast<size_t>(bin * mel_bins + band)];
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = edges[static_cast<size_t>(i)];
    const int64_t center = edges[static_cast<size_t>(i + 1)];
    const int64_t right = edges[static_cast<size_t>(i + 2)];
    if (center == left) {
      at(center, i) = 1.0;
    } else {
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
    }
    if (right > center)
      for (int64_t j = center; j < right; ++j)
        at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  store(ctx, ctx.output(0), w);
}

std::string mel_support(const NodeSignature& sig) {
  for (size_t i = 3; i < 5 && i < sig.inputs.size(); ++i) {
    DType d = sig.inputs[i].dtype;
    if (d != DType::Undefined && d != DType::Float32 && d != DType::Float64)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(d) +
             "; the CPU kernel supports float32, float64 edge frequencies";
  }
  if (sig.inputs.size() == 5 && sig.inputs[3].dtype != DType::Undefined &&
      sig.inputs[4].dtype != DType::Undefined && sig.inputs[3].dtype != sig.inputs[4].dtype)
    return "lower_edge_hertz and upper_edge_hertz have different dtypes";
  return "";
}

}  // namespace

void register_cpu_signal_generators(KernelRegistry& r) {
  // Hamming's coefficients are 25/46 and 21/46 (the equiripple optimum), as in the spec's body.
  r.add("HannWindow", any_dtype(), window_kernel({0.5, 0.5, 0.0}));
  r.add("HammingWindow", any_dtype(), window_kernel({25.0 / 46.0, 1.0 - 25.0 / 46.0, 0.0}));
  r.add("BlackmanWindow", any_dtype(), window_kernel({0.42, 0.5, 0.08}));
  r.add("MelWeightMatrix", mel_support, [](KernelContext& ctx) {
    if (ctx.input(3).dtype() == DType::Float64)
      mel_weight_matrix<double>(ctx);
    else
      mel_weight_matrix<float>(ctx);
  });
}

}  // namespace quilt::cpu
