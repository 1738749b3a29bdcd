// Schemas and shape inference of the tensor family's ops that cut, join or repeat tensors:
// Concat, Split, Slice, Expand, Tile, Pad.
#include <algorithm>
#include <numeric>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/split_sizes.hpp"

namespace quilt {

void register_tensor_select_schemas(SchemaRegistry& r);

namespace {

constexpr int64_t kUnknown = -1;

std::string str(int64_t v) {
  return std::to_string(v);
}

// Normalised axes without duplicates, for a tensor of the given rank.
std::vector<int64_t> unique_axes(const InferenceContext& ctx, const std::vector<int64_t>& axes,
                                 int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    int64_t n = normalize_axis(ctx, a, rank);
    if (std::find(out.begin(), out.end(), n) != out.end())
      ctx.fail("axis " + str(a) + " appears more than once in axes");
    out.push_back(n);
  }
  return out;
}

// ---- Concat, Split ----

void infer_concat(InferenceContext& ctx) {
  if (!ctx.node().has_attr("axis") && ctx.opset() >= 4) ctx.fail("attribute 'axis' is required");
  const auto& first = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(first.size());
  const DType dtype = ctx.input_dtype(0);
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_int("axis", 1), rank);
  std::vector<int64_t> out = first;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const auto& s = ctx.input_shape(i);
    if (ctx.input_dtype(i) != dtype)
      ctx.fail("input " + str(i) + " is " + dtype_name(ctx.input_dtype(i)) + ", expected " +
               dtype_name(dtype) + " like input 0");
    if (static_cast<int64_t>(s.size()) != rank)
      ctx.fail("input " + str(i) + " has shape " + to_string(s) + ", expected rank " + str(rank) +
               " like input 0 " + to_string(first));
    for (int64_t d = 0; d < rank; ++d) {
      auto& o = out[static_cast<size_t>(d)];
      const int64_t v = s[static_cast<size_t>(d)];
      if (d == axis) {
        o = (o < 0 || v < 0) ? kUnknown : Checked(ctx.node(), "concatenated size").add(o, v);
      } else if (o < 0) {
        o = v;
      } else if (v >= 0 && v != o) {
        ctx.fail("input " + str(i) + " has shape " + to_string(s) + " but input 0 has " +
                 to_string(first) + ": all dims except axis " + str(axis) + " must match");
      }
    }
  }
  ctx.set_output(0, dtype, out);
}

