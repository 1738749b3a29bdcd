// Schemas and shape inference of the quantization op family: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, QLinearMatMul and QLinearConv; and onnxruntime's com.microsoft
// QuantizeLinear, DequantizeLinear, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu and
// QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, QLinearSoftmax, QLinearWhere,
// QLinearReduceMean and DynamicQuantizeLSTM (MatMulIntegerToFloat, DynamicQuantizeMatMul and
// MatMulNBits are with MatMul in nn.cpp). The last six take their shapes from the float op's own
// inference (AveragePool, Concat, Softmax, Where, LSTM).
//
// Element types the spec allows but Quilt's Tensor cannot hold (float4e2m1, float8e8m0, 2-bit)
// arrive as Undefined; inference then leaves the output dtype Undefined and the kernels' support
// functions refuse the node, so such models are reported as not implemented, not as invalid.
// float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), int4/uint4 and bfloat16 are held.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/quantization_layout.hpp"

namespace quilt {
namespace {

// QuantizeLinear's output types (onnx 1.22's reference: _QUANT_TYPES).
constexpr std::initializer_list<DType> kQuantizedTypes = {
    DType::Int8,         DType::UInt8,          DType::Int16,      DType::UInt16,
    DType::Float8E4M3FN, DType::Float8E4M3FNUZ, DType::Float8E5M2, DType::Float8E5M2FNUZ,
    DType::Int4,         DType::UInt4,          DType::Int2,       DType::UInt2,
    DType::Float4E2M1};

bool is_one_of(DType d, std::initializer_list<DType> allowed) {
  return std::find(allowed.begin(), allowed.end(), d) != allowed.end();
}

// Fails unless input i's dtype is one of `allowed` or unknown.
void check_dtype(const InferenceContext& ctx, size_t i, std::initializer_list<DType> allowed,
                 const char* what) {
  if (!ctx.has_input(i)) return;
  const DType d = ctx.input_dtype(i);
  if (d == DType::Undefined || is_one_of(d, allowed)) return;
  std::string names;
  for (DType t : allowed) names += std::string(names.empty() ? "" : ", ") + dtype_name(t);
  ctx.fail(std::string(what) + " '" + ctx.node().inputs[i] + "' has dtype " + dtype_name(d) +
           ", expected one of " + names);
}

// Scale (input 1) and zero point (input 2) against x (input 0): same shapes, and a layout from
// quantization_layout.hpp.
void check_scale_and_zero_point(const InferenceContext& ctx) {
  const Node& n = ctx.node();
  const int64_t axis = n.attr_int("axis", 1);
  const int64_t block_size = ctx.opset() >= 21 ? n.attr_int("block_size", 0) : 0;
  const auto& x = ctx.input_shape(0);
  const auto& s = ctx.input_shape(1);
  QuantLayout layout;
  if (std::string err = quant_layout(n, x, s, axis, block_size, layout); !err.empty())
    ctx.fail(err);
  if (!ctx.has_input(2)) return;
  const auto& z = ctx.input_shape(2);
  const Checked c(n, "element count");
  auto numel = [&c](const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t d : v) p = c.mul_dims(p, d);
    return p;
  };
  // A scalar and a one-element vector are the same per-tensor parameter.
  if (numel(s) == 1 && numel(z) == 1 && s.size() <= 1 && z.size() <= 1) return;
  bool same = s.size() == z.size();
  for (size_t i = 0; same && i < s.size(); ++i) same = s[i] < 0 || z[i] < 0 || s[i] == z[i];
  if (!same)
    ctx.fail("zero point has shape " + to_string(z) + ", expected the scale's shape " +
             to_string(s));
}

// y = saturate(round(x / y_scale) + y_zero_point). The output type is the zero point's, else the
// output_dtype attribute (opset 21+), else uint8.
void infer_quantize(InferenceContext& ctx) {
  check_dtype(ctx, 0, {DType::Float32, DType::Float16, DType::Int32}, "x");
  check_dtype(ctx, 1, {DType::Float32, DType::Float16, DType::Int32}, "y_scale");
  const int64_t output_dtype = ctx.opset() >= 21 ? ctx.node().attr_int("output_dtype", 0) : 0;
  if (output_dtype != 0 && !is_one_of(static_cast<DType>(output_dtype), kQuantizedTypes))
    ctx.fail("output_dtype " + std::to_string(output_dtype) +
             " is not a quantized type (int2, uint2, int4, uint4, int8, uint8, int16, uint16, "
             "float8, float4e2m1)");
  DType out = DType::UInt8;
  if (ctx.has_input(2)) {
    out = ctx.input_dtype(2);
    if (out != DType::Undefined && output_dtype != 0 && static_cast<int64_t>(out) != output_dtype)
      ctx.fail(std::string("output_dtype ") + std::to_string(output_dtype) +
               " does not match y_zero_point's dtype " + dtype_name(out));
    check_dtype(ctx, 2, kQuantizedTypes, "y_zero_point");
  } else if (output_dtype != 0) {
    out = static_cast<DType>(output_dtype);
  }
  const int64_t precision = ctx.opset() >= 23 ? ctx.node().attr_int("precision", 0) : 0;
  if (precision != 0 && precision != static_cast<int64_t>(DType::Float32) &&
      precision != static_cast<int64_t>(DType::Float16) && precision != 16 /* bfloat16 */ &&
      precision != static_cast<int64_t>(DType::Int32))
    ctx.fail("precision " + std::to_string(precision) +
             " is not float32 (1), float16 (10), bfloat16 (16) or int32 (6)");
  check_scale_and_zero_point(ctx);
  ctx.set_output(0, out, ctx.input_shape(0));
}

// y = (x - x_zero_point) * x_scale, of the output_dtype attribute's type (opset 23+) or the
// scale's.
void infer_dequantize(InferenceContext& ctx) {
  check_dtype(ctx, 0,
              {DType::Int8, DType::UInt8, DType::Int16, DType::UInt16, DType::Int32,
               DType::Float8E4M3FN, DType::Float8E4M3FNUZ, DType::Float8E5M2, DType::Float8E5M2FNUZ,
               DType::Int4, DType::UInt4, DType::Int2, DType::UInt2, DType::Float4E2M1},
              "x");
  check_dtype(ctx, 1, {DType::Float32, DType::Float16}, "x_scale");
  if (ctx.has_input(2)) {
    const DType x = ctx.input_dtype(0), z = ctx.input_dtype(2);
    if (x != DType::Undefined && z != DType::Undefined && x != z)
      ctx.fail(std::string("x_zero_point has dtype ") + dtype_name(z) + ", expected x's dtype " +
               dtype_name(x));
  }
  DType out = ctx.input_dtype(1);
  const int64_t output_dtype = ctx.opset() >= 23 ? ctx.node().attr_int("output_dtype", 0) : 0;
  if (output_dtype != 0) {
    if (output_dtype == 16) {  // bfloat16: valid, not holdable
      out = DType::Undefined;
    } else if (output_dtype == static_cast<int64_t>(DType::Float32) ||
               output_dtype == static_cast<int64_t>(DType::Float16)) {
      out = static_cast<DType>(output_dtype);
    } else {
      ctx.fail("output_dtype " + std::to_string(output_dtype) +
               " is not float32 (1), float16 (10) or bfloat16 (16)");
    }
  }
  check_scale_and_zero_point(ctx);
  ctx.set_output(0, out, ctx.input_shape(0));
}

void infer_dynamic_quantize(InferenceContext& ctx) {
  check_dtype(ctx, 0, {DType::Float32}, "x");
  ctx.set_output(0, DType::UInt8, ctx.input_shape(0));
  ctx.set_output(1, DType::Float32, {});
  ctx.set_output(2, DType::UInt8, {});
}

// Per-tensor parameters must hold one value; per-row/column ones `count` values (-1: any).
void check_param_size(const InferenceContext& ctx, size_t i, int64_t count, const char* what) {
  const auto& s = ctx.input_shape(i);
  int64_t n = 1;
  const Checked c(ctx.node(), "element count");
  for (int64_t d : s) n = c.mul_dims(n, d);
  if (s.size() > 1 || (n >= 0 && n != 1 && (count < 0 || n != count)))
    ctx.fail(
        std::string(what) + " has shape " + to_string(s) + ", expected a scalar" +
        (count >= 0 && count != 1 ? " or " + std::to_string(count) + " values" : std::string()));
}

// QLinearMatMul: MatMul's shapes (numpy batch broadcasting), output of y_zero_point's type.
void infer_qlinear_matmul(InferenceContext& ctx) {
  check_dtype(ctx, 0, {DType::Int8, DType::UInt8}, "a");
  check_dtype(ctx, 3, {DType::Int8, DType::UInt8}, "b");
  check_dtype(ctx, 7, {DType::Int8, DType::UInt8}, "y_zero_point");
  for (size_t i : {1, 4, 6})
    check_dtype(ctx, i,
                ctx.opset() >= 21 ? std::initializer_list<DType>{DType::Float32, DType::Float16}
                                  : std::initializer_list<DType>{DType::Float32},
                "scale");
  std::vector<int64_t> a = ctx.input_shape(0), b = ctx.input_shape(3);
  if (a.empty() || b.empty())
    ctx.fail("a " + to_string(a) + " and b " + to_string(b) + " must have rank >= 1");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const int64_t ka = a.back(), kb = b[b.size() - 2];
  if (ka >= 0 && kb >= 0 && ka != kb)
    ctx.fail("a " + to_string(ctx.input_shape(0)) + " and b " + to_string(ctx.input_shape(3)) +
             " have inner dims " + std::to_string(ka) + " and " + std::to_string(kb) +
             ", expected equal");
  check_param_size(ctx, 1, a[a.size() - 2], "a_scale");
  check_param_size(ctx, 2, a[a.size() - 2], "a_zero_point");
  check_param_size(ctx, 4, b.back(), "b_scale");
  check_param_size(ctx, 5, b.back(), "b_zero_point");
  check_param_size(ctx, 6, a[a.size() - 2], "y_scale");
  check_param_size(ctx, 7, a[a.size() - 2], "y_zero_point");
  std::vector<int64_t> out = broadcast_shapes(ctx, std::vector<int64_t>(a.begin(), a.end() - 2),
                                              std::vector<int64_t>(b.begin(), b.end() - 2));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  ctx.set_output(0, ctx.input_dtype(7), out);
}

// QLinearConv: Conv's window attributes and output size; output of y_zero_point's type.
void infer_qlinear_conv(InferenceContext& ctx) {
  const Node& n = ctx.node();
  check_dtype(ctx, 0, {DType::Int8, DType::UInt8}, "x");
  check_dtype(ctx, 2, {DType::Int8, DType::UInt8}, "x_zero_point");
  check_dtype(ctx, 3, {DType::Int8, DType::UInt8}, "w");
  check_dtype(ctx, 5, {DType::Int8, DType::UInt8}, "w_zero_point");
  check_dtype(ctx, 7, {DType::Int8, DType::UInt8}, "y_zero_point");
  check_dtype(ctx, 8, {DType::Int32}, "B");
  for (size_t i : {1, 4, 6}) check_dtype(ctx, i, {DType::Float32}, "scale");
  const auto& x = ctx.input_shape(0);
  const auto& w = ctx.input_shape(3);
  if (x.size() < 3) ctx.fail("x has shape " + to_string(x) + ", expected rank >= 3 (N, C, ...)");
  if (w.size() != x.size())
    ctx.fail("w has shape " + to_string(w) + ", expected rank " + std::to_string(x.size()));
  const size_t sp = x.size() - 2;
  const int64_t group = n.attr_int("group", 1);
  if (group <= 0) ctx.fail("group " + std::to_string(group) + " must be positive");
  const Checked c(n, "output size");
  const int64_t channels = w[1] >= 0 ? c.mul(w[1], group) : -1;
  if (x[1] >= 0 && channels >= 0 && x[1] != channels)
    ctx.fail("x has " + std::to_string(x[1]) + " channels but w " + to_string(w) + " with group " +
             std::to_string(group) + " expects " + std::to_string(channels));
  if (w[0] >= 0 && w[0] % group != 0)
    ctx.fail("w has " + std::to_string(w[0]) + " output channels, not a multiple of group " +
             std::to_string(group));
  check_param_size(ctx, 1, -1, "x_scale");
  check_param_size(ctx, 2, -1, "x_zero_point");
  check_param_size(ctx, 4, w[0], "w_scale");
  check_param_size(ctx, 5, w[0], "w_zero_point");
  check_param_size(ctx, 6, -1, "y_scale");
  check_param_size(ctx, 7, -1, "y_zero_point");
  if (ctx.has_input(8)) {
    const auto& b = ctx.input_shape(8);
    if (b.size() != 1 || (b[0] >= 0 && w[0] >= 0 && b[0] != w[0]))
      ctx.fail("B has shape " + to_string(b) + ", expected [" + std::to_string(w[0]) + "]");
  }
  std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  if (kernel.empty()) kernel.assign(w.begin() + 2, w.end());
  const auto strides = n.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = n.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (kernel.size() != sp || strides.size() != sp || dilations.size() != sp ||
      pads.size() != 2 * sp)
    ctx.fail("kernel_shape " + to_string(kernel) + ", strides " + to_string(strides) +
             ", dilations " + to_string(dilations) + " and pads " + to_string(pads) +
             " must have " + std::to_string(sp) + " values each (pads " + std::to_string(2 * sp) +
             ")");
  for (size_t i = 0; i < sp; ++i) {
    if (w[i + 2] >= 0 && kernel[i] != w[i + 2])
      ctx.fail("kernel_shape " + to_string(kernel) + " does not match w " + to_string(w));
    if (strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + sp] < 0)
      ctx.fail("strides and dilations must be positive and pads non-negative");
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    ctx.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  std::vector<int64_t> y = {x[0], w[0]};
  for (size_t i = 0; i < sp; ++i) {
    const int64_t in = x[i + 2];
    int64_t out = -1;
    if (in >= 0 && kernel[i] >= 0) {
      const int64_t dk = c.add(c.mul(kernel[i] - 1, dilations[i]), 1);
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        out = c.add(in, strides[i] - 1) / strides[i];
      } else {
        const int64_t padded = auto_pad == "VALID" ? in : c.add(c.add(in, pads[i]), pads[i + sp]);
        if (padded < dk)
          ctx.fail("spatial dim " + std::to_string(i) + " is " + std::to_string(in) +
                   " (with padding " + std::to_string(padded) +
                   "), smaller than the dilated kernel " + std::to_string(dk));
        out = (padded - dk) / strides[i] + 1;
      }
    }
    y.push_back(out);
  }
  ctx.set_output(0, ctx.input_dtype(7), y);
}

