// CPU kernels of the resize op family: Resize (opsets 10-19) and Upsample (opsets 7-9).
//
// Every mode is separable: output position o along an axis reads a few input positions (taps)
// with weights, and the N-D result is the product over axes. A per-axis plan (AxisTaps) holds
// those taps; nearest gathers through the plans in one pass, linear and cubic apply them one
// axis at a time. Coordinates are computed in float32 in the same order as onnxruntime, except
// nearest coordinates when the scale comes from `sizes`: the scale is then the ratio of two
// integers and the coordinate an exact fraction, so a coordinate exactly halfway between two
// pixels (7/2 for output 2 of 4 from 7, asymmetric) or on one rounds as nearest_mode says rather
// than as float32's error falls (onnxruntime rounds such ties exactly from 1.32 on).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNN,
  TfCropAndResize
};
// Simple: opset <= 10 and Upsample — truncate when upsampling, ceil when downsampling.
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
enum class Policy { Stretch, NotLarger, NotSmaller };

// Attributes, parsed once when the kernel is created (the schema has validated them).
struct ResizeParams {
  bool upsample = false;
  int64_t opset = 0;
  Mode mode = Mode::Nearest;
  Coord coord = Coord::Asymmetric;
  Nearest nearest = Nearest::Simple;
  Policy policy = Policy::Stretch;
  float cubic_a = -0.75f;
  float extrapolation = 0.0f;
  bool exclude_outside = false;
  bool antialias = false;
  std::vector<int64_t> axes;       // as written; empty = all
  std::vector<float> attr_scales;  // Upsample opsets 7-8
};

ResizeParams parse_params(const Node& node) {
  ResizeParams p;
  p.upsample = node.op_type == "Upsample";
  p.opset = node.opset;
  const std::string mode = node.attr_string("mode", "nearest");
  p.mode = mode == "linear" ? Mode::Linear : mode == "cubic" ? Mode::Cubic : Mode::Nearest;
  if (p.upsample) {
    if (node.opset < 9) p.attr_scales = node.attr_floats("scales");
    return p;
  }
  if (node.opset < 11) return p;
  const std::string c = node.attr_string("coordinate_transformation_mode", "half_pixel");
  p.coord = c == "half_pixel_symmetric"   ? Coord::HalfPixelSymmetric
            : c == "pytorch_half_pixel"   ? Coord::PytorchHalfPixel
            : c == "align_corners"        ? Coord::AlignCorners
            : c == "asymmetric"           ? Coord::Asymmetric
            : c == "tf_half_pixel_for_nn" ? Coord::TfHalfPixelForNN
            : c == "tf_crop_and_resize"   ? Coord::TfCropAndResize
                                          : Coord::HalfPixel;
  const std::string n = node.attr_string("nearest_mode", "round_prefer_floor");
  p.nearest = n == "round_prefer_ceil" ? Nearest::RoundPreferCeil
              : n == "floor"           ? Nearest::Floor
              : n == "ceil"            ? Nearest::Ceil
                                       : Nearest::RoundPreferFloor;
  p.cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
  p.extrapolation = node.attr_float("extrapolation_value", 0.0f);
  p.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  if (node.opset >= 18) {
    p.antialias = node.attr_int("antialias", 0) != 0;
    const std::string k = node.attr_string("keep_aspect_ratio_policy", "stretch");
    p.policy = k == "not_larger"    ? Policy::NotLarger
               : k == "not_smaller" ? Policy::NotSmaller
                                    : Policy::Stretch;
    p.axes = node.attr_ints("axes");
  }
  return p;
}

// Where output position x lies in the input, in input pixel units (F: float or double).
template <class F>
F source_coord(Coord c, F x, F scale, F out_len, F in_len, F roi_start, F roi_end) {
  const F half = F(0.5);
  switch (c) {
    case Coord::HalfPixel:
      return (x + half) / scale - half;
    case Coord::HalfPixelSymmetric: {
      // Centres the sampled region when floor() made the output smaller than in_len * scale.
      const F adjustment = out_len / (scale * in_len);
      const F offset = in_len / 2 * (1 - adjustment);
      return offset + (x + half) / scale - half;
    }
    case Coord::PytorchHalfPixel:
      return out_len > 1 ? (x + half) / scale - half : F(0);
    case Coord::AlignCorners:
      return out_len == 1 ? F(0) : x * (in_len - 1) / (out_len - 1);
    case Coord::Asymmetric:
      return x / scale;
    case Coord::TfHalfPixelForNN:
      return (x + half) / scale;
    case Coord::TfCropAndResize:
      return out_len > 1 ? roi_start * (in_len - 1) +
                               (x * (roi_end - roi_start) * (in_len - 1)) / (out_len - 1)
                         : half * (roi_start + roi_end) * (in_len - 1);
  }
  return 0;
}

