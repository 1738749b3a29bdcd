// Schemas and shape inference of the nn op family: Gemm, MatMul, Conv, ConvTranspose and the
// pools (MaxPool, AveragePool, LpPool, MaxUnpool, global pools). The output-size formulas (explicit
// pads, auto_pad, ceil_mode, output_shape) live here only; kernels read the inferred output shape
// and derive the leading pads from it.
#include <algorithm>
#include <string>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/matmul_nbits.hpp"

namespace quilt {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  return to_string(v);
}

// The window attributes shared by Conv, ConvTranspose and the pools, validated against the
// number of spatial dims. kernel is left empty when the op takes it from W.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad;
};

Window read_window(const InferenceContext& ctx, size_t spatial, bool kernel_required) {
  const Node& n = ctx.node();
  Window w;
  w.kernel = n.attr_ints("kernel_shape");
  if (kernel_required && w.kernel.empty()) ctx.fail("attribute kernel_shape is required");
  if (!w.kernel.empty() && w.kernel.size() != spatial)
    ctx.fail("kernel_shape " + ints_str(w.kernel) + " has " + std::to_string(w.kernel.size()) +
             " values, expected " + std::to_string(spatial) + " (one per spatial dim)");
  for (int64_t k : w.kernel)
    if (k <= 0) ctx.fail("kernel_shape " + ints_str(w.kernel) + " must be positive");
  w.strides = n.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  w.dilations = n.attr_ints("dilations", std::vector<int64_t>(spatial, 1));
  w.pads = n.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (w.strides.size() != spatial)
    ctx.fail("strides " + ints_str(w.strides) + " has " + std::to_string(w.strides.size()) +
             " values, expected " + std::to_string(spatial));
  if (w.dilations.size() != spatial)
    ctx.fail("dilations " + ints_str(w.dilations) + " has " + std::to_string(w.dilations.size()) +
             " values, expected " + std::to_string(spatial));
  if (w.pads.size() != 2 * spatial)
    ctx.fail("pads " + ints_str(w.pads) + " has " + std::to_string(w.pads.size()) +
             " values, expected " + std::to_string(2 * spatial) + " (begins then ends)");
  for (int64_t s : w.strides)
    if (s <= 0) ctx.fail("strides " + ints_str(w.strides) + " must be positive");
  for (int64_t d : w.dilations)
    if (d <= 0) ctx.fail("dilations " + ints_str(w.dilations) + " must be positive");
  for (int64_t p : w.pads)
    if (p < 0) ctx.fail("pads " + ints_str(w.pads) + " must be non-negative");
  w.auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && w.auto_pad != "SAME_UPPER" &&
      w.auto_pad != "SAME_LOWER")
    ctx.fail("auto_pad '" + w.auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  return w;
}

// Output size of a sliding window along one dim; -1 when the input or kernel size is unknown.
int64_t window_out(const InferenceContext& ctx, const Window& w, size_t i, int64_t in,
                   int64_t kernel, bool ceil_mode) {
  if (in < 0 || kernel < 0) return -1;
  const Checked c(ctx.node(), "output size");
  const int64_t s = w.strides[i];  // > 0, like the dilations and kernel (read_window)
  const int64_t dk = c.add(c.mul(kernel - 1, w.dilations[i]), 1);
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
    const int64_t out = c.add(in, s - 1) / s;
    // The kernels pad by (out - 1) * stride + dk - in in total: it must fit in int64 too.
    (void)c.add(c.mul(out > 0 ? out - 1 : 0, s), dk);
    return out;
  }
  const int64_t pb = w.auto_pad == "VALID" ? 0 : w.pads[i];
  const int64_t pe = w.auto_pad == "VALID" ? 0 : w.pads[i + w.strides.size()];
  const int64_t pads = c.add(pb, pe);
  const int64_t span = c.sub(c.add(in, pads), dk);
  if (span < 0)
    ctx.fail("spatial dim " + std::to_string(i) + " is " + std::to_string(in) + " (+" +
             std::to_string(pads) + " padding), smaller than the dilated kernel size " +
             std::to_string(dk));
  int64_t out = c.add(ceil_mode ? c.add(span, s - 1) / s : span / s, 1);
  // A window that would start entirely in the end padding is dropped.
  if (ceil_mode && c.mul(out - 1, s) >= c.add(in, pb)) --out;
  return out;
}

