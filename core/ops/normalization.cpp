// Schemas and shape inference of the normalization op family: BatchNormalization,
// InstanceNormalization, GroupNormalization, LayerNormalization, LpNormalization,
// MeanVarianceNormalization, Softmax, LogSoftmax.
#include "core/op_schema.hpp"

namespace quilt {
namespace {

// Fails unless input `i` is a vector of `c` elements (c == -1: any length).
void expect_channel_vector(InferenceContext& ctx, size_t i, const char* what, int64_t c) {
  const auto& s = ctx.input_shape(i);
  if (s.size() != 1) ctx.fail(std::string(what) + " must be 1-D, got shape " + to_string(s));
  if (c >= 0 && s[0] >= 0 && s[0] != c)
    ctx.fail(std::string(what) + " has " + std::to_string(s[0]) + " elements, expected " +
             std::to_string(c) + " (the channel count)");
}

void infer_batch_norm(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() < 2) ctx.fail("X must have rank >= 2 (N x C x ...), got shape " + to_string(x));
  const int64_t c = x[1];
  // Opsets 7 and 8 allow per-activation parameters (spatial = 0) shaped like X without N.
  const bool spatial = ctx.opset() >= 9 || ctx.node().attr_int("spatial", 1) != 0;
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i <= 4; ++i) {
    if (spatial) {
      expect_channel_vector(ctx, i, names[i - 1], c);
      continue;
    }
    const auto& p = ctx.input_shape(i);
    bool ok = p.size() == x.size() - 1;
    for (size_t d = 0; ok && d < p.size(); ++d) ok = p[d] < 0 || x[d + 1] < 0 || p[d] == x[d + 1];
    if (!ok)
      ctx.fail(std::string(names[i - 1]) + " has shape " + to_string(p) +
               "; with spatial = 0 it must be X's shape without N: " +
               to_string(std::vector<int64_t>(x.begin() + 1, x.end())));
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
  // The extra outputs exist only in training mode; typed for completeness.
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.input_dtype(3), {c});
}

void infer_instance_norm(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() < 2) ctx.fail("input must have rank >= 2 (N x C x ...), got shape " + to_string(x));
  expect_channel_vector(ctx, 1, "scale", x[1]);
  expect_channel_vector(ctx, 2, "B", x[1]);
  infer_same_as_input0(ctx);
}

// Opset 18 has one scale and bias per group; opset 21 one per channel.
void infer_group_norm(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() < 2) ctx.fail("X must have rank >= 2 (N x C x ...), got shape " + to_string(x));
  if (!ctx.node().has_attr("num_groups")) ctx.fail("attribute 'num_groups' is required");
  const int64_t groups = ctx.node().attr_int("num_groups", 0);
  if (groups <= 0) ctx.fail("num_groups must be positive, got " + std::to_string(groups));
  const int64_t c = x[1];
  if (c >= 0 && c % groups != 0)
    ctx.fail("the channel count " + std::to_string(c) + " is not divisible by num_groups " +
             std::to_string(groups));
  const int64_t params = ctx.opset() >= 21 ? c : groups;
  expect_channel_vector(ctx, 1, "scale", params);
  expect_channel_vector(ctx, 2, "bias", params);
  infer_same_as_input0(ctx);
}

// Fails unless `p` broadcasts unidirectionally to X's shape (Y = normalized X * Scale + B, with
// numpy broadcasting as in the spec's reference).
void expect_broadcastable(InferenceContext& ctx, const char* what, const std::vector<int64_t>& p,
                          const std::vector<int64_t>& x) {
  bool ok = p.size() <= x.size();
  for (size_t d = 0; ok && d < p.size(); ++d) {
    int64_t pd = p[p.size() - 1 - d], xd = x[x.size() - 1 - d];
    ok = pd < 0 || xd < 0 || pd == 1 || pd == xd;
  }
  if (!ok)
    ctx.fail(std::string(what) + " has shape " + to_string(p) + ", which does not broadcast to X " +
             to_string(x));
}

void infer_layer_norm(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(x.size());
  if (rank == 0) ctx.fail("X must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  // Mean and InvStdDev are computed and returned in the stash type (float32 by default).
  const auto stash = static_cast<DType>(ctx.node().attr_int("stash_type", 1));
  if (stash != DType::Float32 && stash != DType::Float64 && stash != DType::Float16)
    ctx.fail("stash_type is " + std::to_string(static_cast<int>(stash)) +
             ", expected a floating-point type (1 = float32)");
  const std::vector<int64_t> norm(x.begin() + axis, x.end());
  expect_broadcastable(ctx, "Scale", ctx.input_shape(1), x);
  if (ctx.has_input(2)) expect_broadcastable(ctx, "B", ctx.input_shape(2), x);
  ctx.set_output(0, ctx.input_dtype(0), x);
  std::vector<int64_t> stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  ctx.set_output(1, stash, stats);
  ctx.set_output(2, stash, stats);
}

void infer_lp_norm(InferenceContext& ctx) {
  const int64_t rank = ctx.input_rank(0);
  if (rank == 0) ctx.fail("input must have rank >= 1, got a scalar");
  normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  const int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail("p is " + std::to_string(p) + ", expected 1 or 2");
  infer_same_as_input0(ctx);
}

void infer_mvn(InferenceContext& ctx) {
  const int64_t rank = ctx.input_rank(0);
  std::vector<char> seen(static_cast<size_t>(rank), 0);
  for (int64_t a : ctx.node().attr_ints("axes", {0, 2, 3})) {
    const int64_t n = normalize_axis(ctx, a, rank);
    if (seen[static_cast<size_t>(n)]++)
      ctx.fail("axis " + std::to_string(a) + " appears more than once in axes");
  }
  infer_same_as_input0(ctx);
}

// Before opset 13 the input is coerced to a matrix at `axis` (default 1); from 13 on the op works
// along that one axis (default -1). Either way the axis must name a dimension.
void infer_softmax(InferenceContext& ctx) {
  const int64_t rank = ctx.input_rank(0);
  if (rank == 0) ctx.fail("input must have rank >= 1, got a scalar");
  normalize_axis(ctx, ctx.node().attr_int("axis", ctx.opset() >= 13 ? -1 : 1), rank);
  infer_same_as_input0(ctx);
}

}  // namespace

void register_normalization_schemas(SchemaRegistry& r) {
  r.add({.op_type = "BatchNormalization",
         .min_opset = 7,
         .max_opset = 13,
         .min_inputs = 5,
         .max_inputs = 5,
         .max_outputs = 5,
         .infer = infer_batch_norm});
  r.add({.op_type = "BatchNormalization",
         .min_opset = 14,
         .min_inputs = 5,
         .max_inputs = 5,
         .max_outputs = 3,
         .infer = infer_batch_norm});
  r.add({.op_type = "InstanceNormalization",
         .min_opset = 6,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_instance_norm});
  r.add({.op_type = "GroupNormalization",
         .min_opset = 18,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_group_norm});
  r.add({.op_type = "LayerNormalization",
         .min_opset = 17,
         .min_inputs = 2,
         .max_inputs = 3,
         .max_outputs = 3,
         .infer = infer_layer_norm});
  r.add({.op_type = "LpNormalization", .infer = infer_lp_norm});
  r.add({.op_type = "MeanVarianceNormalization", .min_opset = 9, .infer = infer_mvn});
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    r.add({.op_type = op, .max_opset = 12, .infer = infer_softmax});
    r.add({.op_type = op, .min_opset = 13, .infer = infer_softmax});
  }
}

}  // namespace quilt