int64_t nearest_index(Nearest m, float x, bool downsample) {
  switch (m) {
    case Nearest::RoundPreferFloor:
      if (x == static_cast<float>(static_cast<int64_t>(x)) + 0.5f)
        return static_cast<int64_t>(std::floor(x));
      return static_cast<int64_t>(std::round(x));
    case Nearest::RoundPreferCeil:
      return static_cast<int64_t>(std::round(x));
    case Nearest::Floor:
      return static_cast<int64_t>(std::floor(x));
    case Nearest::Ceil:
      return static_cast<int64_t>(std::ceil(x));
    case Nearest::Simple:
      return downsample ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(x);
  }
  return 0;
}

// Keys cubic convolution kernel with parameter a.
float cubic_weight(float x, float a) {
  x = std::fabs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// The taps of one axis: output position o reads index[o * taps + k] with weight[...]. Indices
// are clamped into the input (edge padding); `outside` marks positions that take the
// extrapolation value instead (tf_crop_and_resize outside the input).
struct AxisTaps {
  int64_t in = 0, out = 0;
  int64_t taps = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
  std::vector<uint8_t> outside;
  bool identity = false;  // out == in and every position reads itself with weight 1
};

// An exact fraction num/den (den > 0).
struct Fraction {
  __int128 num, den;
};

// The nearest coordinate of output position x as an exact fraction when the scale is the ratio
// of integers P/Q (from `sizes`), or nullopt for a mode whose coordinate involves the float roi.
std::optional<Fraction> exact_coord(Coord c, int64_t x, int64_t P, int64_t Q, int64_t in,
                                    int64_t out) {
  using I = __int128;
  const I X = x;
  switch (c) {
    case Coord::Asymmetric:
      return Fraction{X * Q, P};
    case Coord::HalfPixel:
      return Fraction{(2 * X + 1) * Q - P, 2 * I{P}};
    case Coord::PytorchHalfPixel:
      return out > 1 ? Fraction{(2 * X + 1) * Q - P, 2 * I{P}} : Fraction{0, 1};
    case Coord::TfHalfPixelForNN:
      return Fraction{(2 * X + 1) * Q, 2 * I{P}};
    case Coord::AlignCorners:
      return out == 1 ? Fraction{0, 1} : Fraction{X * (in - 1), out - 1};
    case Coord::HalfPixelSymmetric:  // offset in/2 * (1 - out / (scale * in)), plus half_pixel
      return Fraction{I{P} * in - I{out} * Q + (2 * X + 1) * Q - P, 2 * I{P}};
    case Coord::TfCropAndResize:
      return std::nullopt;
  }
  return std::nullopt;
}

int64_t floor_div(__int128 n, __int128 d) {
  __int128 q = n / d;
  if ((n % d != 0) && ((n < 0) != (d < 0))) --q;
  return static_cast<int64_t>(q);
}

int64_t nearest_index_exact(Nearest m, Fraction f, bool downsample) {
  const int64_t fl = floor_div(f.num, f.den);
  const __int128 rem = f.num - __int128{fl} * f.den;  // in [0, den)
  const int64_t ce = rem == 0 ? fl : fl + 1;
  switch (m) {
    case Nearest::RoundPreferFloor:
      return 2 * rem <= f.den ? fl : fl + 1;
    case Nearest::RoundPreferCeil:
      return 2 * rem < f.den ? fl : fl + 1;
    case Nearest::Floor:
      return fl;
    case Nearest::Ceil:
      return ce;
    case Nearest::Simple:  // truncation toward zero when upsampling
      return downsample ? ce : (f.num < 0 ? ce : fl);
  }
  return 0;
}

// from_scales: the output size came from a scale factor rather than `sizes`; then ratio is
// {0, 0}, else the scale is ratio.first / ratio.second exactly.
AxisTaps plan_axis(const ResizeParams& p, int64_t in, int64_t out, float scale,
                   std::pair<int64_t, int64_t> ratio, bool from_scales, float roi_start,
                   float roi_end) {
  AxisTaps t;
  t.in = in;
  t.out = out;
  // An axis that keeps its size with scale 1 is left alone in every coordinate mode (as the
  // ONNX reference and onnxruntime do), even tf_half_pixel_for_nn's half-pixel shift.
  if (scale == 1 && in == out &&
      (p.coord != Coord::TfCropAndResize || (roi_start == 0 && roi_end == 1))) {
    t.identity = true;
    t.outside.assign(static_cast<size_t>(out), 0);
    t.weight.assign(static_cast<size_t>(out), 1.0f);
    for (int64_t o = 0; o < out; ++o) t.index.push_back(o);
    return t;
  }
  const bool nearest = p.mode == Mode::Nearest;
  // Antialiasing widens the filter by 1/scale when downsampling; upsampling is unchanged.
  const bool wide = !nearest && p.antialias && scale < 1;
  const float support = (p.mode == Mode::Cubic ? 2.0f : 1.0f) / (wide ? scale : 1.0f);
  t.taps = nearest                  ? 1
           : wide                   ? 2 * static_cast<int64_t>(std::ceil(support)) + 1
           : p.mode == Mode::Linear ? 2
                                    : 4;
  t.index.assign(static_cast<size_t>(out * t.taps), 0);
  t.weight.assign(static_cast<size_t>(out * t.taps), 0.0f);
  t.outside.assign(static_cast<size_t>(out), 0);
  const auto fin = static_cast<float>(in);
  // align_corners maps the corners of the unrounded output (in * scale) onto the input corners,
  // as the ONNX reference and conformance tests do (onnxruntime uses the rounded size).
  const float fout =
      p.coord == Coord::AlignCorners && from_scales ? scale * fin : static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    if (nearest && ratio.second > 0) {
      if (auto f = exact_coord(p.coord, o, ratio.first, ratio.second, in, out)) {
        t.index[static_cast<size_t>(o)] =
            std::clamp<int64_t>(nearest_index_exact(p.nearest, *f, scale < 1), 0, in - 1);
        t.weight[static_cast<size_t>(o)] = 1;
        continue;
      }
    }
    const float x =
        source_coord<float>(p.coord, static_cast<float>(o), scale, fout, fin, roi_start, roi_end);
    if (p.coord == Coord::TfCropAndResize && (x < 0 || x > fin - 1)) {
      t.outside[static_cast<size_t>(o)] = 1;
      continue;
    }
    int64_t* idx = &t.index[static_cast<size_t>(o * t.taps)];
    float* w = &t.weight[static_cast<size_t>(o * t.taps)];
    if (nearest) {
      idx[0] = std::clamp<int64_t>(nearest_index(p.nearest, x, scale < 1), 0, in - 1);
      w[0] = 1;
      continue;
    }
    if (p.mode == Mode::Linear && !wide) {
      const float xc = std::clamp(x, 0.0f, fin - 1);
      const auto i0 = static_cast<int64_t>(xc);
      idx[0] = i0;
      idx[1] = std::min(i0 + 1, in - 1);
      w[1] = xc - static_cast<float>(i0);
      w[0] = 1 - w[1];
      continue;
    }
    // Cubic, or an antialiasing filter: every input position within the support.
    int64_t first;
    float step;
    if (wide) {
      first = static_cast<int64_t>(std::floor(x - support + 1));
      step = scale;
    } else {
      first = static_cast<int64_t>(std::floor(x)) - 1;
      step = 1;
    }
    float sum = 0;
    for (int64_t k = 0; k < t.taps; ++k) {
      const int64_t i = first + k;
      const float d = (static_cast<float>(i) - x) * step;
      float wk =
          p.mode == Mode::Cubic ? cubic_weight(d, p.cubic_a) : std::max(0.0f, 1 - std::fabs(d));
      if (p.exclude_outside && (i < 0 || i >= in)) wk = 0;
      idx[k] = std::clamp<int64_t>(i, 0, in - 1);
      w[k] = wk;
      sum += wk;
    }
    if (sum != 0 && (wide || p.exclude_outside))
      for (int64_t k = 0; k < t.taps; ++k) w[k] /= sum;
  }
  t.identity = in == out;
  for (int64_t o = 0; o < out && t.identity; ++o) {
    if (t.outside[static_cast<size_t>(o)]) t.identity = false;
    for (int64_t k = 0; k < t.taps; ++k) {
      const auto j = static_cast<size_t>(o * t.taps + k);
      if (t.weight[j] != (t.index[j] == o ? 1.0f : 0.0f)) t.identity = false;
    }
  }
  return t;
}

