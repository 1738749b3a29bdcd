// The CPU DeformConv kernel (2-D): sampled columns (bilinear at the offset positions, zero
// outside the image, times the mask) and one GEMM per group, like an im2col convolution.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_misc_deform_conv(KernelRegistry& r);

namespace {

// c (m x n) = a (m x k) * b (k x n).
void gemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  if (m && n && k) sgemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
void gemm(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c) {
  for (int64_t i = 0; i < m; ++i) {
    double* cr = c + i * n;
    std::fill(cr, cr + n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      for (int64_t j = 0; j < n; ++j) cr[j] += av * b[p * n + j];
    }
  }
}

template <class T>
T bilinear(const T* img, int64_t height, int64_t width, double h, double w) {
  const double h0f = std::floor(h), w0f = std::floor(w);
  const auto h0 = static_cast<int64_t>(h0f), w0 = static_cast<int64_t>(w0f);
  const double lh = h - h0f, lw = w - w0f;
  double acc = 0;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const int64_t y = h0 + dy, x = w0 + dx;
      if (y < 0 || y >= height || x < 0 || x >= width) continue;
      const double weight = (dy ? lh : 1.0 - lh) * (dx ? lw : 1.0 - lw);
      if (weight != 0.0) acc += weight * static_cast<double>(img[y * width + x]);
    }
  return static_cast<T>(acc);
}

template <class T>
void deform_conv(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* mask = ctx.optional_input(4);
  Tensor& y = ctx.output(0);
  // Every shape the loops index by, checked against the others (shape inference checks what it
  // knows at load; a kernel_shape that disagrees with W, or an offset of another batch, read
  // past the offsets here before).
  const auto fail = [&](const std::string& what) { node.fail(what, ErrorCode::InvalidArgument); };
  if (x.rank() != 4 || w.rank() != 4 || offset.rank() != 4 || y.rank() != 4)
    fail("X " + to_string(x.shape()) + ", W " + to_string(w.shape()) + " and offset " +
         to_string(offset.shape()) + " must be rank 4");
  const int64_t n = x.dim(0), c = x.dim(1), ih = x.dim(2), iw = x.dim(3);
  const int64_t oc = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t oh = y.dim(2), ow = y.dim(3);
  const int64_t group = node.attr_int("group", 1), og = node.attr_int("offset_group", 1);
  const auto pads = node.attr_ints("pads", {0, 0, 0, 0});
  const auto strides = node.attr_ints("strides", {1, 1});
  const auto dil = node.attr_ints("dilations", {1, 1});
  if (pads.size() != 4 || strides.size() != 2 || dil.size() != 2)
    fail("pads " + to_string(pads) + ", strides " + to_string(strides) + " and dilations " +
         to_string(dil) + ": expected 4, 2 and 2 values");
  if (group < 1 || og < 1 || c % group != 0 || c % og != 0 || oc % group != 0 ||
      w.dim(1) * group != c)
    fail("X has " + std::to_string(c) + " channels, W " + to_string(w.shape()) + ", group " +
         std::to_string(group) + ", offset_group " + std::to_string(og) +
         ": expected C = W[1] * group, W[0] divisible by group, C divisible by offset_group");
  const int64_t cg = c / group, ocg = oc / group, c_per_og = c / og;
  const int64_t taps = kh * kw, plane = oh * ow;
  if (y.dim(0) != n || y.dim(1) != oc)
    fail("Y has shape " + to_string(y.shape()) + ", expected [" + std::to_string(n) + ", " +
         std::to_string(oc) + ", ...]");
  const auto expect = [&](const Tensor& t, const std::vector<int64_t>& dims, const char* what) {
    if (t.shape() != dims)
      fail(std::string(what) + " has shape " + to_string(t.shape()) + ", expected " +
           to_string(dims) + " (W's kernel " + std::to_string(kh) + "x" + std::to_string(kw) +
           ", offset_group " + std::to_string(og) + ")");
  };
  expect(offset, {n, og * taps * 2, oh, ow}, "offset");
  if (mask) expect(*mask, {n, og * taps, oh, ow}, "mask");
  if (bias) expect(*bias, {oc}, "B");
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* po = offset.data<T>();
  const T* pm = mask ? mask->data<T>() : nullptr;
  T* py = y.data<T>();
  ctx.pool.parallel_for(n * group, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> cols(static_cast<size_t>(cg * taps * plane));
    for (int64_t ng = begin; ng < end; ++ng) {
      const int64_t b = ng / group, g = ng % group;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ch = g * cg + ci, off_group = ch / c_per_og;
        const T* img = px + (b * c + ch) * ih * iw;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t tap = i * kw + j;
            const T* off_h = po + ((b * og + off_group) * taps * 2 + tap * 2) * plane;
            const T* off_w = off_h + plane;
            const T* m = pm ? pm + ((b * og + off_group) * taps + tap) * plane : nullptr;
            T* col = cols.data() + (ci * taps + tap) * plane;
            for (int64_t r = 0; r < oh; ++r)
              for (int64_t s = 0; s < ow; ++s) {
                const int64_t p = r * ow + s;
                const double hh = static_cast<double>(r * strides[0] - pads[0] + i * dil[0]) +
                                  static_cast<double>(off_h[p]);
                const double ww = static_cast<double>(s * strides[1] - pads[1] + j * dil[1]) +
                                  static_cast<double>(off_w[p]);
                T v = bilinear(img, ih, iw, hh, ww);
                col[p] = m ? static_cast<T>(v * m[p]) : v;
              }
          }
      }
      T* out = py + (b * oc + g * ocg) * plane;
      gemm(ocg, plane, cg * taps, pw + g * ocg * cg * taps, cols.data(), out);
      if (bias)
        for (int64_t o = 0; o < ocg; ++o)
          for (int64_t p = 0; p < plane; ++p) out[o * plane + p] += bias->data<T>()[g * ocg + o];
    }
  });
}

}  // namespace

void register_cpu_misc_deform_conv(KernelRegistry& r) {
  r.add(
      "DeformConv",
      [](const NodeSignature& sig) -> std::string {
        const auto& x = sig.inputs[0];
        if (x.dtype != DType::Float32 && x.dtype != DType::Float64)
          return std::string("input is ") + dtype_name(x.dtype) +
                 "; the CPU kernel supports float32 and float64";
        if (x.has_shape && x.dims.size() != 4) return "only 2-D DeformConv (rank-4 X) is supported";
        return "";
      },
      [](KernelContext& ctx) {
        if (ctx.input(0).dtype() == DType::Float64)
          deform_conv<double>(ctx);
        else
          deform_conv<float>(ctx);
      });
}

}  // namespace quilt::cpu
