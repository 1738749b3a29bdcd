// Schemas and shape inference of the misc op family: Einsum, Unique, Det and the random
// generators (RandomUniform, RandomNormal, their *Like forms, Bernoulli).
#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/misc_einsum.hpp"
#include "core/ops/misc_unique.hpp"

namespace quilt {

void register_misc_extra_schemas(SchemaRegistry& r);
void register_ml_schemas(SchemaRegistry& r);
void register_string_schemas(SchemaRegistry& r);
void register_sequence_schemas(SchemaRegistry& r);

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

void infer_einsum(InferenceContext& ctx) {
  if (!ctx.node().has_attr("equation")) ctx.fail("attribute 'equation' is required");
  const std::string equation = ctx.node().attr_string("equation", "");
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> ranks;
  DType dtype = DType::Undefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    shapes.push_back(ctx.input_shape(i));
    ranks.push_back(static_cast<int64_t>(shapes.back().size()));
    const DType d = ctx.input_dtype(i);
    if (dtype == DType::Undefined) dtype = d;
    if (d != DType::Undefined && d != dtype)
      ctx.fail("inputs must have the same dtype, but input 0 is " + std::string(dtype_name(dtype)) +
               " and input " + str(static_cast<int64_t>(i)) + " is " + dtype_name(d));
  }
  EinsumEquation eq;
  std::string err = parse_einsum(equation, ranks, eq);
  if (!err.empty()) ctx.fail(err);
  std::vector<int64_t> sizes;
  err = einsum_label_sizes(eq, shapes, sizes);
  if (!err.empty()) ctx.fail(err);
  std::vector<int64_t> dims;
  for (int l : eq.output) dims.push_back(sizes[static_cast<size_t>(l)]);
  ctx.set_output(0, dtype, dims);
}

void infer_unique(InferenceContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  const auto& shape = ctx.input_shape(0);
  const Node& n = ctx.node();
  // Unknown (-1) when a dim they multiply is.
  const Checked c(n, "element count");
  int64_t outer = 1, count = 1, inner = 1, axis = -1;
  if (n.has_attr("axis")) {
    axis = normalize_axis(ctx, n.attr_int("axis", 0), static_cast<int64_t>(shape.size()));
    count = shape[static_cast<size_t>(axis)];
    for (int64_t d = 0; d < axis; ++d) outer = c.mul_dims(outer, shape[static_cast<size_t>(d)]);
    for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d)
      inner = c.mul_dims(inner, shape[d]);
  } else {
    for (int64_t d : shape) count = c.mul_dims(count, d);
  }
  // The number of unique slices needs the values (value_inputs: inference only runs with them,
  // except at run time for a missing value, which cannot happen).
  int64_t unique = -1;
  const Tensor* x = ctx.input_value(0);
  if (x) {
    UniqueGroups g;
    if (!unique_groups(*x, outer, count, inner, n.attr_int("sorted", 1) != 0, g)) {
      // float16: no kernel takes it; leave the shapes open so the backend refuses the node.
      for (size_t i = 0; i < 4; ++i) ctx.set_output_unknown_shape(i, i == 0 ? dtype : DType::Int64);
      return;
    }
    unique = static_cast<int64_t>(g.first.size());
  }
  std::vector<int64_t> y_dims = {unique};
  if (axis >= 0) {
    y_dims = shape;
    y_dims[static_cast<size_t>(axis)] = unique;
  }
  ctx.set_output(0, dtype, y_dims);
  ctx.set_output(1, DType::Int64, {unique});
  ctx.set_output(2, DType::Int64, {count});
  ctx.set_output(3, DType::Int64, {unique});
}

void infer_det(InferenceContext& ctx) {
  const auto& shape = ctx.input_shape(0);
  if (shape.size() < 2)
    ctx.fail("input has rank " + str(static_cast<int64_t>(shape.size())) + ", expected [*, M, M]");
  const int64_t m = shape[shape.size() - 2], k = shape[shape.size() - 1];
  if (m >= 0 && k >= 0 && m != k)
    ctx.fail("input has shape " + to_string(shape) + "; the last two dims must be equal");
  ctx.set_output(0, ctx.input_dtype(0), std::vector<int64_t>(shape.begin(), shape.end() - 2));
}

bool is_float_dtype(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16;
}

// RandomUniform / RandomNormal: shape and dtype from attributes.
void infer_random(InferenceContext& ctx) {
  const Node& n = ctx.node();
  if (!n.has_attr("shape")) ctx.fail("attribute 'shape' is required");
  const auto shape = n.attr_ints("shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail("attribute 'shape' " + to_string(shape) + " has a negative dim");
  const auto dtype = static_cast<DType>(n.attr_int("dtype", 1));
  if (!is_float_dtype(dtype))
    ctx.fail("attribute 'dtype' is " + str(static_cast<int64_t>(dtype)) +
             ", expected float16, float or double");
  ctx.set_output(0, dtype, shape);
}

// RandomUniformLike / RandomNormalLike: the input's shape; dtype from the attribute or input.
void infer_random_like(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const DType dtype =
      n.has_attr("dtype") ? static_cast<DType>(n.attr_int("dtype", 1)) : ctx.input_dtype(0);
  if (dtype != DType::Undefined && !is_float_dtype(dtype))
    ctx.fail(std::string("output dtype is ") + dtype_name(dtype) +
             ", expected float16, float or double (set attribute 'dtype')");
  ctx.set_output(0, dtype, ctx.input_shape(0));
}

void infer_bernoulli(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const DType in = ctx.input_dtype(0);
  if (in != DType::Undefined && !is_float_dtype(in))
    ctx.fail(std::string("input is ") + dtype_name(in) + ", expected float16, float or double");
  const DType dtype = n.has_attr("dtype") ? static_cast<DType>(n.attr_int("dtype", 1)) : in;
  if (n.has_attr("dtype") && !dtype_supported(dtype))
    ctx.fail("attribute 'dtype' is " + str(static_cast<int64_t>(dtype)) +
             ", not a numeric or bool type");
  ctx.set_output(0, dtype, ctx.input_shape(0));
}

}  // namespace

void register_misc_schemas(SchemaRegistry& r) {
  r.add({.op_type = "Einsum",
         .min_opset = 12,
         .min_inputs = 1,
         .max_inputs = 1 << 20,
         .infer = infer_einsum});
  r.add({.op_type = "Unique",
         .min_opset = 11,
         .min_outputs = 1,
         .max_outputs = 4,
         .value_inputs = {0},
         .infer = infer_unique});
  r.add({.op_type = "Det", .min_opset = 11, .infer = infer_det});
  r.add({.op_type = "RandomUniform", .min_inputs = 0, .max_inputs = 0, .infer = infer_random});
  r.add({.op_type = "RandomNormal", .min_inputs = 0, .max_inputs = 0, .infer = infer_random});
  r.add({.op_type = "RandomUniformLike", .infer = infer_random_like});
  r.add({.op_type = "RandomNormalLike", .infer = infer_random_like});
  r.add({.op_type = "Bernoulli", .min_opset = 15, .infer = infer_bernoulli});
  register_misc_extra_schemas(r);
  register_ml_schemas(r);
  register_string_schemas(r);
  register_sequence_schemas(r);
}

}  // namespace quilt
