// GridSample (opsets 16 and 20) on the CPU, for any number of spatial dims.
//
// Every mode is separable: along each spatial axis an output point reads 1 (nearest), 2 (linear)
// or 4 (cubic) input positions with weights, after the padding mode has mapped positions outside
// the image. The taps of all axes are combined once per output point and reused for every
// channel. Coordinates are computed as onnxruntime and the ONNX reference do: in float32 (float64
// for float64 input), unnormalised, rounded half to even for nearest, then clamped or reflected.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

struct GridParams {
  Mode mode = Mode::Linear;
  Padding padding = Padding::Zeros;
  bool align_corners = false;
};

GridParams parse_params(const Node& node) {
  GridParams p;
  const std::string mode = node.attr_string("mode", node.opset < 20 ? "bilinear" : "linear");
  p.mode = mode == "nearest"                      ? Mode::Nearest
           : mode == "bicubic" || mode == "cubic" ? Mode::Cubic
                                                  : Mode::Linear;
  const std::string pad = node.attr_string("padding_mode", "zeros");
  p.padding = pad == "border"       ? Padding::Border
              : pad == "reflection" ? Padding::Reflection
                                    : Padding::Zeros;
  p.align_corners = node.attr_int("align_corners", 0) != 0;
  return p;
}

// Reflects x into [lo, hi] by bouncing off the nearer border as often as needed.
template <class C>
C reflect(C x, C lo, C hi) {
  const C range = hi - lo;
  if (range <= 0) return lo;  // a single pixel with align_corners: nowhere else to go
  if (x < lo) {
    const C dx = lo - x;
    const auto n = static_cast<int64_t>(dx / range);
    const C r = dx - static_cast<C>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const C dx = x - hi;
    const auto n = static_cast<int64_t>(dx / range);
    const C r = dx - static_cast<C>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Keys' cubic convolution weights (a = -0.75) for the 4 taps around fraction t in [0, 1).
template <class C>
void cubic_weights(C t, C* w) {
  const C a = C(-0.75);
  const C x = std::fabs(t);
  w[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  w[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  w[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

template <class C>
class AxisSampler {
 public:
  AxisSampler(int64_t len, const GridParams& p) : len_(len), p_(p) {
    lo_ = p.align_corners ? C(0) : C(-0.5);
    hi_ = p.align_corners ? static_cast<C>(len - 1) : static_cast<C>(len) - C(0.5);
  }

  // Fills idx/w with the taps for normalised coordinate g; idx -1 = reads zero padding.
  // Returns the number of taps.
  int taps(C g, int64_t* idx, C* w) const {
    const C n = static_cast<C>(len_);
    C x = p_.align_corners ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
    if (p_.mode == Mode::Nearest) x = std::nearbyint(x);
    if (x < lo_ || x > hi_) {
      // Cubic border padding clamps each tap, not the position (onnxruntime and PyTorch; the
      // ONNX reference clamps the position too, which no official case exercises).
      if (p_.padding == Padding::Border && p_.mode != Mode::Cubic)
        x = std::clamp(x, C(0), n - 1);
      else if (p_.padding == Padding::Reflection)
        x = reflect(x, lo_, hi_);
    }
    // Far outside with zero padding every tap reads zero; keep the integer cast defined.
    x = std::clamp(x, C(-8) - n, n + C(8));
    if (p_.mode == Mode::Nearest) {
      idx[0] = pixel(static_cast<int64_t>(x));
      w[0] = 1;
      return 1;
    }
    const C f = std::floor(x);
    const auto i0 = static_cast<int64_t>(f);
    if (p_.mode == Mode::Linear) {
      idx[0] = pixel(i0);
      idx[1] = pixel(i0 + 1);
      w[0] = 1 - (x - f);
      w[1] = x - f;
      return 2;
    }
    cubic_weights(x - f, w);
    for (int k = 0; k < 4; ++k) idx[k] = pixel(i0 - 1 + k);
    return 4;
  }

 private:
  // The input index read for integer position i under the padding mode.
  int64_t pixel(int64_t i) const {
    if (i >= 0 && i < len_) return i;
    switch (p_.padding) {
      case Padding::Zeros:
        return -1;
      case Padding::Border:
        return std::clamp<int64_t>(i, 0, len_ - 1);
      case Padding::Reflection:
        return std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<C>(i), lo_, hi_)), 0,
                                   len_ - 1);
    }
    return -1;
  }

  int64_t len_;
  GridParams p_;
  C lo_, hi_;
};

// Y for float data of compute type C. x: [N, C, in...], grid: [N, out..., r], y: [N, C, out...].
template <class C>
void grid_sample(const GridParams& p, const C* x, const std::vector<int64_t>& x_shape,
                 const C* grid, C* y, const std::vector<int64_t>& y_shape, const ThreadPool& pool) {
  const size_t r = x_shape.size() - 2;
  const int64_t batch = x_shape[0], channels = x_shape[1];
  int64_t in_size = 1, out_size = 1;
  for (size_t a = 0; a < r; ++a) {
    in_size *= x_shape[a + 2];
    out_size *= y_shape[a + 2];
  }
  std::vector<AxisSampler<C>> axes;
  for (size_t a = 0; a < r; ++a) axes.emplace_back(x_shape[a + 2], p);
  std::vector<int64_t> strides(r, 1);
  for (size_t a = r - 1; a-- > 0;) strides[a] = strides[a + 1] * x_shape[a + 3];

  const int64_t total = batch * out_size;
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, channels));
  pool.parallel_for(total, grain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> offs, next_offs;
    std::vector<C> ws, next_ws;
    int64_t idx[4];
    C w[4];
    for (int64_t pt = begin; pt < end; ++pt) {
      const int64_t n = pt / out_size, o = pt % out_size;
      const C* g = grid + pt * static_cast<int64_t>(r);
      offs.assign(1, 0);
      ws.assign(1, C(1));
      for (size_t a = 0; a < r; ++a) {
        // The grid lists coordinates innermost axis first.
        const C coord = g[r - 1 - a];
        // Neither onnxruntime nor the reference defines a NaN position.
        if (std::isnan(coord)) throw Error(ErrorCode::InvalidArgument, "grid contains NaN");
        const int k_n = axes[a].taps(coord, idx, w);
        next_offs.clear();
        next_ws.clear();
        for (size_t c = 0; c < offs.size(); ++c)
          for (int k = 0; k < k_n; ++k)
            if (idx[k] >= 0) {
              next_offs.push_back(offs[c] + idx[k] * strides[a]);
              next_ws.push_back(ws[c] * w[k]);
            }
        offs.swap(next_offs);
        ws.swap(next_ws);
      }
      for (int64_t c = 0; c < channels; ++c) {
        const C* plane = x + (n * channels + c) * in_size;
        C v = 0;
        for (size_t k = 0; k < offs.size(); ++k) v += ws[k] * plane[offs[k]];
        y[(n * channels + c) * out_size + o] = v;
      }
    }
  });
}

