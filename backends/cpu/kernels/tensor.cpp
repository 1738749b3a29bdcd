// CPU kernels of the tensor op family. They work on bytes (element size from dtype_size), so
// every dtype is supported. Reshape-like ops return views; Transpose and DepthToSpace/
// SpaceToDepth are one strided copy each (tensor_copy.cpp). Concat, Split, Slice, Expand, Tile and
// Pad are in tensor_select.cpp, indexing ops in tensor_index.cpp, generators in tensor_make.cpp.
#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>

#include <random>

#include "backends/cpu/kernel.hpp"
#include "core/float8.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

std::array<uint8_t, 8> scalar_bytes(DType dtype, double value);
void copy_strided(KernelContext& ctx, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, int64_t base);
void register_cpu_tensor_index(KernelRegistry& r);
void register_cpu_tensor_select(KernelRegistry& r);
void register_cpu_tensor_make(KernelRegistry& r);

namespace {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

void view_of_input(KernelContext& ctx) {
  ctx.set_output(0, ctx.input(0).reshaped(ctx.output_shape(0)));
}

// ---- Dropout ----

// Training mode (opset 12+, input 2 true) drops each element with probability `ratio` (input 1,
// default 0.5) and scales the kept ones by 1 / (1 - ratio), as onnx's reference does: mask =
// uniform(0, 1) >= ratio, y = x * mask / (1 - ratio). The draws come from a generator seeded by
// the `seed` attribute when there is one (the same mask on every run), else from the system's
// entropy. Before opset 7, is_test = 0 (the default) asked for the same; that is refused.
bool is_true(const Tensor& t) {
  return t.dtype() == DType::Bool && t.numel() == 1 && t.data<bool>()[0];
}
double ratio_of(const Tensor& t) {
  if (t.numel() != 1) return -1;
  switch (t.dtype()) {
    case DType::Float32:
      return t.data<float>()[0];
    case DType::Float64:
      return t.data<double>()[0];
    case DType::Float16:
      return half_to_float(t.data<uint16_t>()[0]);
    default:
      return -1;
  }
}

std::string dropout_support(const NodeSignature& sig) {
  const Node& n = sig.node;
  if (n.opset < 7 && n.attr_int("is_test", 0) == 0)
    return "is_test=0 asks for training-mode dropout (opset < 7); set is_test=1, or use opset 12+ "
           "whose training_mode input the CPU kernel supports";
  return "";
}

// y = x * mask / (1 - ratio) for float x (float32, float64, float16, bfloat16); mask written
// when wanted.
void dropout_training(KernelContext& ctx, double ratio) {
  const Tensor& x = ctx.input(0);
  const DType d = x.dtype();
  if (d != DType::Float32 && d != DType::Float64 && d != DType::Float16 && d != DType::BFloat16)
    ctx.node.fail(std::string("training-mode dropout needs a float input, got ") + dtype_name(d),
                  ErrorCode::NotImplemented);
  if (!(ratio >= 0 && ratio < 1))
    ctx.node.fail("ratio is " + std::to_string(ratio) + ", expected a value in [0, 1)");
  std::mt19937_64 gen;
  if (ctx.node.has_attr("seed")) {
    gen.seed(static_cast<uint64_t>(ctx.node.attr_int("seed", 0)));
  } else {
    std::random_device rd;
    gen.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
  }
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int64_t n = x.numel();
  std::vector<uint8_t> keep(static_cast<size_t>(n));
  for (auto& k : keep) k = uniform(gen) >= ratio;
  const double scale = 1.0 / (1.0 - ratio);
  Tensor& y = ctx.output_uninitialized(0);
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = keep[static_cast<size_t>(i)];
    switch (d) {
      case DType::Float32:
        y.data<float>()[i] = kept ? static_cast<float>(x.data<float>()[i] * scale) : 0.f;
        break;
      case DType::Float64:
        y.data<double>()[i] = kept ? x.data<double>()[i] * scale : 0.0;
        break;
      case DType::Float16:
        y.data<uint16_t>()[i] = float_to_half(
            kept ? static_cast<float>(half_to_float(x.data<uint16_t>()[i]) * scale) : 0.f);
        break;
      default:
        y.data<uint16_t>()[i] = float_to_bfloat16(
            kept ? static_cast<float>(bfloat16_to_float(x.data<uint16_t>()[i]) * scale) : 0.f);
        break;
    }
  }
  if (ctx.wants_output(1)) {
    Tensor& mask = ctx.output_uninitialized(1);
    for (int64_t i = 0; i < n; ++i) mask.data<bool>()[i] = keep[static_cast<size_t>(i)];
  }
}