void infer_split(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  const int64_t dim = in[static_cast<size_t>(axis)];
  const auto n = static_cast<int64_t>(ctx.num_outputs());
  std::optional<std::vector<int64_t>> split;
  if (ctx.has_input(1) && (ctx.opset() >= 13 || ctx.opset() == 1))
    split = ctx.input_ints(1);
  else if (ctx.opset() < 13 && ctx.node().has_attr("split"))
    split = ctx.node().attr_ints("split");
  const std::vector<int64_t> sizes = split_sizes(ctx.node(), axis, dim, n, split);
  for (int64_t i = 0; i < n; ++i) {
    auto out = in;
    out[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    ctx.set_output(static_cast<size_t>(i), ctx.input_dtype(0), out);
  }
}

// ---- Slice ----

void infer_slice(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    axes = ctx.node().attr_ints("axes");
  } else {
    starts = *ctx.input_ints(1);
    ends = *ctx.input_ints(2);
    if (ctx.has_input(3)) axes = *ctx.input_ints(3);
    if (ctx.has_input(4)) steps = *ctx.input_ints(4);
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps have " + str(starts.size()) + ", " + str(ends.size()) +
             ", " + str(axes.size()) + " and " + str(steps.size()) +
             " entries; they must all have the same length");
  auto norm = unique_axes(ctx, axes, rank);
  std::vector<int64_t> out = in;
  for (size_t i = 0; i < norm.size(); ++i) {
    if (steps[i] == 0) ctx.fail("steps[" + str(i) + "] is 0");
    const int64_t dim = in[static_cast<size_t>(norm[i])];
    if (dim < 0) continue;  // stays unknown
    // A step at least as long as the axis takes one element at most; clamping makes -step
    // safe. The lengths are ceil(span / step) as (span - 1) / step + 1, which cannot overflow.
    const int64_t bound = std::max<int64_t>(dim, 1);
    const int64_t step = std::clamp<int64_t>(steps[i], -bound, bound);
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t len;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      // Going backwards, start clamps to [0, dim - 1] but end to [-1, dim - 1] (-1 = past the
      // front). min/max rather than clamp: dim may be 0.
      start = std::min(std::max<int64_t>(start, 0), dim - 1);
      end = std::min(std::max<int64_t>(end, -1), dim - 1);
      len = start > end ? (start - end - 1) / (-step) + 1 : 0;
    }
    out[static_cast<size_t>(norm[i])] = len;
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// ---- Expand, Tile, Pad ----

void infer_expand(InferenceContext& ctx) {
  auto shape = *ctx.input_ints(1);
  for (int64_t d : shape)
    if (d < 0) ctx.fail("shape " + to_string(shape) + " has a negative dim");
  ctx.set_output(0, ctx.input_dtype(0), broadcast_shapes(ctx, ctx.input_shape(0), shape));
}

void infer_tile(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  auto repeats = *ctx.input_ints(1);
  if (repeats.size() != in.size())
    ctx.fail("repeats " + to_string(repeats) + " has " + str(repeats.size()) +
             " entries, expected " + str(in.size()) + " (the input's rank)");
  std::vector<int64_t> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] < 0) ctx.fail("repeats " + to_string(repeats) + " has a negative entry");
    out[i] = repeats[i] == 0 ? 0
             : in[i] < 0     ? kUnknown
                             : Checked(ctx.node(), "output size").mul(in[i], repeats[i]);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_pad(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> pads;
  if (ctx.opset() < 2)
    pads = ctx.node().attr_ints("paddings");
  else if (ctx.opset() < 11)
    pads = ctx.node().attr_ints("pads");
  else
    pads = *ctx.input_ints(1);
  std::vector<int64_t> axes(in.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.opset() >= 18 && ctx.has_input(3)) axes = unique_axes(ctx, *ctx.input_ints(3), rank);
  if (pads.size() != 2 * axes.size())
    ctx.fail("pads " + to_string(pads) + " has " + str(pads.size()) + " entries, expected " +
             str(2 * axes.size()) + " (2 per padded axis)");
  const std::string mode = ctx.node().attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    ctx.fail("mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  std::vector<int64_t> out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    auto& d = out[static_cast<size_t>(axes[i])];
    if (d < 0) continue;
    const Checked c(ctx.node(), "padded size");
    const int64_t padded = c.add(c.add(d, pads[i]), pads[i + axes.size()]);
    if (padded < 0)
      ctx.fail("pads " + to_string(pads) + " crop axis " + str(axes[i]) + " of size " + str(d) +
               " below zero");
    d = padded;
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

}  // namespace

void register_tensor_select_schemas(SchemaRegistry& r) {
  r.add({.op_type = "Concat", .max_inputs = 1 << 20, .infer = infer_concat});
  // Split-1 took the sizes as an optional input or an attribute, 2..12 as an attribute, 13+ as
  // an input; 18 added num_outputs.
  r.add({.op_type = "Split",
         .max_opset = 1,
         .max_inputs = 2,
         .max_outputs = 1 << 20,
         .value_inputs = {1},
         .infer = infer_split});
  r.add({.op_type = "Split",
         .min_opset = 2,
         .max_opset = 12,
         .max_outputs = 1 << 20,
         .infer = infer_split});
  r.add({.op_type = "Split",
         .min_opset = 13,
         .max_inputs = 2,
         .max_outputs = 1 << 20,
         .value_inputs = {1},
         .infer = infer_split});
  r.add({.op_type = "Slice", .max_opset = 9, .infer = infer_slice});
  r.add({.op_type = "Slice",
         .min_opset = 10,
         .min_inputs = 3,
         .max_inputs = 5,
         .value_inputs = {1, 2, 3, 4},
         .infer = infer_slice});
  r.add({.op_type = "Expand",
         .min_opset = 8,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_expand});
  r.add({.op_type = "Tile",
         .min_opset = 6,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_tile});
  r.add({.op_type = "Pad", .max_opset = 10, .infer = infer_pad});
  r.add({.op_type = "Pad",
         .min_opset = 11,
         .min_inputs = 2,
         .max_inputs = 4,
         .value_inputs = {1, 3},
         .infer = infer_pad});
}

}  // namespace quilt
