// Schemas and shape inference of the tensor family's generators: Constant, ConstantOfShape,
// Range, Trilu.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/float8.hpp"
#include "core/half.hpp"
#include "core/op_schema.hpp"

namespace quilt {

void register_tensor_make_schemas(SchemaRegistry& r);

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

void infer_constant(InferenceContext& ctx) {
  const Node& n = ctx.node();
  if (n.attributes.size() != 1)
    ctx.fail(
        "needs exactly one of the attributes value, value_float(s), value_int(s), "
        "value_string(s), sparse_value; got " +
        str(n.attributes.size()));
  if (const Tensor* t = n.attr_tensor("value")) return ctx.set_output(0, t->dtype(), t->shape());
  if (n.has_attr("value_float")) return ctx.set_output(0, DType::Float32, {});
  if (n.has_attr("value_int")) return ctx.set_output(0, DType::Int64, {});
  if (n.has_attr("value_floats"))
    return ctx.set_output(0, DType::Float32,
                          {static_cast<int64_t>(n.attr_floats("value_floats").size())});
  if (n.has_attr("value_ints"))
    return ctx.set_output(0, DType::Int64,
                          {static_cast<int64_t>(n.attr_ints("value_ints").size())});
  if (n.has_attr("value_string")) return ctx.set_output(0, DType::String, {});
  if (n.has_attr("value_strings"))
    return ctx.set_output(0, DType::String,
                          {static_cast<int64_t>(n.attr_strings("value_strings").size())});
  // Sparse tensors: the type is not one Quilt holds; backends refuse the node.
  ctx.set_output_unknown_shape(0, DType::Undefined);
}

void infer_constant_of_shape(InferenceContext& ctx) {
  const auto shape = *ctx.input_ints(0);
  if (ctx.input_shape(0).size() != 1)
    ctx.fail("input has shape " + to_string(ctx.input_shape(0)) + ", expected a 1-D shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail("shape " + to_string(shape) + " has a negative dim");
  DType dtype = DType::Float32;
  if (const Tensor* v = ctx.node().attr_tensor("value")) {
    if (v->numel() != 1)
      ctx.fail("attribute 'value' has shape " + to_string(v->shape()) +
               ", expected exactly one element");
    dtype = v->dtype();
  }
  ctx.set_output(0, dtype, shape);
}

template <class T>
int64_t range_count(const Tensor& start, const Tensor& limit, const Tensor& delta,
                    const InferenceContext& ctx) {
  const T s = start.data<T>()[0], l = limit.data<T>()[0], d = delta.data<T>()[0];
  if (d == T(0)) ctx.fail("delta is 0");
  if constexpr (std::is_floating_point_v<T>) {
    const double n = std::ceil(static_cast<double>(l - s) / static_cast<double>(d));
    if (n > 9.0e18) ctx.fail("the range has more than 2^63 elements");
    return n > 0 ? static_cast<int64_t>(n) : 0;
  } else {
    // Exact ceil((l - s) / d) in 128 bits: l - s of two int64s needs 65.
    const __int128 num = static_cast<__int128>(l) - static_cast<__int128>(s);
    const __int128 den = d;
    if ((num > 0) != (den > 0) || num == 0) return 0;
    const __int128 an = num < 0 ? -num : num, ad = den < 0 ? -den : den;
    const __int128 n = (an - 1) / ad + 1;
    if (n > std::numeric_limits<int64_t>::max()) ctx.fail("the range has more than 2^63 elements");
    return static_cast<int64_t>(n);
  }
}

void infer_range(InferenceContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.input_dtype(i) != dtype)
      ctx.fail("start, limit and delta must have the same dtype; input " + str(i) + " is " +
               dtype_name(ctx.input_dtype(i)) + ", input 0 is " + dtype_name(dtype));
    if (!ctx.input_shape(i).empty() &&
        !(ctx.input_shape(i).size() == 1 && ctx.input_shape(i)[0] == 1))
      ctx.fail("input " + str(i) + " has shape " + to_string(ctx.input_shape(i)) +
               ", expected a scalar");
  }
  const Tensor *s = ctx.input_value(0), *l = ctx.input_value(1), *d = ctx.input_value(2);
  int64_t n = 0;
  switch (dtype) {
    case DType::Float32:
      n = range_count<float>(*s, *l, *d, ctx);
      break;
    case DType::Float64:
      n = range_count<double>(*s, *l, *d, ctx);
      break;
    case DType::Float16: {
      // Range-27 added float16; the count is computed from the values widened to float.
      const float fs = half_to_float(s->data<uint16_t>()[0]);
      const float fl = half_to_float(l->data<uint16_t>()[0]);
      const float fd = half_to_float(d->data<uint16_t>()[0]);
      if (fd == 0) ctx.fail("delta is 0");
      const double count = std::ceil(static_cast<double>(fl - fs) / fd);
      if (count > 9.0e18) ctx.fail("the range has more than 2^63 elements");
      n = count > 0 ? static_cast<int64_t>(count) : 0;
      break;
    }
    case DType::BFloat16: {
      // Range-27 added bfloat16; like onnx's reference (numpy arange on the values as double),
      // the count is computed from the exact values in double.
      const double ds = bfloat16_to_float(s->data<uint16_t>()[0]);
      const double dl = bfloat16_to_float(l->data<uint16_t>()[0]);
      const double dd = bfloat16_to_float(d->data<uint16_t>()[0]);
      if (dd == 0) ctx.fail("delta is 0");
      const double count = std::ceil((dl - ds) / dd);
      if (count > 9.0e18) ctx.fail("the range has more than 2^63 elements");
      n = count > 0 ? static_cast<int64_t>(count) : 0;
      break;
    }
    case DType::Int16:
      n = range_count<int16_t>(*s, *l, *d, ctx);
      break;
    case DType::Int32:
      n = range_count<int32_t>(*s, *l, *d, ctx);
      break;
    case DType::Int64:
      n = range_count<int64_t>(*s, *l, *d, ctx);
      break;
    default:
      ctx.fail(std::string("dtype ") + dtype_name(dtype) +
               " is not one of float32, float64, float16, bfloat16, int16, int32, int64");
  }
  ctx.set_output(0, dtype, {n});
}

void infer_trilu(InferenceContext& ctx) {
  if (ctx.input_shape(0).size() < 2)
    ctx.fail("input has shape " + to_string(ctx.input_shape(0)) + ", expected rank >= 2");
  if (ctx.has_input(1)) {
    if (ctx.input_dtype(1) != DType::Int64)
      ctx.fail(std::string("k is ") + dtype_name(ctx.input_dtype(1)) + ", expected int64");
    const auto& ks = ctx.input_shape(1);
    if (!ks.empty() && !(ks.size() == 1 && ks[0] == 1))
      ctx.fail("k has shape " + to_string(ks) + ", expected a scalar");
  }
  infer_same_as_input0(ctx);
}

}  // namespace

void register_tensor_make_schemas(SchemaRegistry& r) {
  r.add({.op_type = "Constant", .min_inputs = 0, .max_inputs = 0, .infer = infer_constant});
  r.add({.op_type = "ConstantOfShape",
         .min_opset = 9,
         .value_inputs = {0},
         .infer = infer_constant_of_shape});
  r.add({.op_type = "Range",
         .min_opset = 11,
         .min_inputs = 3,
         .max_inputs = 3,
         .value_inputs = {0, 1, 2},
         .infer = infer_range});
  // k (input 1) changes values, not the shape, so inference does not need it.
  r.add({.op_type = "Trilu", .min_opset = 14, .max_inputs = 2, .infer = infer_trilu});
}

}  // namespace quilt