// ---- onnxruntime's com.microsoft QLinear* ops: dequantize, compute in float, quantize ----

// A per-tensor scale (float32) or zero point (int8/uint8, the data's type) at input i.
void check_qparam(const InferenceContext& ctx, size_t i, bool scale, DType data, const char* what) {
  if (!ctx.has_input(i)) return;
  if (scale)
    check_dtype(ctx, i, {DType::Float32}, what);
  else if (data != DType::Undefined)
    check_dtype(ctx, i, {data}, what);
  if (ctx.input_has_shape(i)) check_param_size(ctx, i, 1, what);
}

// QLinearAdd / QLinearMul: (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point) -> C, numpy broadcasting.
void infer_qlinear_binary(InferenceContext& ctx) {
  check_dtype(ctx, 0, {DType::Int8, DType::UInt8}, "A");
  const DType t = ctx.input_dtype(0);
  if (t != DType::Undefined) check_dtype(ctx, 3, {t}, "B");
  check_qparam(ctx, 1, true, t, "A_scale");
  check_qparam(ctx, 2, false, t, "A_zero_point");
  check_qparam(ctx, 4, true, t, "B_scale");
  check_qparam(ctx, 5, false, t, "B_zero_point");
  check_qparam(ctx, 6, true, t, "C_scale");
  check_qparam(ctx, 7, false, t, "C_zero_point");
  ctx.set_output(0, t, broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(3)));
}

