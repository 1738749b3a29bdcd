// CPU kernels of the normalization op family: BatchNormalization (inference, and training_mode
// at opset 14+: the batch's statistics, and the running ones updated by momentum),
// InstanceNormalization, GroupNormalization, LayerNormalization, LpNormalization,
// MeanVarianceNormalization here; Softmax and LogSoftmax in normalization_softmax.cpp. float32, and
// float16 through float32 (normalization_float16.cpp).
//
// Statistics are summed in short float lanes and across chunks in double, and variances are taken
// around the mean (two passes), so long rows and badly centred inputs keep float32 accuracy.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_softmax(KernelRegistry& r);                 // normalization_softmax.cpp
void run_in_float32(KernelContext& ctx, const KernelFn& fn);  // normalization_float16.cpp

namespace {

// Grain for a parallel loop whose items each touch `per_item` elements.
int64_t grain_for(int64_t per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, per_item));
}

std::string all_inputs_float(const NodeSignature& sig) {
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    DType d = sig.inputs[i].dtype;
    if (sig.node.has_input(i) && d != DType::Undefined && d != DType::Float32 &&
        d != DType::Float16)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(d) +
             "; the CPU kernel supports float32 and float16";
  }
  return "";
}

// The float32 kernel `fn`, also taking float16 inputs (computed in float32, rounded once).
KernelFn with_float16(void (*fn)(KernelContext&)) {
  return [fn](KernelContext& ctx) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.has_input(i) && ctx.input(i).dtype() == DType::Float16)
        return run_in_float32(ctx, fn);
    fn(ctx);
  };
}

// Sum of f(x) over n floats: 16 float lanes over chunks of 1024 (each lane adds only 64 values
// in float), chunk totals in double. Vectorises, and stays close to a double sum.
template <class F>
double sum_lanes(const float* x, int64_t n, F f) {
  constexpr int kLanes = 16;
  constexpr int64_t kChunk = 1024;
  double total = 0;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t m = std::min(kChunk, n - c);
    const float* p = x + c;
    float lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += f(p[i + j]);
    double chunk = 0;
    for (; i < m; ++i) chunk += f(p[i]);
    for (float l : lanes) chunk += l;
    total += chunk;
  }
  return total;
}

// Mean and 1/sqrt(var + eps) of n floats; the variance is taken around the mean (two passes),
// which stays accurate for inputs far from zero.
std::pair<double, double> moments(const float* x, int64_t n, double epsilon) {
  if (n == 0) return {0.0, 1.0 / std::sqrt(epsilon)};
  const double mean = sum_lanes(x, n, [](float v) { return v; }) / static_cast<double>(n);
  const auto m = static_cast<float>(mean);
  // Correct for rounding the mean to float: sum((x - m)^2) - n * (mean - m)^2.
  const double shift = mean - m;
  const double sq = sum_lanes(x, n, [m](float v) { return (v - m) * (v - m); });
  const double var = std::max(0.0, sq / static_cast<double>(n) - shift * shift);
  return {mean, 1.0 / std::sqrt(var + epsilon)};
}

// ---- BatchNormalization ----

std::string batch_norm_support(const NodeSignature& sig) {
  if (std::string r = all_inputs_float(sig); !r.empty()) return r;
  if (sig.node.opset >= 14 && sig.node.attr_int("training_mode", 0) != 0) return "";
  // Before opset 7, is_test (default 0) chooses between training and inference.
  if (sig.node.opset < 7 && sig.node.attr_int("is_test", 0) == 0)
    return "is_test = 0 (training mode, the default before opset 7) is not supported "
           "(inference only: set is_test = 1)";
  if (sig.node.opset < 7 && sig.node.attr_int("spatial", 1) == 0)
    return "spatial = 0 before opset 7 is not supported (only per-channel statistics)";
  for (size_t i = 1; i < sig.node.outputs.size(); ++i)
    if (!sig.node.outputs[i].empty())
      return "the running/saved statistics outputs exist only in training mode, which is not "
             "supported (inference only)";
  return "";
}