// Inputs [1, last] must have input 0's dtype (T in the spec) when both are known.
void check_same_dtype(const InferenceContext& ctx, size_t last) {
  const DType t = ctx.input_dtype(0);
  for (size_t i = 1; i <= last && i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const DType d = ctx.input_dtype(i);
    if (t != DType::Undefined && d != DType::Undefined && d != t)
      ctx.fail("input " + std::to_string(i) + " '" + ctx.node().inputs[i] + "' has dtype " +
               dtype_name(d) + ", expected " + dtype_name(t) + " like input 0");
  }
}

// ---- Conv ----

// Conv, and ConvInteger (int8/uint8 X and W, inputs 2 and 3 are zero points, int32 output).
void infer_conv(InferenceContext& ctx) {
  const bool integer = ctx.node().op_type == "ConvInteger";
  if (integer) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const DType d = ctx.input_dtype(i);
      if (d != DType::Int8 && d != DType::UInt8 && d != DType::Undefined)
        ctx.fail("input " + std::to_string(i) + " has dtype " + dtype_name(d) +
                 ", expected int8 or uint8");
    }
  } else {
    check_same_dtype(ctx, 2);
  }
  const auto& x = ctx.input_shape(0);
  const auto& wt = ctx.input_shape(1);
  if (x.size() < 3)
    ctx.fail("input X has shape " + ints_str(x) + ", expected rank >= 3 (N, C, spatial...)");
  if (wt.size() != x.size())
    ctx.fail("weight W has shape " + ints_str(wt) + ", expected rank " + std::to_string(x.size()) +
             " like X " + ints_str(x));
  const size_t sp = x.size() - 2;
  Window w = read_window(ctx, sp, false);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (group <= 0) ctx.fail("group " + std::to_string(group) + " must be positive");
  const int64_t channels = wt[1] >= 0 ? Checked(ctx.node(), "channel count").mul(wt[1], group) : -1;
  if (x[1] >= 0 && channels >= 0 && x[1] != channels)
    ctx.fail("X has " + std::to_string(x[1]) + " channels but W " + ints_str(wt) + " with group " +
             std::to_string(group) + " expects " + std::to_string(channels));
  if (wt[0] >= 0 && wt[0] % group != 0)
    ctx.fail("W has " + std::to_string(wt[0]) + " output channels, not divisible by group " +
             std::to_string(group));
  if (ctx.has_input(2) && !integer) {
    const auto& b = ctx.input_shape(2);
    if (b.size() != 1 || (b[0] >= 0 && wt[0] >= 0 && b[0] != wt[0]))
      ctx.fail("bias B has shape " + ints_str(b) + ", expected [" + std::to_string(wt[0]) + "]");
  }
  std::vector<int64_t> out = {x[0], wt[0]};
  for (size_t i = 0; i < sp; ++i) {
    int64_t k = wt[i + 2];
    // A window of size 0 (W [1, 1, 0, 3] and no kernel_shape): the CPU depthwise kernel indexed
    // its empty tap list (fuzz_run, UBSan).
    if (k == 0)
      ctx.fail("W " + ints_str(wt) + " has a spatial dim of 0: each window dim must be at least 1");
    if (!w.kernel.empty()) {
      if (k >= 0 && k != w.kernel[i])
        ctx.fail("kernel_shape " + ints_str(w.kernel) + " does not match W " + ints_str(wt));
      k = w.kernel[i];
    }
    out.push_back(window_out(ctx, w, i, x[i + 2], k, false));
  }
  ctx.set_output(0, integer ? DType::Int32 : ctx.input_dtype(0), out);
}

// ---- ConvTranspose ----