// QLinearSigmoid / QLinearLeakyRelu: (X, X_scale, X_zero_point, Y_scale, Y_zero_point) -> Y.
void infer_qlinear_unary(InferenceContext& ctx) {
  check_dtype(ctx, 0, {DType::Int8, DType::UInt8}, "X");
  const DType t = ctx.input_dtype(0);
  check_qparam(ctx, 1, true, t, "X_scale");
  check_qparam(ctx, 2, false, t, "X_zero_point");
  check_qparam(ctx, 3, true, t, "Y_scale");
  check_qparam(ctx, 4, false, t, "Y_zero_point");
  ctx.set_output(0, t, ctx.input_shape(0));
}

// QLinearGlobalAveragePool: the spatial dims become 1 (after C, or before it with channels_last).
void infer_qlinear_global_pool(InferenceContext& ctx) {
  infer_qlinear_unary(ctx);
  std::vector<int64_t> y = ctx.input_shape(0);
  if (y.size() < 3) ctx.fail("X has shape " + to_string(y) + ", expected rank >= 3");
  const bool last = ctx.node().attr_int("channels_last", 0) != 0;
  for (size_t d = last ? 1 : 2; d < (last ? y.size() - 1 : y.size()); ++d) y[d] = 1;
  ctx.set_output(0, ctx.input_dtype(0), y);
}