std::vector<float> float_values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t k = 0; k < out.size(); ++k) {
    switch (t.dtype()) {
      case DType::Float64:
        out[k] = static_cast<float>(t.data<double>()[k]);
        break;
      case DType::Float16:
        out[k] = half_to_float(t.data<uint16_t>()[k]);
        break;
      default:
        out[k] = t.data<float>()[k];
        break;
    }
  }
  return out;
}

std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t k = 0; k < out.size(); ++k)
    out[k] = t.dtype() == DType::Int32 ? t.data<int32_t>()[k] : t.data<int64_t>()[k];
  return out;
}

bool given(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i) && ctx.input(i).numel() > 0;
}

// One plan per axis from the run's inputs. The output shape has been inferred already; the
// scales here are those the coordinate transform uses (which for `sizes` is out/in).
std::vector<AxisTaps> plan(const ResizeParams& p, KernelContext& ctx) {
  const std::vector<int64_t>& in = ctx.input(0).shape();
  const std::vector<int64_t>& out = ctx.output_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  for (int64_t a : p.axes) axes.push_back(a < 0 ? a + rank : a);
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);

  std::vector<float> scales(static_cast<size_t>(rank), 1.0f);
  // For `sizes`: each axis's scale as the exact ratio sizes[j] / in[j] it came from.
  std::vector<std::pair<int64_t, int64_t>> ratios(static_cast<size_t>(rank), {0, 0});
  bool from_scales = true;
  std::vector<float> roi_start(static_cast<size_t>(rank), 0.0f);
  std::vector<float> roi_end(static_cast<size_t>(rank), 1.0f);
  if (p.upsample) {
    scales = p.opset < 9 ? p.attr_scales : float_values(ctx.input(1));
  } else if (p.opset >= 11 && given(ctx, 3)) {
    from_scales = false;
    const std::vector<int64_t> sizes = int_values(ctx.input(3));
    std::vector<float> s(axes.size());
    std::vector<std::pair<int64_t, int64_t>> r(axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t d = in[static_cast<size_t>(axes[i])];
      s[i] = d == 0 ? 1.0f : static_cast<float>(sizes[i]) / static_cast<float>(d);
      r[i] = d == 0 ? std::pair<int64_t, int64_t>{1, 1} : std::pair<int64_t, int64_t>{sizes[i], d};
    }
    // The policies take one axis's scale for all (the smallest or the largest).
    if (p.policy != Policy::Stretch && !s.empty()) {
      const auto pick = p.policy == Policy::NotLarger ? std::min_element(s.begin(), s.end())
                                                      : std::max_element(s.begin(), s.end());
      const auto k = static_cast<size_t>(pick - s.begin());
      std::fill(s.begin(), s.end(), s[k]);
      std::fill(r.begin(), r.end(), r[k]);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      scales[static_cast<size_t>(axes[i])] = s[i];
      ratios[static_cast<size_t>(axes[i])] = r[i];
    }
  } else {
    const std::vector<float> s = float_values(ctx.input(p.opset == 10 ? 1 : 2));
    for (size_t i = 0; i < axes.size(); ++i) scales[static_cast<size_t>(axes[i])] = s[i];
  }
  if (p.coord == Coord::TfCropAndResize && given(ctx, 1)) {
    const std::vector<float> roi = float_values(ctx.input(1));
    for (size_t i = 0; i < axes.size(); ++i) {
      roi_start[static_cast<size_t>(axes[i])] = roi[i];
      roi_end[static_cast<size_t>(axes[i])] = roi[axes.size() + i];
    }
  }
  std::vector<AxisTaps> plans;
  for (size_t a = 0; a < in.size(); ++a)
    plans.push_back(
        plan_axis(p, in[a], out[a], scales[a], ratios[a], from_scales, roi_start[a], roi_end[a]));
  return plans;
}