void infer_conv_transpose(InferenceContext& ctx) {
  check_same_dtype(ctx, 2);
  const auto& x = ctx.input_shape(0);
  const auto& wt = ctx.input_shape(1);
  if (x.size() < 3)
    ctx.fail("input X has shape " + ints_str(x) + ", expected rank >= 3 (N, C, spatial...)");
  if (wt.size() != x.size())
    ctx.fail("weight W has shape " + ints_str(wt) + ", expected rank " + std::to_string(x.size()) +
             " like X " + ints_str(x));
  const size_t sp = x.size() - 2;
  Window w = read_window(ctx, sp, false);
  const Node& n = ctx.node();
  const int64_t group = n.attr_int("group", 1);
  if (group <= 0) ctx.fail("group " + std::to_string(group) + " must be positive");
  if (x[1] >= 0 && wt[0] >= 0 && x[1] != wt[0])
    ctx.fail("X has " + std::to_string(x[1]) + " channels but W " + ints_str(wt) + " expects " +
             std::to_string(wt[0]));
  if (wt[0] >= 0 && wt[0] % group != 0)
    ctx.fail("W has " + std::to_string(wt[0]) + " input channels, not divisible by group " +
             std::to_string(group));
  const int64_t m = wt[1] >= 0 ? Checked(n, "output channel count").mul(wt[1], group) : -1;
  if (ctx.has_input(2)) {
    const auto& b = ctx.input_shape(2);
    if (b.size() != 1 || (b[0] >= 0 && m >= 0 && b[0] != m))
      ctx.fail("bias B has shape " + ints_str(b) + ", expected [" + std::to_string(m) + "]");
  }
  auto output_padding = n.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  if (output_padding.size() != sp)
    ctx.fail("output_padding " + ints_str(output_padding) + " has " +
             std::to_string(output_padding.size()) + " values, expected " + std::to_string(sp));
  auto output_shape = n.attr_ints("output_shape");
  // Some exporters write the full (N, C, spatial...) shape; the spec wants the spatial dims.
  if (output_shape.size() == sp + 2)
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != sp)
    ctx.fail("output_shape " + ints_str(n.attr_ints("output_shape")) + " has " +
             std::to_string(output_shape.size()) + " values, expected " + std::to_string(sp));
  std::vector<int64_t> out = {x[0], m};
  for (size_t i = 0; i < sp; ++i) {
    int64_t k = w.kernel.empty() ? wt[i + 2] : w.kernel[i];
    if (!w.kernel.empty() && wt[i + 2] >= 0 && wt[i + 2] != k)
      ctx.fail("kernel_shape " + ints_str(w.kernel) + " does not match W " + ints_str(wt));
    if (output_padding[i] < 0 || output_padding[i] >= std::max(w.strides[i], w.dilations[i]))
      ctx.fail("output_padding " + ints_str(output_padding) +
               " must be non-negative and smaller than the stride or dilation");
    const int64_t in = x[i + 2];
    int64_t o = -1;
    if (!output_shape.empty()) {
      o = output_shape[i];
    } else if (in >= 0 && k >= 0) {
      const Checked c(n, "output size");
      // stride * (in - 1) + output_padding + the dilated kernel
      const int64_t dk = c.add(c.mul(k - 1, w.dilations[i]), 1);
      const int64_t full = c.add(c.add(c.mul(w.strides[i], in - 1), output_padding[i]), dk);
      if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
        // As onnx's shape inference (and onnxruntime) size it: in * stride + output_padding,
        // except that a kernel smaller than the stride is never padded negatively.
        o = c.sub(full, std::max<int64_t>(0, c.sub(dk, w.strides[i])));
      } else {
        o = c.sub(full, w.auto_pad == "VALID" ? 0 : c.add(w.pads[i], w.pads[i + sp]));
      }
    }
    if (o == 0 || o < -1)
      ctx.fail("output spatial dim " + std::to_string(i) + " would be " + std::to_string(o) +
               "; expected a positive size");
    out.push_back(o);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// ---- pools ----

void check_pool_input(const InferenceContext& ctx, const std::vector<int64_t>& x) {
  if (x.size() < 3)
    ctx.fail("input X has shape " + ints_str(x) + ", expected rank >= 3 (N, C, spatial...)");
}