void dropout(KernelContext& ctx) {
  if (const Tensor* training = ctx.optional_input(2);
      ctx.node.opset >= 12 && training && is_true(*training)) {
    const Tensor* ratio = ctx.optional_input(1);
    const double r = ratio ? ratio_of(*ratio) : 0.5;
    if (r != 0) return dropout_training(ctx, r);
  }
  ctx.set_output(0, ctx.input(0));
  if (ctx.wants_output(1)) {
    Tensor& mask = ctx.output(1);
    const size_t es = dtype_size(mask.dtype());
    const auto one = scalar_bytes(mask.dtype(), 1.0);
    auto* p = static_cast<uint8_t*>(mask.raw_data());
    for (int64_t i = 0; i < mask.numel(); ++i) std::memcpy(p + i * es, one.data(), es);
  }
}

// ---- Transpose, DepthToSpace, SpaceToDepth ----

void transpose(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const auto rank = static_cast<size_t>(in.rank());
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = ctx.node.attr_ints("perm", perm);
  const auto in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t p = perm[i] < 0 ? perm[i] + static_cast<int64_t>(rank) : perm[i];
    strides[i] = in_strides[static_cast<size_t>(p)];
  }
  copy_strided(ctx, ctx.output_shape(0), strides, 0);
}

void depth_to_space(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int64_t b = ctx.node.attr_int("blocksize", 1);
  const int64_t n = in.dim(0), c = in.dim(1) / (b * b), h = in.dim(2), w = in.dim(3);
  const int64_t hw = h * w;
  // Output viewed as [N, C', H, b1, W, b2]; where b1, b2, C' sit in the input depends on mode.
  int64_t sb1, sb2, sc;
  if (ctx.node.attr_string("mode", "DCR") == "DCR") {
    sc = hw, sb2 = c * hw, sb1 = b * c * hw;
  } else {
    sb2 = hw, sb1 = b * hw, sc = b * b * hw;
  }
  copy_strided(ctx, {n, c, h, b, w, b}, {in.dim(1) * hw, sc, w, sb1, 1, sb2}, 0);
}

void space_to_depth(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int64_t b = ctx.node.attr_int("blocksize", 1);
  const int64_t n = in.dim(0), c = in.dim(1), h = in.dim(2), w = in.dim(3);
  // Input viewed as [N, C, H', b1, W', b2], output as [N, b1, b2, C, H', W'].
  copy_strided(ctx, {n, b, b, c, h / b, w / b}, {c * h * w, w, 1, h * w, b * w, b}, 0);
}

// ---- Shape, Size ----

void shape(KernelContext& ctx) {
  const auto& dims = ctx.input(0).shape();
  const auto rank = static_cast<int64_t>(dims.size());
  int64_t start = ctx.node.attr_int("start", 0);
  if (start < 0) start += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  Tensor& out = ctx.output(0);
  std::copy_n(dims.begin() + start, out.numel(), out.data<int64_t>());
}

void size(KernelContext& ctx) {
  ctx.output(0).data<int64_t>()[0] = ctx.input(0).numel();
}

}  // namespace

void register_cpu_tensor(KernelRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    r.add(op, any_dtype(), KernelFn(view_of_input));
  r.add("Dropout", dropout_support, KernelFn(dropout));
  r.add("Transpose", any_dtype(), KernelFn(transpose));
  r.add("DepthToSpace", any_dtype(), KernelFn(depth_to_space));
  r.add("SpaceToDepth", any_dtype(), KernelFn(space_to_depth));
  register_cpu_tensor_select(r);
  r.add("Shape", any_dtype(), KernelFn(shape));
  r.add("Size", any_dtype(), KernelFn(size));
  register_cpu_tensor_index(r);
  register_cpu_tensor_make(r);
}

}  // namespace quilt::cpu