// Nearest: a gather through the per-axis indices; T is an unsigned type of the element size.
template <class T>
void gather(const T* src, T* dst, const std::vector<AxisTaps>& plans, T extrapolation,
            const ThreadPool& pool) {
  const size_t rank = plans.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t a = rank; a-- > 1;) stride[a - 1] = stride[a] * plans[a].in;
  const AxisTaps& last = plans.back();
  const int64_t width = last.out;
  int64_t rows = 1;
  for (size_t a = 0; a + 1 < rank; ++a) rows *= plans[a].out;
  // The last axis without extrapolated positions is a plain gather the compiler can unroll.
  const bool last_inside =
      std::none_of(last.outside.begin(), last.outside.end(), [](uint8_t o) { return o != 0; });
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, width));
  pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    int64_t prev_base = -1;  // source offset of the previous row (-1: none or extrapolated)
    for (int64_t row = begin; row < end; ++row) {
      int64_t base = 0, rem = row;
      bool outside = false;
      for (size_t a = rank - 1; a-- > 0;) {
        const auto o = static_cast<size_t>(rem % plans[a].out);
        rem /= plans[a].out;
        outside |= plans[a].outside[o] != 0;
        base += plans[a].index[o] * stride[a];
      }
      T* d = dst + row * width;
      if (outside) {
        std::fill(d, d + width, extrapolation);
        prev_base = -1;
        continue;
      }
      if (base == prev_base) {  // upsampling repeats rows: copy the one just written
        std::copy_n(d - width, width, d);
        continue;
      }
      prev_base = base;
      const T* s = src + base;
      const int64_t* idx = last.index.data();
      if (last_inside) {
        for (int64_t j = 0; j < width; ++j) d[j] = s[idx[j]];
      } else {
        for (int64_t j = 0; j < width; ++j)
          d[j] = last.outside[static_cast<size_t>(j)] ? extrapolation : s[idx[j]];
      }
    }
  });
}

