// CPU kernels of the detection op family: NonMaxSuppression, AffineGrid, CenterCropPad and Col2Im
// here; GridSample and RoiAlign beside this file.
//
// Arithmetic follows onnxruntime (the reference the tests compare with): AffineGrid computes in
// the input's float type in the same order, float16 in float32.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/detection_common.hpp"
#include "core/ops/detection_nms.hpp"

namespace quilt::cpu {

void register_cpu_grid_sample(KernelRegistry& r);
void register_cpu_roi_align(KernelRegistry& r);

namespace {
// ---- NonMaxSuppression ----

void run_nms(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  const NmsParams p =
      nms_params(ctx.node, ctx.optional_input(2), ctx.optional_input(3), ctx.optional_input(4));
  const auto selected = non_max_suppression(boxes.data<float>(), scores.data<float>(), boxes.dim(0),
                                            scores.dim(1), boxes.dim(1), p);
  Tensor& y = ctx.output(0);
  if (y.dim(0) != static_cast<int64_t>(selected.size()))
    ctx.node.fail("selected " + std::to_string(selected.size()) + " boxes but inference said " +
                      std::to_string(y.dim(0)),
                  ErrorCode::Runtime);
  int64_t* out = y.data<int64_t>();
  for (const auto& s : selected) out = std::copy(s.begin(), s.end(), out);
}

std::string nms_support(const NodeSignature& sig) {
  for (size_t i = 0; i < 2 && i < sig.inputs.size(); ++i) {
    const DType d = sig.inputs[i].dtype;
    if (d != DType::Float32 && d != DType::Undefined)
      return std::string(i == 0 ? "boxes" : "scores") + " is " + dtype_name(d) +
             "; the CPU kernel supports float32";
  }
  return "";
}

// ---- AffineGrid ----

// Normalised position of pixel i of n along one axis.
template <class T>
T base_coord(int64_t i, int64_t n, bool align_corners) {
  if (align_corners) return T(-1) + static_cast<T>(2 * i) / static_cast<T>(n - 1);
  return static_cast<T>(2 * i + 1) / static_cast<T>(n) - T(1);
}

template <class T>
void affine_grid(const T* theta, const std::vector<int64_t>& y_shape, bool align_corners, T* y) {
  const bool is_3d = y_shape.size() == 5;
  const int64_t n_batch = y_shape[0];
  const int64_t d_n = is_3d ? y_shape[1] : 1, h_n = y_shape[y_shape.size() - 3],
                w_n = y_shape[y_shape.size() - 2];
  std::vector<T> xs(static_cast<size_t>(w_n)), ys(static_cast<size_t>(h_n)),
      zs(static_cast<size_t>(d_n));
  for (int64_t i = 0; i < w_n; ++i)
    xs[static_cast<size_t>(i)] = base_coord<T>(i, w_n, align_corners);
  for (int64_t i = 0; i < h_n; ++i)
    ys[static_cast<size_t>(i)] = base_coord<T>(i, h_n, align_corners);
  for (int64_t i = 0; i < d_n; ++i)
    zs[static_cast<size_t>(i)] = base_coord<T>(i, d_n, align_corners);
  for (int64_t n = 0; n < n_batch; ++n) {
    if (is_3d) {
      const T* t = theta + n * 12;
      for (T z : zs)
        for (T yv : ys)
          for (T x : xs)
            for (int r = 0; r < 3; ++r)
              *y++ = t[r * 4] * x + t[r * 4 + 1] * yv + t[r * 4 + 2] * z + t[r * 4 + 3];
    } else {
      const T* t = theta + n * 6;
      for (T yv : ys)
        for (T x : xs)
          for (int r = 0; r < 2; ++r) *y++ = t[r * 3] * x + t[r * 3 + 1] * yv + t[r * 3 + 2];
    }
  }
}

void run_affine_grid(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  const bool align = ctx.node.attr_int("align_corners", 0) != 0;
  Tensor& y = ctx.output(0);
  const auto& shape = y.shape();
  if (align)
    for (size_t d = 1; d + 1 < shape.size(); ++d)
      if (shape[d] == 1)
        // onnxruntime, PyTorch and the ONNX reference disagree on where a lone pixel sits.
        ctx.node.fail("align_corners=1 with a spatial size of 1 is ambiguous and not supported",
                      ErrorCode::NotImplemented);
  switch (theta.dtype()) {
    case DType::Float32:
      return affine_grid(theta.data<float>(), shape, align, y.data<float>());
    case DType::Float64:
      return affine_grid(theta.data<double>(), shape, align, y.data<double>());
    default: {
      std::vector<float> out(static_cast<size_t>(y.numel()));
      affine_grid(widened<float>(theta).data(), shape, align, out.data());
      store_half(out, y);
    }
  }
}

std::string affine_grid_support(const NodeSignature& sig) {
  std::string reason = float_types_support(sig, 0, "theta");
  if (!reason.empty()) return reason;
  const Tensor* size = sig.constants.size() > 1 ? sig.constants[1] : nullptr;
  if (size && sig.node.attr_int("align_corners", 0) != 0 && size->dtype() == DType::Int64)
    for (int64_t i = 2; i < size->numel(); ++i)
      if (size->data<int64_t>()[i] == 1)
        return "align_corners=1 with a spatial size of 1 is ambiguous (onnxruntime, PyTorch and "
               "the ONNX reference disagree)";
  return "";
}

// ---- CenterCropPad ----

// Copies the overlap of x and y along every axis: axis d of y starts `starts[d]` elements into
// the input (a crop, > 0) or into the output (a pad, < 0). Recursive over axes; the innermost
// axis is one memcpy.
void copy_centered(const char* src, const int64_t* src_shape, char* dst, const int64_t* dst_shape,
                   const int64_t* starts, size_t rank, size_t esize) {
  int64_t src_inner = 1, dst_inner = 1;
  for (size_t d = 1; d < rank; ++d) {
    src_inner *= src_shape[d];
    dst_inner *= dst_shape[d];
  }
  const int64_t len = std::min(src_shape[0], dst_shape[0]);
  const int64_t s0 = std::max<int64_t>(starts[0], 0), d0 = std::max<int64_t>(-starts[0], 0);
  if (rank == 1) {
    if (len > 0)
      std::memcpy(dst + static_cast<size_t>(d0) * esize, src + static_cast<size_t>(s0) * esize,
                  static_cast<size_t>(len) * esize);
    return;
  }
  for (int64_t i = 0; i < len; ++i)
    copy_centered(src + static_cast<size_t>((s0 + i) * src_inner) * esize, src_shape + 1,
                  dst + static_cast<size_t>((d0 + i) * dst_inner) * esize, dst_shape + 1,
                  starts + 1, rank - 1, esize);
}

void run_center_crop_pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);  // zero-filled: the padding
  if (y.numel() == 0 || x.numel() == 0) return;
  const size_t esize = dtype_size(x.dtype());
  if (x.rank() == 0) {
    std::memcpy(y.raw_data(), x.raw_data(), esize);
    return;
  }
  std::vector<int64_t> starts(static_cast<size_t>(x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d) {
    // Crops start rounded down; pads put the odd extra element at the end.
    const int64_t in = x.dim(d), out = y.dim(d);
    starts[static_cast<size_t>(d)] = out < in ? (in - out) / 2 : -((out - in) / 2);
  }
  copy_centered(static_cast<const char*>(x.raw_data()), x.shape().data(),
                static_cast<char*>(y.raw_data()), y.shape().data(), starts.data(),
                static_cast<size_t>(x.rank()), esize);
}

// ---- Col2Im ----

template <class T>
void col2im(const Node& node, const T* x, const std::vector<int64_t>& x_shape, const int64_t* image,
            const int64_t* block, T* y, const std::vector<int64_t>& y_shape,
            const ThreadPool& pool) {
  const size_t sp = y_shape.size() - 2;
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> blocks(sp);
  int64_t block_size = 1, image_size = 1;
  for (size_t i = 0; i < sp; ++i) {
    const int64_t span = dilations[i] * (block[i] - 1) + 1;
    blocks[i] = (image[i] + pads[i] + pads[i + sp] - span) / strides[i] + 1;
    block_size *= block[i];
    image_size *= image[i];
  }
  const int64_t num_blocks = x_shape[2];
  const int64_t planes = y_shape[0] * y_shape[1];
  pool.parallel_for(planes,
                    std::max<int64_t>(1, 8192 / std::max<int64_t>(1, block_size * num_blocks)),
                    [&](int64_t begin, int64_t end) {
                      std::vector<int64_t> k(sp), b(sp);
                      for (int64_t plane = begin; plane < end; ++plane) {
                        const T* src = x + plane * block_size * num_blocks;
                        T* dst = y + plane * image_size;
                        std::fill(k.begin(), k.end(), 0);
                        for (int64_t kk = 0; kk < block_size; ++kk) {
                          std::fill(b.begin(), b.end(), 0);
                          for (int64_t bb = 0; bb < num_blocks; ++bb, ++src) {
                            int64_t off = 0;
                            bool inside = true;
                            for (size_t i = 0; i < sp; ++i) {
                              const int64_t pos = b[i] * strides[i] - pads[i] + k[i] * dilations[i];
                              if (pos < 0 || pos >= image[i]) {
                                inside = false;
                                break;
                              }
                              off = off * image[i] + pos;
                            }
                            if (inside) dst[off] += *src;
                            for (size_t i = sp; i-- > 0;) {
                              if (++b[i] < blocks[i]) break;
                              b[i] = 0;
                            }
                          }
                          for (size_t i = sp; i-- > 0;) {
                            if (++k[i] < block[i]) break;
                            k[i] = 0;
                          }
                        }
                      }
                    });
}

void run_col2im(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto image = ctx.input(1);
  const auto block = ctx.input(2);
  std::vector<int64_t> image_v(static_cast<size_t>(image.numel())),
      block_v(static_cast<size_t>(block.numel()));
  for (size_t i = 0; i < image_v.size(); ++i) image_v[i] = image.data<int64_t>()[i];
  for (size_t i = 0; i < block_v.size(); ++i) block_v[i] = block.data<int64_t>()[i];
  Tensor& y = ctx.output(0);
  visit_dtype(x.dtype(), NumericTypes{}, [&](auto t) {
    using T = decltype(t);
    col2im<T>(ctx.node, x.data<T>(), x.shape(), image_v.data(), block_v.data(), y.data<T>(),
              y.shape(), ctx.pool);
  });
}

std::string col2im_support(const NodeSignature& sig) {
  const DType d = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
  const auto numeric = dtypes_of(NumericTypes{});
  if (d != DType::Undefined && std::find(numeric.begin(), numeric.end(), d) == numeric.end())
    return std::string("input is ") + dtype_name(d) +
           "; the CPU kernel supports float32, float64 and the integer types";
  for (size_t i = 1; i < 3 && i < sig.inputs.size(); ++i)
    if (sig.inputs[i].dtype != DType::Int64 && sig.inputs[i].dtype != DType::Undefined)
      return std::string(i == 1 ? "image_shape" : "block_shape") + " is " +
             dtype_name(sig.inputs[i].dtype) + ", expected int64";
  return "";
}

}  // namespace

void register_cpu_detection(KernelRegistry& r) {
  r.add("NonMaxSuppression", nms_support, run_nms);
  r.add("AffineGrid", affine_grid_support, run_affine_grid);
  r.add("CenterCropPad", any_dtype(), run_center_crop_pad);
  r.add("Col2Im", col2im_support, run_col2im);
  register_cpu_grid_sample(r);
  register_cpu_roi_align(r);
}

}  // namespace quilt::cpu