// Nearest mode for any dtype: a pure gather of elements, exact for integers and bool.
void grid_sample_nearest_bytes(const GridParams& p, const Tensor& x, const std::vector<float>& grid,
                               Tensor& y, const ThreadPool& pool) {
  const auto& x_shape = x.shape();
  const size_t r = x_shape.size() - 2;
  const size_t esize = dtype_size(x.dtype());
  const int64_t batch = x_shape[0], channels = x_shape[1];
  int64_t in_size = 1, out_size = 1;
  for (size_t a = 0; a < r; ++a) {
    in_size *= x_shape[a + 2];
    out_size *= y.dim(static_cast<int64_t>(a + 2));
  }
  std::vector<AxisSampler<float>> axes;
  for (size_t a = 0; a < r; ++a) axes.emplace_back(x_shape[a + 2], p);
  std::vector<int64_t> strides(r, 1);
  for (size_t a = r - 1; a-- > 0;) strides[a] = strides[a + 1] * x_shape[a + 3];
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
  pool.parallel_for(batch * out_size, 4096, [&](int64_t begin, int64_t end) {
    int64_t idx[4];
    float w[4];
    for (int64_t pt = begin; pt < end; ++pt) {
      const int64_t n = pt / out_size, o = pt % out_size;
      const float* g = grid.data() + pt * static_cast<int64_t>(r);
      int64_t off = 0;
      for (size_t a = 0; a < r && off >= 0; ++a) {
        const float coord = g[r - 1 - a];
        if (std::isnan(coord)) throw Error(ErrorCode::InvalidArgument, "grid contains NaN");
        axes[a].taps(coord, idx, w);
        off = idx[0] < 0 ? -1 : off + idx[0] * strides[a];
      }
      if (off < 0) continue;  // zero padding: y is zero-filled
      for (int64_t c = 0; c < channels; ++c)
        std::memcpy(dst + static_cast<size_t>((n * channels + c) * out_size + o) * esize,
                    src + static_cast<size_t>((n * channels + c) * in_size + off) * esize, esize);
    }
  });
}