void infer_pool(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  check_pool_input(ctx, x);
  const size_t sp = x.size() - 2;
  Window w = read_window(ctx, sp, true);
  const int64_t ceil_mode = ctx.node().attr_int("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1)
    ctx.fail("ceil_mode " + std::to_string(ceil_mode) + " must be 0 or 1");
  // A window entirely in the padding has no value (MaxPool would give -FLT_MAX, AveragePool
  // 0/0): explicit pads must be smaller than the window's extent, (kernel - 1) * dilation + 1.
  // (onnxruntime asks for pads smaller than kernel_shape, which refuses dilated windows that
  // always reach the input.)
  if (w.auto_pad == "NOTSET")
    for (size_t i = 0; i < w.pads.size(); ++i) {
      const size_t d = i % sp;
      const Checked c(ctx.node(), "window extent");
      const int64_t extent = c.add(c.mul(w.kernel[d] - 1, w.dilations[d]), 1);
      if (w.pads[i] >= extent)
        ctx.fail("pads " + ints_str(w.pads) + ": pad " + std::to_string(w.pads[i]) +
                 " is not smaller than the window (kernel_shape " + ints_str(w.kernel) +
                 ", dilations " + ints_str(w.dilations) + "), so a window could hold only padding");
    }
  if (ctx.node().op_type == "LpPool" && ctx.node().attr_int("p", 2) <= 0)
    ctx.fail("p " + std::to_string(ctx.node().attr_int("p", 2)) + " must be positive");
  if (ctx.node().op_type == "MaxPool") {
    const int64_t order = ctx.node().attr_int("storage_order", 0);
    if (order != 0 && order != 1)
      ctx.fail("storage_order " + std::to_string(order) + " must be 0 or 1");
  }
  std::vector<int64_t> out = {x[0], x[1]};
  for (size_t i = 0; i < sp; ++i)
    out.push_back(window_out(ctx, w, i, x[i + 2], w.kernel[i], ceil_mode != 0));
  ctx.set_output(0, ctx.input_dtype(0), out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::Int64, out);
}

void infer_global_pool(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  check_pool_input(ctx, x);
  std::vector<int64_t> out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// MaxUnpool: the output is the pooled input's size, (in - 1) * stride + kernel - pads, or the
// output_shape input when given.
void infer_max_unpool(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  check_pool_input(ctx, x);
  const auto& idx = ctx.input_shape(1);
  if (ctx.input_dtype(1) != DType::Int64 && ctx.input_dtype(1) != DType::Undefined)
    ctx.fail(std::string("indices I have dtype ") + dtype_name(ctx.input_dtype(1)) +
             ", expected int64");
  bool same = idx.size() == x.size();
  for (size_t i = 0; same && i < x.size(); ++i) same = idx[i] < 0 || x[i] < 0 || idx[i] == x[i];
  if (!same)
    ctx.fail("indices I have shape " + ints_str(idx) + ", expected the shape of X " + ints_str(x));
  const size_t sp = x.size() - 2;
  Window w = read_window(ctx, sp, true);
  if (ctx.has_input(2)) {
    const auto shape = ctx.input_ints(2);
    if (!shape) {
      ctx.set_output_unknown_shape(0, ctx.input_dtype(0));
      return;
    }
    if (shape->size() != x.size())
      ctx.fail("output_shape " + ints_str(*shape) + " has " + std::to_string(shape->size()) +
               " values, expected " + std::to_string(x.size()) + " (N, C, spatial...)");
    for (size_t i = 0; i < shape->size(); ++i)
      if ((*shape)[i] < 0 || (i < 2 && x[i] >= 0 && (*shape)[i] != x[i]))
        ctx.fail("output_shape " + ints_str(*shape) + " does not match X " + ints_str(x) +
                 ": expected the same N and C and non-negative sizes");
    ctx.set_output(0, ctx.input_dtype(0), *shape);
    return;
  }
  std::vector<int64_t> out = {x[0], x[1]};
  const Checked c(ctx.node(), "output size");
  for (size_t i = 0; i < sp; ++i)
    out.push_back(x[i + 2] < 0 ? -1
                               : c.sub(c.add(c.mul(x[i + 2] - 1, w.strides[i]), w.kernel[i]),
                                       c.add(w.pads[i], w.pads[i + sp])));
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// ---- Gemm / MatMul ----

// Gemm's (M, N) from A (input a), B (input b) and the optional C (input c), with transA/transB.
std::vector<int64_t> gemm_shape(InferenceContext& ctx, size_t ai, size_t bi, size_t ci) {
  const auto& a = ctx.input_shape(ai);
  const auto& b = ctx.input_shape(bi);
  if (a.size() != 2) ctx.fail("A has shape " + ints_str(a) + ", expected a matrix (rank 2)");
  if (b.size() != 2) ctx.fail("B has shape " + ints_str(b) + ", expected a matrix (rank 2)");
  const bool ta = ctx.node().attr_int("transA", 0) != 0;
  const bool tb = ctx.node().attr_int("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (ka >= 0 && kb >= 0 && ka != kb)
    ctx.fail("A " + ints_str(a) + (ta ? " (transposed)" : "") + " and B " + ints_str(b) +
             (tb ? " (transposed)" : "") + " have inner dims " + std::to_string(ka) + " and " +
             std::to_string(kb) + ", expected equal");
  if (ctx.has_input(ci)) {
    const auto& c = ctx.input_shape(ci);
    const std::vector<int64_t> mn = {m, n};
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) {
      const int64_t want = mn[2 - c.size() + i];
      ok = c[i] == 1 || c[i] < 0 || want < 0 || c[i] == want;
    }
    if (!ok)
      ctx.fail("C has shape " + ints_str(c) +
               ", expected one that broadcasts to (M, N) = " + ints_str(mn));
  }
  return {m, n};
}

void infer_gemm(InferenceContext& ctx) {
  check_same_dtype(ctx, 2);
  ctx.set_output(0, ctx.input_dtype(0), gemm_shape(ctx, 0, 1, 2));
}

// com.microsoft QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale,
// y_zero_point): Gemm's shape; int8/uint8 of y_zero_point's type with y_scale, else float32.
void infer_qgemm(InferenceContext& ctx) {
  for (size_t i : {0, 3})
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::Undefined &&
        ctx.input_dtype(i) != DType::Int8 && ctx.input_dtype(i) != DType::UInt8)
      ctx.fail(std::string(i == 0 ? "A" : "B") + " has dtype " + dtype_name(ctx.input_dtype(i)) +
               ", expected int8 or uint8");
  if (ctx.has_input(6) && ctx.input_dtype(6) != DType::Undefined &&
      ctx.input_dtype(6) != DType::Int32)
    ctx.fail("C has dtype " + std::string(dtype_name(ctx.input_dtype(6))) + ", expected int32");
  const bool quantized = ctx.has_input(7);
  DType out = DType::Float32;
  if (quantized) out = ctx.has_input(8) ? ctx.input_dtype(8) : DType::UInt8;
  ctx.set_output(0, out, gemm_shape(ctx, 0, 3, 6));
}

// MatMul's shape; MatMulInteger (A, B of int8/uint8 with zero points) gives int32;
// com.microsoft's MatMulIntegerToFloat (int8/uint8 A and B, scales, zero points, bias) and
// DynamicQuantizeMatMul (float32 A, int8/uint8 B) give float32.
void infer_matmul(InferenceContext& ctx) {
  const std::string& op = ctx.node().op_type;
  const bool integer = op == "MatMulInteger";
  const bool dynamic = op == "DynamicQuantizeMatMul";
  const bool to_float = op == "MatMulIntegerToFloat" || dynamic;
  if (to_float) {
    auto expect = [&](size_t i, std::initializer_list<DType> allowed, const char* what) {
      if (!ctx.has_input(i) || ctx.input_dtype(i) == DType::Undefined) return;
      for (DType d : allowed)
        if (ctx.input_dtype(i) == d) return;
      ctx.fail(
          std::string(what) + " has dtype " + dtype_name(ctx.input_dtype(i)) + ", expected " +
          dtype_name(*allowed.begin()) +
          (allowed.size() > 1 ? std::string(" or ") + dtype_name(*(allowed.begin() + 1)) : ""));
    };
    expect(0,
           dynamic ? std::initializer_list<DType>{DType::Float32}
                   : std::initializer_list<DType>{DType::UInt8, DType::Int8},
           "A");
    expect(1, {DType::Int8, DType::UInt8}, "B");
    for (size_t i : dynamic ? std::vector<size_t>{2, 4} : std::vector<size_t>{2, 3, 6})
      expect(i, {DType::Float32}, i == (dynamic ? 4u : 6u) ? "bias" : "scale");
  } else if (!integer) {
    check_same_dtype(ctx, 2);
  }
  if (integer) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const DType d = ctx.input_dtype(i);
      if (d != DType::Int8 && d != DType::UInt8 && d != DType::Undefined)
        ctx.fail("input " + std::to_string(i) + " has dtype " + dtype_name(d) +
                 ", expected int8 or uint8");
    }
    for (size_t i = 2; i < 4; ++i)
      if (ctx.has_input(i) && ctx.input_dtype(i) != ctx.input_dtype(i - 2) &&
          ctx.input_dtype(i) != DType::Undefined && ctx.input_dtype(i - 2) != DType::Undefined)
        ctx.fail(std::string(i == 2 ? "a_zero_point" : "b_zero_point") + " has dtype " +
                 dtype_name(ctx.input_dtype(i)) + ", expected " +
                 dtype_name(ctx.input_dtype(i - 2)));
  }
  std::vector<int64_t> a = ctx.input_shape(0), b = ctx.input_shape(1);
  if (a.empty() || b.empty())
    ctx.fail("MatMul inputs have shapes " + ints_str(a) + " and " + ints_str(b) +
             ", expected rank >= 1");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const int64_t ka = a.back(), kb = b[b.size() - 2];
  if (ka >= 0 && kb >= 0 && ka != kb)
    ctx.fail("A " + ints_str(ctx.input_shape(0)) + " and B " + ints_str(ctx.input_shape(1)) +
             " have inner dims " + std::to_string(ka) + " and " + std::to_string(kb) +
             ", expected equal");
  std::vector<int64_t> out = broadcast_shapes(ctx, std::vector<int64_t>(a.begin(), a.end() - 2),
                                              std::vector<int64_t>(b.begin(), b.end() - 2));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  ctx.set_output(0, integer ? DType::Int32 : to_float ? DType::Float32 : ctx.input_dtype(0), out);
}