// The outputs the float op `op_type` (ai.onnx, `opset`) infers from this node's inputs `which`
// (absent ones stay absent), each input's type first passed through `adjust(i, type)`; the
// node's name, op type and attributes stay, so its messages name this node.
std::vector<TypeShape> infer_float_op(const InferenceContext& ctx, const char* op_type,
                                      int64_t opset, const std::vector<size_t>& which,
                                      const std::function<void(size_t, TypeShape&)>& adjust) {
  Node n = ctx.node();
  n.inputs.clear();
  n.opset = opset;
  n.attributes.erase("channels_last");
  std::vector<TypeShape> types;
  std::vector<const Tensor*> values;
  for (size_t i : which) {
    n.inputs.push_back(ctx.has_input(i) ? ctx.node().inputs[i] : "");
    TypeShape t;
    if (ctx.has_input(i)) {
      t = {ctx.input_dtype(i), ctx.input_has_shape(i), {}};
      if (t.has_shape) t.dims = ctx.input_shape(i);
      adjust(i, t);
    }
    types.push_back(std::move(t));
    values.push_back(ctx.has_input(i) ? ctx.input_value(i) : nullptr);
  }
  InferenceContext sub(n, std::move(types), std::move(values), ctx.runtime());
  SchemaRegistry::builtin().find(op_type, "", opset)->infer(sub);
  return sub.outputs();
}