// training_mode (opset 14+): each channel's mean and (population) variance over the batch and
// its spatial dims, in double, around the mean; running_mean/var (outputs 1, 2) are
// input_mean/var * momentum + the batch's * (1 - momentum), as onnx's reference computes them.
void batch_statistics(KernelContext& ctx, int64_t n, int64_t c, int64_t spatial,
                      std::vector<float>& mean, std::vector<float>& var) {
  const float* src = ctx.input(0).data<float>();
  mean.assign(static_cast<size_t>(c), 0.f);
  var.assign(static_cast<size_t>(c), 0.f);
  ctx.pool.parallel_for(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t s = 0; s < n; ++s)
        sum += sum_lanes(src + (s * c + ch) * spatial, spatial, [](float v) { return v; });
      const double count = static_cast<double>(std::max<int64_t>(1, n * spatial));
      const double m = sum / count;
      for (int64_t s = 0; s < n; ++s)
        sq += sum_lanes(src + (s * c + ch) * spatial, spatial, [m](float v) {
          const double d = v - m;
          return static_cast<float>(d * d);
        });
      mean[static_cast<size_t>(ch)] = static_cast<float>(m);
      var[static_cast<size_t>(ch)] = static_cast<float>(sq / count);
    }
  });
  const double momentum = ctx.node.attr_float("momentum", 0.9f);
  for (size_t out = 1; out <= 2; ++out) {
    if (!ctx.wants_output(out)) continue;
    const float* running = ctx.input(out + 2).data<float>();
    const std::vector<float>& batch = out == 1 ? mean : var;
    float* dst = ctx.output_uninitialized(out).data<float>();
    for (int64_t ch = 0; ch < c; ++ch)
      dst[ch] = static_cast<float>(running[ch] * momentum +
                                   batch[static_cast<size_t>(ch)] * (1 - momentum));
  }
}

void batch_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* scale = ctx.input(1).data<float>();
  const float* bias = ctx.input(2).data<float>();
  const float* mean = ctx.input(3).data<float>();
  const float* var = ctx.input(4).data<float>();
  const double eps = ctx.node.attr_float("epsilon", 1e-5f);
  const int64_t n = x.dim(0), c = x.dim(1), spatial = x.numel() / std::max<int64_t>(1, n * c);
  std::vector<float> batch_mean, batch_var;
  if (ctx.node.opset >= 14 && ctx.node.attr_int("training_mode", 0) != 0) {
    if (ctx.input(1).numel() != c)
      ctx.node.fail("scale has " + std::to_string(ctx.input(1).numel()) + " values, expected " +
                    std::to_string(c) + " (one per channel)");
    batch_statistics(ctx, n, c, spatial, batch_mean, batch_var);
    mean = batch_mean.data();
    var = batch_var.data();
  }
  // Per-channel parameters apply to a whole plane; per-activation ones (spatial = 0) to one
  // element.
  const int64_t params = ctx.input(1).numel();
  const int64_t plane = params == c ? spatial : 1;
  std::vector<float> a(static_cast<size_t>(params)), b(static_cast<size_t>(params));
  for (int64_t i = 0; i < params; ++i) {
    const double s = scale[i] / std::sqrt(static_cast<double>(var[i]) + eps);
    a[i] = static_cast<float>(s);
    b[i] = static_cast<float>(bias[i] - mean[i] * s);
  }
  Tensor& y = ctx.output_uninitialized(0);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  const int64_t per_sample = c * spatial;
  ctx.pool.parallel_for(n * c, grain_for(spatial), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % c;
      const int64_t off = (p / c) * per_sample + ch * spatial;
      for (int64_t i = 0; i < spatial; ++i) {
        const int64_t k = plane == 1 ? ch * spatial + i : ch;
        dst[off + i] = src[off + i] * a[k] + b[k];
      }
    }
  });
}

// ---- InstanceNormalization ----

void instance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* scale = ctx.input(1).data<float>();
  const float* bias = ctx.input(2).data<float>();
  const double eps = ctx.node.attr_float("epsilon", 1e-5f);
  const int64_t c = x.dim(1), planes = x.dim(0) * c;
  const int64_t spatial = x.numel() / std::max<int64_t>(1, planes);
  Tensor& y = ctx.output_uninitialized(0);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  ctx.pool.parallel_for(planes, grain_for(spatial), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* in = src + p * spatial;
      float* out = dst + p * spatial;
      auto [mean, inv] = moments(in, spatial, eps);
      const double s = inv * scale[p % c];
      const auto a = static_cast<float>(s), b = static_cast<float>(bias[p % c] - mean * s);
      for (int64_t i = 0; i < spatial; ++i) out[i] = in[i] * a + b;
    }
  });
}

// ---- GroupNormalization ----

std::string group_norm_support(const NodeSignature& sig) {
  if (std::string r = all_inputs_float(sig); !r.empty()) return r;
  if (sig.node.attr_int("stash_type", 1) != 1)
    return "stash_type other than 1 (float32) is not supported";
  return "";
}