// com.microsoft MatMulNBits (core/ops/matmul_nbits.hpp): A [..., K] x B^T -> [..., N], A's type.
void infer_matmul_nbits(InferenceContext& ctx) {
  NBitsGeometry g;
  if (std::string err = nbits_geometry(ctx.node(), g); !err.empty()) ctx.fail(err);
  const DType t = ctx.input_dtype(0);
  if (t != DType::Undefined && t != DType::Float32 && t != DType::Float16)
    ctx.fail(std::string("A has dtype ") + dtype_name(t) + ", expected float32 or float16");
  if (ctx.input_has_shape(0)) {
    const std::vector<int64_t>& a = ctx.input_shape(0);
    if (a.empty() || (a.back() >= 0 && a.back() != g.k))
      ctx.fail("A has shape " + ints_str(a) +
               ", expected its last dim to be K = " + std::to_string(g.k));
  }
  if (ctx.input_dtype(1) != DType::Undefined && ctx.input_dtype(1) != DType::UInt8)
    ctx.fail(std::string("B has dtype ") + dtype_name(ctx.input_dtype(1)) + ", expected uint8");
  const std::vector<int64_t> want_b = {g.n, g.k_blocks(), g.blob()};
  if (ctx.input_has_shape(1)) {
    const std::vector<int64_t>& b = ctx.input_shape(1);
    bool same = b.size() == 3;
    for (size_t i = 0; same && i < 3; ++i) same = b[i] < 0 || b[i] == want_b[i];
    if (!same)
      ctx.fail("B has shape " + ints_str(b) + ", expected " + ints_str(want_b) +
               " (N, ceil(K / block_size), block_size * bits / 8)");
  }
  // scales, zero_points and bias: their element counts and types.
  auto check = [&](size_t i, const char* what, int64_t count, bool a_type, bool may_be_u8) {
    if (!ctx.has_input(i)) return;
    const DType d = ctx.input_dtype(i);
    const bool type_ok = d == DType::Undefined || (a_type && (t == DType::Undefined || d == t)) ||
                         (may_be_u8 && d == DType::UInt8);
    if (!type_ok)
      ctx.fail(std::string(what) + " has dtype " + dtype_name(d) + ", expected " +
               (may_be_u8 ? "uint8 or " : "") + "A's type " + dtype_name(t));
    if (d == DType::UInt8 && may_be_u8) count = g.n * g.zp_row_bytes();
    if (!ctx.input_has_shape(i)) return;
    int64_t numel = 1;
    for (int64_t dim : ctx.input_shape(i)) {
      if (dim < 0) return;
      numel *= dim;
    }
    if (numel != count)
      ctx.fail(std::string(what) + " has shape " + ints_str(ctx.input_shape(i)) + ", expected " +
               std::to_string(count) + " values");
  };
  check(2, "scales", g.n * g.k_blocks(), true, false);
  check(3, "zero_points", g.n * g.k_blocks(), true, true);
  check(5, "bias", g.n, true, false);
  if (!ctx.input_has_shape(0)) return ctx.set_output_unknown_shape(0, t);
  std::vector<int64_t> y = ctx.input_shape(0);
  y.back() = g.n;
  ctx.set_output(0, t, y);
}

}  // namespace

