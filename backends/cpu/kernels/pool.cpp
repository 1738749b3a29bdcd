// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, parallel over (batch, channel)
// planes. Spatial dims are padded in front to three, as in conv.cpp.
#include <algorithm>
#include <array>
#include <limits>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

std::vector<int64_t> window_pad_begins(const Node& node, const std::vector<int64_t>& x_shape,
                                       const std::vector<int64_t>& kernel,
                                       const std::vector<int64_t>& y_shape);

namespace {

using Dims3 = std::array<int64_t, 3>;

struct Geometry {
  Dims3 in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad{0, 0, 0}, pad_end{0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

Geometry pool_geometry(const Node& node, const Tensor& x, const std::vector<int64_t>& y_shape) {
  const size_t sp = static_cast<size_t>(x.rank() - 2);
  const auto kernel = node.attr_ints("kernel_shape");
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto begins = window_pad_begins(node, x.shape(), kernel, y_shape);
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  Geometry g;
  for (size_t i = 0; i < sp; ++i) {
    const size_t j = 3 - sp + i;
    g.in[j] = x.dim(static_cast<int64_t>(i) + 2);
    g.out[j] = y_shape[i + 2];
    g.kernel[j] = kernel[i];
    g.stride[j] = strides[i];
    g.dilation[j] = dilations[i];
    g.pad[j] = begins[i];
    if (auto_pad == "NOTSET") {
      g.pad_end[j] = pads[i + sp];
    } else if (auto_pad != "VALID") {
      const int64_t dk = (kernel[i] - 1) * dilations[i] + 1;
      g.pad_end[j] = std::max<int64_t>(0, (g.out[j] - 1) * strides[i] + dk - g.in[j]) - begins[i];
    }
  }
  return g;
}

// Calls fn(flat input index) for every window element of output (od, oh, ow) that lies inside
// the input.
template <class Fn>
void for_window(const Geometry& g, int64_t od, int64_t oh, int64_t ow, Fn&& fn) {
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dilation[2];
        if (iw < 0 || iw >= g.in[2]) continue;
        fn(id, ih, iw);
      }
    }
  }
}

// Number of window elements along one dim whose position lies in [lo, hi).
int64_t count_in(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t dilation,
                 int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    const int64_t i = o * stride - pad + k * dilation;
    n += i >= lo && i < hi;
  }
  return n;
}

template <class T>
void max_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const Geometry g = pool_geometry(ctx.node, x, y.shape());
  const bool want_indices = ctx.wants_output(1);
  int64_t* ip = want_indices ? ctx.output(1).data<int64_t>() : nullptr;
  const bool column_major = ctx.node.attr_int("storage_order", 0) != 0;
  const int64_t ivol = g.in_size(), ovol = g.out_size();
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const int64_t planes = x.dim(0) * x.dim(1);
  ctx.pool.parallel_for(
      planes, std::max<int64_t>(1, 16384 / (ovol * kvol)), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const T* xc = xp + p * ivol;
          T* yc = yp + p * ovol;
          int64_t o = 0;
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
                T best = std::numeric_limits<T>::lowest();
                int64_t at = -1;
                for_window(g, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
                  const int64_t i = (id * g.in[1] + ih) * g.in[2] + iw;
                  // NaN wins, as in onnxruntime's max.
                  if (xc[i] > best || at < 0 || (xc[i] != xc[i] && best == best)) {
                    best = xc[i];
                    at = column_major ? id + (ih + iw * g.in[1]) * g.in[0] : i;
                  }
                });
                yc[o] = best;
                if (ip) ip[p * ovol + o] = p * ivol + at;
              }
        }
      });
}

void run_average_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const Geometry g = pool_geometry(ctx.node, x, y.shape());
  const bool include_pad = ctx.node.attr_int("count_include_pad", 0) != 0;
  const int64_t ivol = g.in_size(), ovol = g.out_size();
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  // Divisors depend only on the output position: with count_include_pad the window is
  // clipped to the padded input, else to the input itself. Before opset 19 (as onnxruntime
  // runs it) count_include_pad always divides by the kernel size, even for a ceil_mode window
  // reaching past the end padding.
  const bool whole_kernel = include_pad && ctx.node.opset < 19;
  std::vector<float> inv_count(static_cast<size_t>(ovol));
  {
    int64_t o = 0;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          int64_t count = 1;
          const Dims3 pos{od, oh, ow};
          for (size_t d = 0; d < 3; ++d) {
            const int64_t lo = include_pad ? -g.pad[d] : 0;
            const int64_t hi = include_pad ? g.in[d] + g.pad_end[d] : g.in[d];
            count *= count_in(pos[d], g.stride[d], g.pad[d], g.kernel[d], g.dilation[d], lo, hi);
          }
          if (whole_kernel) count = kvol;
          inv_count[static_cast<size_t>(o)] = 1.f / static_cast<float>(count);
        }
  }
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t planes = x.dim(0) * x.dim(1);
  ctx.pool.parallel_for(
      planes, std::max<int64_t>(1, 16384 / (ovol * kvol)), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const float* xc = xp + p * ivol;
          float* yc = yp + p * ovol;
          int64_t o = 0;
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
                float sum = 0.f;
                for_window(g, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
                  sum += xc[(id * g.in[1] + ih) * g.in[2] + iw];
                });
                yc[o] = sum * inv_count[static_cast<size_t>(o)];
              }
        }
      });
}

void run_max_pool(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float64:
      return max_pool<double>(ctx);
    case DType::Int8:
      return max_pool<int8_t>(ctx);
    case DType::UInt8:
      return max_pool<uint8_t>(ctx);
    default:
      return max_pool<float>(ctx);
  }
}

template <bool kMax>
void run_global_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t vol = planes ? x.numel() / planes : 0;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  ctx.pool.parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(vol, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t p = b; p < e; ++p) {
                            const float* xc = xp + p * vol;
                            if constexpr (kMax) {
                              float best = vol ? xc[0] : std::numeric_limits<float>::lowest();
                              for (int64_t i = 1; i < vol; ++i)
                                if (xc[i] > best || xc[i] != xc[i]) best = xc[i];
                              yp[p] = best;
                            } else {
                              double sum = 0;
                              for (int64_t i = 0; i < vol; ++i) sum += xc[i];
                              yp[p] = static_cast<float>(sum / static_cast<double>(vol));
                            }
                          }
                        });
}

std::string pool_support(const NodeSignature& sig) {
  const bool max_pool = sig.node.op_type == "MaxPool";
  const SupportFn dtypes =
      max_pool ? dtypes_of_input({DType::Float32, DType::Float64, DType::Int8, DType::UInt8})
               : float_only();
  if (std::string why = dtypes(sig); !why.empty()) return why;
  if (sig.inputs[0].has_shape && sig.inputs[0].dims.size() > 5)
    return "only 1-D, 2-D and 3-D pooling is supported";
  return "";
}

}  // namespace

void register_cpu_pool(KernelRegistry& r) {
  r.add("MaxPool", pool_support, run_max_pool);
  r.add("AveragePool", pool_support, run_average_pool);
  r.add("GlobalAveragePool", float_only(), run_global_pool<false>);
  r.add("GlobalMaxPool", float_only(), run_global_pool<true>);
}

}  // namespace quilt::cpu