// A group's channels are contiguous, so each (sample, group) is one block of memory.
void group_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* scale = ctx.input(1).data<float>();
  const float* bias = ctx.input(2).data<float>();
  const double eps = ctx.node.attr_float("epsilon", 1e-5f);
  const int64_t groups = ctx.node.attr_int("num_groups", 1);
  const bool per_channel = ctx.node.opset >= 21;
  const int64_t c = x.dim(1), per_group = c / groups;
  const int64_t spatial = x.numel() / std::max<int64_t>(1, x.dim(0) * c);
  Tensor& y = ctx.output_uninitialized(0);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  ctx.pool.parallel_for(
      x.dim(0) * groups, grain_for(per_group * spatial), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t g = t % groups, block = per_group * spatial;
          const float* in = src + t * block;
          float* out = dst + t * block;
          auto [mean, inv] = moments(in, block, eps);
          for (int64_t k = 0; k < per_group; ++k) {
            const int64_t p = per_channel ? g * per_group + k : g;
            const double s = inv * scale[p];
            const auto a = static_cast<float>(s), b = static_cast<float>(bias[p] - mean * s);
            for (int64_t i = 0; i < spatial; ++i)
              out[k * spatial + i] = in[k * spatial + i] * a + b;
          }
        }
      });
}

// ---- LayerNormalization ----

// `p` broadcast to the trailing shape `norm` (p's rank <= norm's), flattened. Inference checked
// that it broadcasts.
std::vector<float> expand_to(const Tensor& p, const std::vector<int64_t>& norm) {
  int64_t n = 1;
  for (int64_t d : norm) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  const float* src = p.data<float>();
  const size_t lead = norm.size() - p.shape().size();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0, stride = 1;
    for (size_t d = norm.size(); d-- > lead;) {
      const int64_t pd = p.shape()[d - lead], idx = rem % norm[d];
      rem /= norm[d];
      if (pd != 1) off += idx * stride;
      stride *= pd;
    }
    out[static_cast<size_t>(i)] = src[off];
  }
  return out;
}

void layer_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.node.attr_int("axis", -1);
  if (axis < 0) axis += x.rank();
  const double eps = ctx.node.attr_float("epsilon", 1e-5f);
  const std::vector<int64_t> norm(x.shape().begin() + axis, x.shape().end());
  int64_t n = 1;
  for (int64_t d : norm) n *= d;
  const int64_t rows = n ? x.numel() / n : 0;
  // Scale and B usually vary only over the normalized dims: expand them to one row. When they
  // also vary over leading dims, expand them to X's whole shape and step a row per row.
  auto per_row = [&](const Tensor& p) {
    const auto lead = static_cast<int64_t>(p.shape().size()) - static_cast<int64_t>(norm.size());
    return std::all_of(p.shape().begin(), p.shape().begin() + std::max<int64_t>(lead, 0),
                       [](int64_t d) { return d == 1; });
  };
  const bool rowwise = per_row(ctx.input(1)) && (!ctx.has_input(2) || per_row(ctx.input(2)));
  const std::vector<int64_t>& target = rowwise ? norm : x.shape();
  auto squeezed = [&](const Tensor& p) {  // drop leading 1s beyond the target's rank
    const auto extra =
        static_cast<int64_t>(p.shape().size() - std::min(p.shape().size(), target.size()));
    return p.reshaped(std::vector<int64_t>(p.shape().begin() + extra, p.shape().end()));
  };
  const std::vector<float> scale = expand_to(squeezed(ctx.input(1)), target);
  const std::vector<float> bias = ctx.has_input(2) ? expand_to(squeezed(ctx.input(2)), target)
                                                   : std::vector<float>(scale.size(), 0.0f);
  const int64_t param_step = rowwise ? 0 : n;
  Tensor& y = ctx.output_uninitialized(0);
  float* mean_out = ctx.wants_output(1) ? ctx.output(1).data<float>() : nullptr;
  float* inv_out = ctx.wants_output(2) ? ctx.output(2).data<float>() : nullptr;
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  ctx.pool.parallel_for(rows, grain_for(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = src + r * n;
      float* out = dst + r * n;
      auto [mean, inv] = moments(in, n, eps);
      const auto m = static_cast<float>(mean), s = static_cast<float>(inv);
      const float* sc = scale.data() + r * param_step;
      const float* bi = bias.data() + r * param_step;
      for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - m) * s * sc[i] + bi[i];
      if (mean_out) mean_out[r] = m;
      if (inv_out) inv_out[r] = s;
    }
  });
}