// One linear/cubic pass along an axis of a tensor viewed as [outer, t.in, inner].
void interpolate_axis(const float* src, float* dst, int64_t outer, int64_t inner, const AxisTaps& t,
                      float extrapolation, const ThreadPool& pool) {
  const int64_t rows = outer * t.out;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner * t.taps));
  pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r % t.out;
      float* d = dst + r * inner;
      if (t.outside[static_cast<size_t>(o)]) {
        std::fill(d, d + inner, extrapolation);
        continue;
      }
      const float* s = src + (r / t.out) * t.in * inner;
      const int64_t* idx = &t.index[static_cast<size_t>(o * t.taps)];
      const float* w = &t.weight[static_cast<size_t>(o * t.taps)];
      if (inner == 1) {
        float acc = 0;
        for (int64_t k = 0; k < t.taps; ++k) acc += w[k] * s[idx[k]];
        *d = acc;
        continue;
      }
      std::fill(d, d + inner, 0.0f);
      for (int64_t k = 0; k < t.taps; ++k) {
        const float wk = w[k];
        const float* sk = s + idx[k] * inner;
        for (int64_t j = 0; j < inner; ++j) d[j] += wk * sk[j];
      }
    }
  });
}

template <class T>
T extrapolation_as(float v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // Clamp first: converting an out-of-range float to an integer is undefined.
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    return static_cast<T>(std::clamp(static_cast<double>(v), lo, hi));
  }
}

template <class T, class Bits>
void run_nearest(const ResizeParams& p, const std::vector<AxisTaps>& plans, const Tensor& x,
                 Tensor& y, const ThreadPool& pool) {
  static_assert(sizeof(T) == sizeof(Bits));
  const T e = extrapolation_as<T>(p.extrapolation);
  Bits bits;
  std::memcpy(&bits, &e, sizeof bits);
  gather<Bits>(static_cast<const Bits*>(x.raw_data()), static_cast<Bits*>(y.raw_data()), plans,
               bits, pool);
}