template <class C>
std::vector<C> as_compute(const Tensor& t) {
  std::vector<C> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::Float32:
      std::copy_n(t.data<float>(), out.size(), out.begin());
      break;
    case DType::Float64:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<C>(t.data<double>()[i]);
      break;
    default:
      for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(t.data<uint16_t>()[i]);
  }
  return out;
}

class GridSampleKernel : public Kernel {
 public:
  explicit GridSampleKernel(const Node& node) : p_(parse_params(node)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    if (x.numel() == 0) {
      // Nothing to sample from: zero padding reads zeros (y is zero-filled), the others have
      // no border value to repeat.
      if (p_.padding == Padding::Zeros) return;
      ctx.node.fail("X has shape " + to_string(x.shape()) +
                        "; border and reflection padding need a non-empty image",
                    ErrorCode::InvalidArgument);
    }
    switch (x.dtype()) {
      case DType::Float32: {
        const std::vector<float> g = as_compute<float>(grid);
        return grid_sample(p_, x.data<float>(), x.shape(), g.data(), y.data<float>(), y.shape(),
                           ctx.pool);
      }
      case DType::Float64: {
        const std::vector<double> g = as_compute<double>(grid);
        return grid_sample(p_, x.data<double>(), x.shape(), g.data(), y.data<double>(), y.shape(),
                           ctx.pool);
      }
      case DType::Float16: {
        const std::vector<float> g = as_compute<float>(grid), xf = as_compute<float>(x);
        std::vector<float> out(static_cast<size_t>(y.numel()));
        grid_sample(p_, xf.data(), x.shape(), g.data(), out.data(), y.shape(), ctx.pool);
        uint16_t* h = y.data<uint16_t>();
        for (size_t i = 0; i < out.size(); ++i) h[i] = float_to_half(out[i]);
        return;
      }
      default:  // nearest only (see grid_sample_support)
        grid_sample_nearest_bytes(p_, x, as_compute<float>(grid), y, ctx.pool);
    }
  }

 private:
  GridParams p_;
};

std::string grid_sample_support(const NodeSignature& sig) {
  const DType d = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
  if (d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::Undefined)
    return "";
  if (parse_params(sig.node).mode == Mode::Nearest && dtype_supported(d)) return "";
  return std::string("X is ") + dtype_name(d) +
         "; the CPU kernel supports float16, float32 and float64 in every mode and other types "
         "in nearest mode (the spec leaves the rounding of interpolated integers open)";
}

}  // namespace

void register_cpu_grid_sample(KernelRegistry& r) {
  r.add("GridSample", grid_sample_support,
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<GridSampleKernel>(sig.node);
        }));
}

}  // namespace quilt::cpu