// dims permuted by perm (when it has their rank): dims[perm[k]] -> out[k], or back.
std::vector<int64_t> permuted(const std::vector<int64_t>& dims, const std::vector<size_t>& perm,
                              bool back) {
  if (perm.empty() || dims.size() != perm.size()) return dims;
  std::vector<int64_t> d(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) (back ? d[perm[k]] : d[k]) = dims[back ? k : perm[k]];
  return d;
}

// Output 0 as the float op infers it from inputs `which`, each shape permuted by `perm` first
// and the output's back, when given.
void infer_as(InferenceContext& ctx, DType dtype, const char* op_type, int64_t opset,
              const std::vector<size_t>& which, const std::vector<size_t>& perm = {}) {
  TypeShape out = infer_float_op(ctx, op_type, opset, which, [&](size_t, TypeShape& t) {
                    t.dims = permuted(t.dims, perm, false);
                  }).at(0);
  if (out.has_shape)
    ctx.set_output(0, dtype, permuted(out.dims, perm, true));
  else
    ctx.set_output_unknown_shape(0, dtype);
}

// QLinearAveragePool: AveragePool's window attributes and output size; with channels_last the
// channels are the last dim (N, spatial..., C).
void infer_qlinear_average_pool(InferenceContext& ctx) {
  infer_qlinear_unary(ctx);
  std::vector<size_t> perm;
  if (ctx.node().attr_int("channels_last", 0) != 0) {
    const size_t rank = ctx.input_shape(0).size();
    if (rank < 3) ctx.fail("X has shape " + to_string(ctx.input_shape(0)) + ", expected rank >= 3");
    perm = {0, rank - 1};
    for (size_t d = 1; d + 1 < rank; ++d) perm.push_back(d);
  }
  infer_as(ctx, ctx.input_dtype(0), "AveragePool", 19, {0}, perm);
}

