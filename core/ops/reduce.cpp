// Schemas and shape inference of the reduce op family: Reduce*, ArgMax/ArgMin, TopK, CumSum.
#include "core/op_schema.hpp"

namespace quilt {
namespace {

// The Reduce* ops. Before `first_input_axes_opset` the axes come from an attribute; from it on
// from an optional second input, with noop_with_empty_axes deciding what "no axes" means.
const struct {
  const char* op_type;
  int64_t first_input_axes_opset;
} kReduceOps[] = {
    {"ReduceSum", 13},    {"ReduceMean", 18},      {"ReduceMax", 18}, {"ReduceMin", 18},
    {"ReduceProd", 18},   {"ReduceL1", 18},        {"ReduceL2", 18},  {"ReduceSumSquare", 18},
    {"ReduceLogSum", 18}, {"ReduceLogSumExp", 18},
};

void infer_reduce(InferenceContext& ctx, bool axes_from_input) {
  const DType dtype = ctx.input_dtype(0);
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  const Node& node = ctx.node();
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (ctx.has_input(1)) {
      auto v = ctx.input_ints(1);
      if (!v) {  // axes not known yet: only the rank is, and only with keepdims
        if (keepdims)
          ctx.set_output(0, dtype, std::vector<int64_t>(in.size(), -1));
        else
          ctx.set_output_unknown_shape(0, dtype);
        return;
      }
      if (ctx.input_rank(1) > 1) ctx.fail("axes must be a 1-D tensor");
      axes = *v;
    }
    if (axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0) {
      ctx.set_output(0, dtype, in);
      return;
    }
  } else {
    axes = node.attr_ints("axes");
  }
  std::vector<char> reduced(in.size(), axes.empty() ? 1 : 0);
  for (int64_t a : axes) {
    int64_t n = normalize_axis(ctx, a, rank);
    if (reduced[static_cast<size_t>(n)])
      ctx.fail("axis " + std::to_string(a) + " appears more than once in axes");
    reduced[static_cast<size_t>(n)] = 1;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i])
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(1);
  }
  ctx.set_output(0, dtype, out);
}

void infer_arg_reduce(InferenceContext& ctx) {
  auto shape = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) ctx.fail("input must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  if (ctx.node().attr_int("keepdims", 1) != 0)
    shape[static_cast<size_t>(axis)] = 1;
  else
    shape.erase(shape.begin() + axis);
  ctx.set_output(0, DType::Int64, shape);
}

void infer_topk(InferenceContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  auto shape = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) ctx.fail("input must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  int64_t k = -1;
  if (ctx.opset() < 10) {
    if (!ctx.node().has_attr("k")) ctx.fail("attribute 'k' is required before opset 10");
    k = ctx.node().attr_int("k", 0);
  } else {
    auto v = ctx.input_ints(1);
    if (v) {
      if (v->size() != 1)
        ctx.fail("K must hold exactly one value, got " + std::to_string(v->size()));
      k = (*v)[0];
    }
  }
  const int64_t n = shape[static_cast<size_t>(axis)];
  if (k != -1 && k < 0) ctx.fail("K must be >= 0, got " + std::to_string(k));
  if (k >= 0 && n >= 0 && k > n)
    ctx.fail("K is " + std::to_string(k) + " but axis " + std::to_string(axis) + " has only " +
             std::to_string(n) + " elements");
  shape[static_cast<size_t>(axis)] = k;
  ctx.set_output(0, dtype, shape);
  ctx.set_output(1, DType::Int64, shape);
}

void infer_cumsum(InferenceContext& ctx) {
  if (ctx.input_rank(0) == 0) ctx.fail("input must have rank >= 1, got a scalar");
  if (ctx.input_rank(1) > 1) ctx.fail("axis must be a scalar or a 1-element 1-D tensor");
  DType axis_type = ctx.input_dtype(1);
  if (axis_type != DType::Int32 && axis_type != DType::Int64)
    ctx.fail(std::string("axis must be int32 or int64, got ") + dtype_name(axis_type));
  if (auto v = ctx.input_ints(1)) {
    if (v->size() != 1) ctx.fail("axis must hold exactly one value");
    normalize_axis(ctx, (*v)[0], ctx.input_rank(0));
  }
  infer_same_as_input0(ctx);
}

}  // namespace

void register_reduce_schemas(SchemaRegistry& r) {
  for (const auto& op : kReduceOps) {
    r.add({.op_type = op.op_type,
           .min_opset = 1,
           .max_opset = op.first_input_axes_opset - 1,
           .infer = [](InferenceContext& ctx) { infer_reduce(ctx, false); }});
    r.add({.op_type = op.op_type,
           .min_opset = op.first_input_axes_opset,
           .max_inputs = 2,
           .value_inputs = {1},
           .infer = [](InferenceContext& ctx) { infer_reduce(ctx, true); }});
  }
  r.add({.op_type = "ArgMax", .infer = infer_arg_reduce});
  r.add({.op_type = "ArgMin", .infer = infer_arg_reduce});
  r.add(
      {.op_type = "TopK", .max_opset = 9, .min_outputs = 2, .max_outputs = 2, .infer = infer_topk});
  r.add({.op_type = "TopK",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 2,
         .min_outputs = 2,
         .max_outputs = 2,
         .value_inputs = {1},
         .infer = infer_topk});
  r.add({.op_type = "CumSum",
         .min_opset = 11,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_cumsum});
}

}  // namespace quilt