class ResizeKernel : public Kernel {
 public:
  explicit ResizeKernel(const Node& node) : p_(parse_params(node)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    if (x.rank() == 0) {
      std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
      return;
    }
    const std::vector<AxisTaps> plans = plan(p_, ctx);
    if (p_.mode == Mode::Nearest) {
      switch (x.dtype()) {
        case DType::Float32:
          return run_nearest<float, uint32_t>(p_, plans, x, y, ctx.pool);
        case DType::Int32:
          return run_nearest<int32_t, uint32_t>(p_, plans, x, y, ctx.pool);
        case DType::Int64:
          return run_nearest<int64_t, uint64_t>(p_, plans, x, y, ctx.pool);
        case DType::Int8:
          return run_nearest<int8_t, uint8_t>(p_, plans, x, y, ctx.pool);
        case DType::UInt8:
          return run_nearest<uint8_t, uint8_t>(p_, plans, x, y, ctx.pool);
        case DType::Float16:
          return gather<uint16_t>(x.data<uint16_t>(), y.data<uint16_t>(), plans,
                                  float_to_half(p_.extrapolation), ctx.pool);
        default:
          ctx.node.fail(
              std::string("nearest resize of ") + dtype_name(x.dtype()) + " is not implemented",
              ErrorCode::NotImplemented);
      }
    }
    if (x.dtype() == DType::Float32) {
      interpolate(plans, x.shape(), x.data<float>(), y.data<float>(), ctx.pool);
      return;
    }
    // float16: interpolate in float32 and round once at the end.
    std::vector<float> xf(static_cast<size_t>(x.numel())), yf(static_cast<size_t>(y.numel()));
    const uint16_t* xh = x.data<uint16_t>();
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = half_to_float(xh[i]);
    interpolate(plans, x.shape(), xf.data(), yf.data(), ctx.pool);
    uint16_t* yh = y.data<uint16_t>();
    for (size_t i = 0; i < yf.size(); ++i) yh[i] = float_to_half(yf[i]);
  }

 private:
  // Linear / cubic: one pass per axis that changes, innermost first; the last pass writes
  // into dst.
  void interpolate(const std::vector<AxisTaps>& plans, std::vector<int64_t> dims, const float* src,
                   float* dst, const ThreadPool& pool) const {
    std::vector<size_t> todo;
    for (size_t a = plans.size(); a-- > 0;)
      if (!plans[a].identity) todo.push_back(a);
    if (todo.empty()) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      std::copy_n(src, n, dst);
      return;
    }
    std::vector<float> buffers[2];
    for (size_t step = 0; step < todo.size(); ++step) {
      const size_t a = todo[step];
      int64_t outer = 1, inner = 1;
      for (size_t b = 0; b < a; ++b) outer *= dims[b];
      for (size_t b = a + 1; b < dims.size(); ++b) inner *= dims[b];
      float* out = dst;
      if (step + 1 < todo.size()) {
        buffers[step % 2].resize(static_cast<size_t>(outer * plans[a].out * inner));
        out = buffers[step % 2].data();
      }
      interpolate_axis(src, out, outer, inner, plans[a], p_.extrapolation, pool);
      dims[a] = plans[a].out;
      src = out;
    }
  }

  ResizeParams p_;
};

std::string resize_support(const NodeSignature& sig) {
  const DType d = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
  if (d == DType::Float32 || d == DType::Float16 || d == DType::Undefined) return "";
  const bool int_type =
      d == DType::Int8 || d == DType::UInt8 || d == DType::Int32 || d == DType::Int64;
  const std::string mode = sig.node.attr_string("mode", "nearest");
  if (int_type && mode == "nearest") return "";
  const std::string supported =
      "; the CPU kernel supports float32 and float16 in every mode and int8, uint8, int32, int64 "
      "in nearest mode";
  if (int_type)
    return "mode '" + mode + "' on " + dtype_name(d) + " is not implemented" + supported;
  return std::string("input X is ") + dtype_name(d) + supported;
}

}  // namespace

void register_cpu_resize(KernelRegistry& r) {
  const KernelFactory create = [](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
    return std::make_unique<ResizeKernel>(sig.node);
  };
  r.add("Resize", resize_support, create);
  r.add("Upsample", resize_support, create);
}

}  // namespace quilt::cpu