// QLinearConcat: (Y_scale, Y_zero_point, then X, X_scale, X_zero_point for each input) -> Y,
// Concat's shapes; every X of Y_zero_point's type.
void infer_qlinear_concat(InferenceContext& ctx) {
  const size_t n = ctx.num_inputs();
  if (n < 5 || (n - 2) % 3 != 0)
    ctx.fail("has " + std::to_string(n) +
             " inputs, expected Y_scale, Y_zero_point and then (X, X_scale, X_zero_point) for "
             "each tensor to join");
  check_dtype(ctx, 1, {DType::Int8, DType::UInt8}, "Y_zero_point");
  const DType t = ctx.input_dtype(1);
  check_qparam(ctx, 0, true, t, "Y_scale");
  check_qparam(ctx, 1, false, t, "Y_zero_point");
  std::vector<size_t> xs;
  for (size_t i = 2; i < n; i += 3) {
    const std::string k = std::to_string((i - 2) / 3);
    check_dtype(ctx, i, {DType::Int8, DType::UInt8}, ("X " + k).c_str());
    if (t != DType::Undefined) check_dtype(ctx, i, {t}, ("X " + k).c_str());
    check_qparam(ctx, i + 1, true, t, ("X_scale " + k).c_str());
    check_qparam(ctx, i + 2, false, t, ("X_zero_point " + k).c_str());
    xs.push_back(i);
  }
  infer_as(ctx, t == DType::Undefined ? ctx.input_dtype(2) : t, "Concat", 13, xs);
}

// QLinearSoftmax: Softmax's; the `opset` attribute (of the Softmax it replaced) says whether the
// input is coerced to a matrix at `axis` (before 13) or the softmax runs along `axis`.
void infer_qlinear_softmax(InferenceContext& ctx) {
  infer_qlinear_unary(ctx);
  if (!ctx.node().has_attr("opset"))
    ctx.fail("attribute 'opset' (the opset of the Softmax it replaces) is required");
  infer_as(ctx, ctx.input_dtype(0), "Softmax", ctx.node().attr_int("opset", 13) < 13 ? 11 : 13,
           {0});
}

// QLinearReduceMean: (data, data_scale, data_zero_point, reduced_scale, reduced_zero_point) with
// ReduceMean-13's axes and keepdims attributes (both required by onnxruntime's schema).
void infer_qlinear_reduce_mean(InferenceContext& ctx) {
  for (const char* a : {"axes", "keepdims"})
    if (!ctx.node().has_attr(a)) ctx.fail(std::string("attribute '") + a + "' is required");
  infer_qlinear_unary(ctx);
  infer_as(ctx, ctx.input_dtype(0), "ReduceMean", 13, {0});
}

// QLinearWhere: (condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale,
// z_zero_point) -> Z, Where's shapes; X, Y and Z of one int8/uint8 type.
void infer_qlinear_where(InferenceContext& ctx) {
  check_dtype(ctx, 1, {DType::Int8, DType::UInt8}, "X");
  const DType t = ctx.input_dtype(1);
  if (t != DType::Undefined) check_dtype(ctx, 4, {t}, "Y");
  check_qparam(ctx, 2, true, t, "x_scale");
  check_qparam(ctx, 3, false, t, "x_zero_point");
  check_qparam(ctx, 5, true, t, "y_scale");
  check_qparam(ctx, 6, false, t, "y_zero_point");
  check_qparam(ctx, 7, true, t, "z_scale");
  check_qparam(ctx, 8, false, t, "z_zero_point");
  infer_as(ctx, t, "Where", 16, {0, 1, 4});
}

// DynamicQuantizeLSTM: LSTM's (X, W, R, B, sequence_lens, initial_h, initial_c, P) with int8 /
// uint8 W [dirs, input, 4 hidden] and R [dirs, hidden, 4 hidden] (LSTM's transposed), then
// W_scale, W_zero_point, R_scale, R_zero_point per direction ([dirs]) or per gate column
// ([dirs, 4 hidden]). The shapes are LSTM's with W and R as float32 in LSTM's layout.
void infer_dynamic_quantize_lstm(InferenceContext& ctx) {
  const char* names[] = {"W_scale", "W_zero_point", "R_scale", "R_zero_point"};
  for (size_t i = 8; i < 12; ++i)
    if (!ctx.has_input(i))
      ctx.fail(std::string(names[i - 8]) + " (input " + std::to_string(i) + ") is required");
  check_dtype(ctx, 1, {DType::Int8, DType::UInt8}, "W");
  check_dtype(ctx, 2, {DType::Int8, DType::UInt8}, "R");
  check_dtype(ctx, 8, {DType::Float32}, "W_scale");
  check_dtype(ctx, 10, {DType::Float32}, "R_scale");
  check_dtype(ctx, 9, {ctx.input_dtype(1)}, "W_zero_point");
  check_dtype(ctx, 11, {ctx.input_dtype(2)}, "R_zero_point");
  const DType x = ctx.input_dtype(0);
  const std::vector<TypeShape> out =
      infer_float_op(ctx, "LSTM", 14, {0, 1, 2, 3, 4, 5, 6, 7}, [&](size_t i, TypeShape& t) {
        if (i != 1 && i != 2) return;
        t.dtype = x;
        if (t.has_shape) t.dims = permuted(t.dims, {0, 2, 1}, false);
      });
  for (size_t i = 0; i < out.size() && i < ctx.num_outputs(); ++i)
    if (out[i].has_shape)
      ctx.set_output(i, out[i].dtype, out[i].dims);
    else
      ctx.set_output_unknown_shape(i, out[i].dtype);
}

}  // namespace

