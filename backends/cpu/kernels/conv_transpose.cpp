// ConvTranspose as GEMM + col2im: per (batch, group), col = W_g^T * X_g holds every input
// pixel's contribution to each (output channel, kernel offset); col2im scatters and sums them
// into the output. Spatial dims are padded in front to three, as in conv.cpp.
#include <algorithm>
#include <array>
#include <memory>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernel.hpp"
#include "core/checked.hpp"

namespace quilt::cpu {
namespace {

using Dims3 = std::array<int64_t, 3>;

struct Geometry {
  Dims3 in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad{0, 0, 0};
};

// Inputs i in [lo, hi) land on output i * stride + offset inside [0, out).
std::pair<int64_t, int64_t> valid_range(int64_t in, int64_t out, int64_t stride, int64_t offset) {
  int64_t lo = ceil_div_positive(saturating_sub(0, offset), stride);
  int64_t hi = ceil_div_positive(saturating_sub(out, offset), stride);
  lo = std::min(lo, in);
  hi = std::clamp(hi, lo, in);
  return {lo, hi};
}

// The output size was fixed by shape inference; the leading pads follow from it. With
// output_shape or SAME_* auto_pad the total padding is split as the spec and onnxruntime do:
// an odd extra element goes to the beginning, except for SAME_UPPER where it goes to the end.
Geometry transpose_geometry(const Node& node, const Tensor& x, const Tensor& w,
                            const std::vector<int64_t>& y_shape) {
  const size_t sp = static_cast<size_t>(x.rank() - 2);
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto output_padding = node.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  const bool derived =
      node.has_attr("output_shape") || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  Geometry g;
  for (size_t i = 0; i < sp; ++i) {
    const size_t j = 3 - sp + i;
    g.in[j] = x.dim(static_cast<int64_t>(i) + 2);
    g.out[j] = y_shape[i + 2];
    g.kernel[j] = w.dim(static_cast<int64_t>(i) + 2);
    g.stride[j] = strides[i];
    g.dilation[j] = dilations[i];
    if (derived) {
      const int64_t total =
          std::max<int64_t>(0, strides[i] * (g.in[j] - 1) + output_padding[i] +
                                   (g.kernel[j] - 1) * dilations[i] + 1 - g.out[j]);
      g.pad[j] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "NOTSET") {
      g.pad[j] = pads[i];
    }
  }
  return g;
}

// Adds col into channels [begin, end) of y. col holds the input rows [row_begin, row_end) (a
// row = one (id, ih) pair, g.in[2] positions): one col row per (channel, kernel offset), one
// col column per input position in those rows.
void col2im(const Geometry& g, const float* col, int64_t row_begin, int64_t row_end, int64_t begin,
            int64_t end, float* y) {
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t width = (row_end - row_begin) * g.in[2];
  const int64_t ovol = g.out[0] * g.out[1] * g.out[2];
  for (int64_t m = begin; m < end; ++m) {
    float* ym = y + m * ovol;
    for (int64_t kidx = 0; kidx < kvol; ++kidx) {
      const int64_t kd = kidx / (g.kernel[1] * g.kernel[2]);
      const int64_t kh = kidx / g.kernel[2] % g.kernel[1];
      const int64_t kw = kidx % g.kernel[2];
      const float* src = col + (m * kvol + kidx) * width;
      const int64_t off_w = kw * g.dilation[2] - g.pad[2];
      auto [wlo, whi] = valid_range(g.in[2], g.out[2], g.stride[2], off_w);
      for (int64_t row = row_begin; row < row_end; ++row, src += g.in[2]) {
        const int64_t id = row / g.in[1], ih = row % g.in[1];
        const int64_t od = id * g.stride[0] - g.pad[0] + kd * g.dilation[0];
        const int64_t oh = ih * g.stride[1] - g.pad[1] + kh * g.dilation[1];
        if (od < 0 || od >= g.out[0] || oh < 0 || oh >= g.out[1]) continue;
        float* yrow = ym + (od * g.out[1] + oh) * g.out[2];
        for (int64_t iw = wlo; iw < whi; ++iw) yrow[iw * g.stride[2] + off_w] += src[iw];
      }
    }
  }
}

// Upper bound of the col buffer: it is built a block of input rows at a time.
constexpr int64_t kColBytes = 16 << 20;

void run_conv_transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.optional_input(2);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const int64_t group = ctx.node.attr_int("group", 1);
  const Geometry g = transpose_geometry(ctx.node, x, w, y.shape());
  const int64_t batch = x.dim(0), c_in = x.dim(1), c_out = y.dim(1);
  const int64_t cg = c_in / group, mg = c_out / group;
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t ivol = g.in[0] * g.in[1] * g.in[2], ovol = g.out[0] * g.out[1] * g.out[2];
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  float* yp = y.data<float>();
  if (b) {
    const float* bp = b->data<float>();
    for (int64_t p = 0; p < batch * c_out; ++p)
      std::fill(yp + p * ovol, yp + (p + 1) * ovol, bp[p % c_out]);
  }
  const int64_t in_rows = g.in[0] * g.in[1];
  const int64_t row_bytes = mg * kvol * g.in[2] * static_cast<int64_t>(sizeof(float));
  const int64_t block = std::clamp<int64_t>(kColBytes / std::max<int64_t>(row_bytes, 1), 1,
                                            std::max<int64_t>(in_rows, 1));
  std::unique_ptr<float[]> col(new float[mg * kvol * block * g.in[2]]);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t grp = 0; grp < group; ++grp) {
      const float* xg = xp + (n * c_in + grp * cg) * ivol;
      const float* wg = wp + grp * cg * mg * kvol;
      float* yg = yp + (n * c_out + grp * mg) * ovol;
      for (int64_t r0 = 0; r0 < in_rows; r0 += block) {
        const int64_t r1 = std::min(in_rows, r0 + block);
        const int64_t width = (r1 - r0) * g.in[2];
        sgemm(true, false, mg * kvol, width, cg, 1.f, wg, mg * kvol, xg + r0 * g.in[2], ivol, 0.f,
              col.get(), width);
        // Each output channel is written by one task only.
        ctx.pool.parallel_for(
            mg, std::max<int64_t>(1, 16384 / std::max<int64_t>(kvol * width, 1)),
            [&](int64_t begin, int64_t end) { col2im(g, col.get(), r0, r1, begin, end, yg); });
      }
    }
}

std::string conv_transpose_support(const NodeSignature& sig) {
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (sig.inputs[i].dtype != DType::Float32 && sig.inputs[i].dtype != DType::Undefined)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(sig.inputs[i].dtype) +
             "; the CPU kernel supports float32";
  if (sig.inputs[0].has_shape && sig.inputs[0].dims.size() > 5)
    return "only 1-D, 2-D and 3-D transposed convolutions are supported";
  return "";
}

}  // namespace

void register_cpu_conv_transpose(KernelRegistry& r) {
  r.add("ConvTranspose", conv_transpose_support, run_conv_transpose);
}

}  // namespace quilt::cpu