void register_nn_schemas(SchemaRegistry& r) {
  r.add({.op_type = "Conv", .min_inputs = 2, .max_inputs = 3, .infer = infer_conv});
  r.add({.op_type = "ConvInteger",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_conv});
  r.add({.op_type = "ConvTranspose",
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_conv_transpose});
  // Opset 1 has no Indices output; opset 8 added it (with storage_order).
  r.add({.op_type = "MaxPool", .max_opset = 7, .infer = infer_pool});
  r.add({.op_type = "MaxPool", .min_opset = 8, .max_outputs = 2, .infer = infer_pool});
  r.add({.op_type = "AveragePool", .infer = infer_pool});
  // LpPool-1 took p as a float; opset 2 made it an int.
  r.add({.op_type = "LpPool", .min_opset = 2, .infer = infer_pool});
  r.add({.op_type = "MaxUnpool",
         .min_opset = 9,
         .min_inputs = 2,
         .max_inputs = 3,
         .value_inputs = {2},
         .infer = infer_max_unpool});
  r.add({.op_type = "GlobalAveragePool", .infer = infer_global_pool});
  r.add({.op_type = "GlobalMaxPool", .infer = infer_global_pool});
  // C became optional in opset 11; before opset 7 a 'broadcast' attribute chose between an
  // exact (M, N) C and a broadcast one, which the unidirectional broadcast covers.
  r.add(
      {.op_type = "Gemm", .max_opset = 10, .min_inputs = 3, .max_inputs = 3, .infer = infer_gemm});
  r.add(
      {.op_type = "Gemm", .min_opset = 11, .min_inputs = 2, .max_inputs = 3, .infer = infer_gemm});
  r.add({.op_type = "MatMul", .min_inputs = 2, .max_inputs = 2, .infer = infer_matmul});
  r.add({.op_type = "MatMulInteger",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_matmul});
  // onnxruntime's contrib ops, as its quantizer writes them.
  r.add({.op_type = "MatMulIntegerToFloat",
         .domain = "com.microsoft",
         .min_inputs = 4,
         .max_inputs = 7,
         .infer = infer_matmul});
  r.add({.op_type = "QGemm",
         .domain = "com.microsoft",
         .min_inputs = 6,
         .max_inputs = 9,
         .infer = infer_qgemm});
  r.add({.op_type = "MatMulNBits",
         .domain = "com.microsoft",
         .min_inputs = 3,
         .max_inputs = 6,
         .infer = infer_matmul_nbits});
  r.add({.op_type = "DynamicQuantizeMatMul",
         .domain = "com.microsoft",
         .min_inputs = 3,
         .max_inputs = 5,
         .infer = infer_matmul});
}

}  // namespace quilt