// ---- LpNormalization ----

// x / ||x||_p along `axis` (p = 1 sums |x|, as onnxruntime does); a zero norm gives zeros.
void lp_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.node.attr_int("axis", -1);
  if (axis < 0) axis += x.rank();
  const bool l1 = ctx.node.attr_int("p", 2) == 1;
  int64_t outer = 1, n = x.dim(axis), inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < axis) outer *= x.dim(i);
    if (i > axis) inner *= x.dim(i);
  }
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  ctx.pool.parallel_for(outer, grain_for(n * inner), [&](int64_t begin, int64_t end) {
    std::vector<double> norm(static_cast<size_t>(inner));
    for (int64_t o = begin; o < end; ++o) {
      const float* in = src + o * n * inner;
      float* out = dst + o * n * inner;
      std::fill(norm.begin(), norm.end(), 0.0);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t t = 0; t < inner; ++t) {
          const double v = in[k * inner + t];
          norm[t] += l1 ? std::fabs(v) : v * v;
        }
      for (int64_t t = 0; t < inner; ++t) norm[t] = l1 ? norm[t] : std::sqrt(norm[t]);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t t = 0; t < inner; ++t)
          out[k * inner + t] =
              norm[t] == 0 ? 0.0f : static_cast<float>(in[k * inner + t] / norm[t]);
    }
  });
}

// ---- MeanVarianceNormalization ----

// (x - mean) / (std + 1e-9) over `axes` (default N, H, W: per channel). Any axes are allowed, so
// each element's statistics slot comes from strides over the kept dims; one reference loop.
void mvn(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  std::vector<char> reduced(static_cast<size_t>(rank), 0);
  for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3}))
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = 1;
  std::vector<int64_t> stat_stride(static_cast<size_t>(rank), 0);
  int64_t slots = 1;
  for (int64_t d = rank; d-- > 0;)
    if (!reduced[static_cast<size_t>(d)]) {
      stat_stride[static_cast<size_t>(d)] = slots;
      slots *= x.dim(d);
    }
  const int64_t total = x.numel();
  Tensor& y = ctx.output(0);
  if (total == 0) return;
  const int64_t count = total / slots;
  // Statistics slot of every element, walked with an odometer.
  std::vector<int64_t> slot(static_cast<size_t>(total));
  {
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    int64_t s = 0;
    for (int64_t i = 0; i < total; ++i) {
      slot[static_cast<size_t>(i)] = s;
      for (int64_t d = rank; d-- > 0;) {
        const auto du = static_cast<size_t>(d);
        s += stat_stride[du];
        if (++idx[du] < x.dim(d)) break;
        s -= stat_stride[du] * x.dim(d);
        idx[du] = 0;
      }
    }
  }
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  std::vector<double> mean(static_cast<size_t>(slots), 0.0), sq(static_cast<size_t>(slots), 0.0);
  for (int64_t i = 0; i < total; ++i) mean[slot[i]] += src[i];
  for (double& m : mean) m /= static_cast<double>(count);
  for (int64_t i = 0; i < total; ++i) {
    const double dv = src[i] - mean[slot[i]];
    sq[slot[i]] += dv * dv;
  }
  for (double& v : sq) v = 1.0 / (std::sqrt(v / static_cast<double>(count)) + 1e-9);
  for (int64_t i = 0; i < total; ++i)
    dst[i] = static_cast<float>((src[i] - mean[slot[i]]) * sq[slot[i]]);
}

}  // namespace

void register_cpu_normalization(KernelRegistry& r) {
  r.add("BatchNormalization", batch_norm_support, with_float16(batch_norm));
  r.add("InstanceNormalization", all_inputs_float, with_float16(instance_norm));
  r.add("GroupNormalization", group_norm_support, with_float16(group_norm));
  r.add(
      "LayerNormalization",
      [](const NodeSignature& sig) -> std::string {
        if (std::string r = all_inputs_float(sig); !r.empty()) return r;
        if (sig.node.attr_int("stash_type", 1) != 1)
          return "stash_type other than 1 (float32) is not supported";
        return "";
      },
      with_float16(layer_norm));
  r.add("LpNormalization", all_inputs_float, with_float16(lp_norm));
  r.add("MeanVarianceNormalization", all_inputs_float, with_float16(mvn));
  register_cpu_softmax(r);
}

}  // namespace quilt::cpu