void register_quantization_schemas(SchemaRegistry& r) {
  // Later opsets only add attributes (axis 13, saturate 19, block_size/output_dtype 21,
  // precision 23) and element types; the attributes are read only from the opset that has them.
  r.add({.op_type = "QuantizeLinear",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_quantize});
  r.add({.op_type = "DequantizeLinear",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_dequantize});
  r.add({.op_type = "DynamicQuantizeLinear",
         .min_opset = 11,
         .min_outputs = 3,
         .max_outputs = 3,
         .infer = infer_dynamic_quantize});
  // Opset 21 allows float16 scales (and float8 data).
  r.add({.op_type = "QLinearMatMul",
         .min_opset = 10,
         .min_inputs = 8,
         .max_inputs = 8,
         .infer = infer_qlinear_matmul});
  r.add({.op_type = "QLinearConv",
         .min_opset = 10,
         .min_inputs = 8,
         .max_inputs = 9,
         .infer = infer_qlinear_conv});
  // onnxruntime's contrib ops, as its quantizer writes them. QuantizeLinear and DequantizeLinear
  // are the ONNX ops (axis attribute, per-tensor or per-axis).
  const std::string ms = "com.microsoft";
  r.add({.op_type = "QuantizeLinear",
         .domain = ms,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_quantize});
  r.add({.op_type = "DequantizeLinear",
         .domain = ms,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_dequantize});
  for (const char* op : {"QLinearAdd", "QLinearMul"})
    r.add({.op_type = op,
           .domain = ms,
           .min_inputs = 7,
           .max_inputs = 8,
           .infer = infer_qlinear_binary});
  for (const char* op : {"QLinearSigmoid", "QLinearLeakyRelu"})
    r.add({.op_type = op,
           .domain = ms,
           .min_inputs = 4,
           .max_inputs = 5,
           .infer = infer_qlinear_unary});
  r.add({.op_type = "QLinearGlobalAveragePool",
         .domain = ms,
         .min_inputs = 5,
         .max_inputs = 5,
         .infer = infer_qlinear_global_pool});
  r.add({.op_type = "QLinearAveragePool",
         .domain = ms,
         .min_inputs = 4,
         .max_inputs = 5,
         .infer = infer_qlinear_average_pool});
  r.add({.op_type = "QLinearSoftmax",
         .domain = ms,
         .min_inputs = 4,
         .max_inputs = 5,
         .infer = infer_qlinear_softmax});
  r.add({.op_type = "QLinearReduceMean",
         .domain = ms,
         .min_inputs = 5,
         .max_inputs = 5,
         .infer = infer_qlinear_reduce_mean});
  r.add({.op_type = "QLinearConcat",
         .domain = ms,
         .min_inputs = 5,
         .max_inputs = 1 << 20,
         .infer = infer_qlinear_concat});
  r.add({.op_type = "QLinearWhere",
         .domain = ms,
         .min_inputs = 9,
         .max_inputs = 9,
         .infer = infer_qlinear_where});
  r.add({.op_type = "DynamicQuantizeLSTM",
         .domain = ms,
         .min_inputs = 3,
         .max_inputs = 12,
         .max_outputs = 3,
         .infer = infer_dynamic_quantize_lstm});
}

}  // namespace quilt
