// Schemas and shape inference of the tensor op family: ops that only move, select or describe
// elements (Reshape, Transpose, Concat, Slice, Pad, ...). The indexing ops (Gather, Scatter,
// NonZero, ...) are in tensor_index.cpp, the generators (Constant, Range, ...) in
// tensor_make.cpp.
#include <algorithm>
#include <numeric>
#include <set>

#include "core/op_schema.hpp"

namespace quilt {

void register_tensor_index_schemas(SchemaRegistry& r);
void register_tensor_make_schemas(SchemaRegistry& r);

namespace {

constexpr int64_t kUnknown = -1;

std::string str(int64_t v) {
  return std::to_string(v);
}

// Product of dims[begin, end); -1 when one of them is unknown (0 wins over unknown).
int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  bool unknown = false;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i] < 0)
      unknown = true;
    else
      p *= dims[i];
  }
  if (p == 0) return 0;
  return unknown ? kUnknown : p;
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

// ---- Reshape, Flatten, Squeeze, Unsqueeze ----

void infer_reshape(InferenceContext& ctx, const std::vector<int64_t>& target, bool allowzero) {
  const auto& in = ctx.input_shape(0);
  std::vector<int64_t> out(target.size());
  int64_t infer_at = -1, known = 1;
  bool unknown = false, has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t t = target[i];
    if (t < -1) ctx.fail("shape[" + str(i) + "] is " + str(t) + ", expected >= -1");
    if (t == -1) {
      if (infer_at >= 0) ctx.fail("shape " + to_string(target) + " has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (t == 0 && !allowzero) {
      if (i >= in.size())
        ctx.fail("shape[" + str(i) + "] is 0 (copy the input dim) but the input has rank " +
                 str(in.size()));
      out[i] = in[i];
    } else {
      out[i] = t;
      has_zero = has_zero || t == 0;
    }
    if (out[i] < 0)
      unknown = true;
    else
      known *= out[i];
  }
  if (allowzero && has_zero && infer_at >= 0)
    ctx.fail("shape " + to_string(target) + " has both 0 and -1, which allowzero=1 forbids");
  const int64_t total = product(in, 0, in.size());
  if (infer_at >= 0) {
    out[static_cast<size_t>(infer_at)] = kUnknown;
    if (total >= 0 && !unknown) {
      if (known == 0 || total % known != 0)
        ctx.fail("cannot reshape " + to_string(in) + " to " + to_string(target) +
                 ": the -1 dim cannot be inferred");
      out[static_cast<size_t>(infer_at)] = total / known;
    }
  } else if (total >= 0 && !unknown && total != known) {
    ctx.fail("cannot reshape " + to_string(in) + " (" + str(total) + " elements) to " +
             to_string(out) + " (" + str(known) + " elements)");
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_flatten(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < -rank || axis > rank)
    ctx.fail("axis " + str(axis) + " is out of range [" + str(-rank) + ", " + str(rank) + "]");
  if (axis < 0) axis += rank;
  const auto a = static_cast<size_t>(axis);
  ctx.set_output(0, ctx.input_dtype(0), {product(in, 0, a), product(in, a, in.size())});
}

// Axes of Squeeze/Unsqueeze: an attribute before opset 13, an optional input since.
std::optional<std::vector<int64_t>> squeeze_axes(const InferenceContext& ctx) {
  if (ctx.opset() < 13) {
    if (!ctx.node().has_attr("axes")) return std::nullopt;
    return ctx.node().attr_ints("axes");
  }
  if (!ctx.has_input(1)) return std::nullopt;
  return ctx.input_ints(1);
}

void infer_squeeze(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  auto axes = squeeze_axes(ctx);
  std::vector<int64_t> out;
  if (!axes || axes->empty()) {  // an empty axes list means "all", as in onnxruntime
    // Without axes every 1 goes; an unknown dim may or may not be 1.
    if (std::any_of(in.begin(), in.end(), [](int64_t d) { return d < 0; }))
      return ctx.set_output_unknown_shape(0, ctx.input_dtype(0));
    for (int64_t d : in)
      if (d != 1) out.push_back(d);
  } else {
    auto norm = unique_axes(ctx, *axes, rank);
    for (int64_t a : norm)
      if (in[static_cast<size_t>(a)] >= 0 && in[static_cast<size_t>(a)] != 1)
        ctx.fail("cannot squeeze axis " + str(a) + " of shape " + to_string(in) +
                 ": its size is not 1");
    for (int64_t i = 0; i < rank; ++i)
      if (std::find(norm.begin(), norm.end(), i) == norm.end())
        out.push_back(in[static_cast<size_t>(i)]);
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_unsqueeze(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  auto axes = squeeze_axes(ctx);
  if (!axes)
    ctx.fail(ctx.opset() < 13 ? "attribute 'axes' is required" : "input 'axes' is required");
  const auto out_rank = static_cast<int64_t>(in.size() + axes->size());
  auto norm = unique_axes(ctx, *axes, out_rank);
  std::vector<int64_t> out(static_cast<size_t>(out_rank), 1);
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i)
    if (std::find(norm.begin(), norm.end(), i) == norm.end())
      out[static_cast<size_t>(i)] = in[next++];
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// ---- Dropout ----

void infer_dropout(InferenceContext& ctx) {
  infer_same_as_input0(ctx);
  if (ctx.num_outputs() > 1) {
    // The mask has the input's type before opset 10, bool since.
    DType mask = ctx.opset() < 10 ? ctx.input_dtype(0) : DType::Bool;
    ctx.set_output(1, mask, ctx.input_shape(0));
  }
}

// ---- Transpose ----

void infer_transpose(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> perm(in.size());
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = ctx.node().attr_ints("perm", perm);
  if (static_cast<int64_t>(perm.size()) != rank)
    ctx.fail("perm " + to_string(perm) + " has " + str(perm.size()) + " entries, expected " +
             str(rank) + " (the input's rank)");
  std::vector<int64_t> out(in.size());
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)])
      ctx.fail("perm " + to_string(perm) + " is not a permutation of 0.." + str(rank - 1));
    seen[static_cast<size_t>(p)] = true;
    out[i] = in[static_cast<size_t>(p)];
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
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
        o = (o < 0 || v < 0) ? kUnknown : o + v;
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
  std::vector<int64_t> sizes(static_cast<size_t>(n), kUnknown);
  const bool has_num = ctx.opset() >= 18 && ctx.node().has_attr("num_outputs");
  if (split) {
    if (has_num) ctx.fail("input 'split' and attribute 'num_outputs' cannot both be given");
    if (static_cast<int64_t>(split->size()) != n)
      ctx.fail("split " + to_string(*split) + " has " + str(split->size()) +
               " entries but the node has " + str(n) + " outputs");
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) ctx.fail("split " + to_string(*split) + " has a negative size");
      sum += s;
    }
    if (dim >= 0 && sum != dim)
      ctx.fail("split " + to_string(*split) + " sums to " + str(sum) + " but axis " + str(axis) +
               " has size " + str(dim));
    sizes = *split;
  } else if (has_num) {
    const int64_t num = ctx.node().attr_int("num_outputs", n);
    if (num != n)
      ctx.fail("num_outputs is " + str(num) + " but the node has " + str(n) + " outputs");
    if (dim >= 0) {
      const int64_t chunk = (dim + n - 1) / n;
      const int64_t last = dim - chunk * (n - 1);
      if (last < 0)
        ctx.fail("axis " + str(axis) + " of size " + str(dim) + " cannot be split into " + str(n) +
                 " chunks of " + str(chunk));
      std::fill(sizes.begin(), sizes.end(), chunk);
      sizes.back() = last;
    }
  } else if (dim >= 0) {
    if (dim % n != 0)
      ctx.fail("axis " + str(axis) + " of size " + str(dim) + " cannot be split evenly into " +
               str(n) + " outputs");
    std::fill(sizes.begin(), sizes.end(), dim / n);
  }
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
    const int64_t step = steps[i];
    if (step == 0) ctx.fail("steps[" + str(i) + "] is 0");
    const int64_t dim = in[static_cast<size_t>(norm[i])];
    if (dim < 0) continue;  // stays unknown
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t len;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, -1, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      len = start > end ? (start - end + (-step) - 1) / (-step) : 0;
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
    out[i] = repeats[i] == 0 ? 0 : (in[i] < 0 ? kUnknown : in[i] * repeats[i]);
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
    const int64_t padded = d + pads[i] + pads[i + axes.size()];
    if (padded < 0)
      ctx.fail("pads " + to_string(pads) + " crop axis " + str(axes[i]) + " of size " + str(d) +
               " below zero");
    d = padded;
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// ---- Shape, Size ----

void infer_shape(InferenceContext& ctx) {
  const auto rank = static_cast<int64_t>(ctx.input_shape(0).size());
  int64_t start = ctx.node().attr_int("start", 0), end = ctx.node().attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  ctx.set_output(0, DType::Int64, {end - start});
}

// ---- DepthToSpace, SpaceToDepth ----

int64_t blocksize(const InferenceContext& ctx) {
  if (!ctx.node().has_attr("blocksize")) ctx.fail("attribute 'blocksize' is required");
  const int64_t b = ctx.node().attr_int("blocksize", 1);
  if (b <= 0) ctx.fail("blocksize is " + str(b) + ", expected > 0");
  return b;
}

void infer_depth_to_space(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  if (in.size() != 4) ctx.fail("input has shape " + to_string(in) + ", expected rank 4 (NCHW)");
  const int64_t b = blocksize(ctx);
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") ctx.fail("mode '" + mode + "' is not DCR or CRD");
  if (in[1] >= 0 && in[1] % (b * b) != 0)
    ctx.fail("input channels " + str(in[1]) + " are not divisible by blocksize^2 = " + str(b * b));
  auto scale = [](int64_t d, int64_t f) { return d < 0 ? kUnknown : d * f; };
  ctx.set_output(0, ctx.input_dtype(0),
                 {in[0], in[1] < 0 ? kUnknown : in[1] / (b * b), scale(in[2], b), scale(in[3], b)});
}

void infer_space_to_depth(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  if (in.size() != 4) ctx.fail("input has shape " + to_string(in) + ", expected rank 4 (NCHW)");
  const int64_t b = blocksize(ctx);
  for (size_t i = 2; i < 4; ++i)
    if (in[i] >= 0 && in[i] % b != 0)
      ctx.fail("input shape " + to_string(in) + ": spatial dims must be divisible by blocksize " +
               str(b));
  auto div = [b](int64_t d) { return d < 0 ? kUnknown : d / b; };
  ctx.set_output(0, ctx.input_dtype(0),
                 {in[0], in[1] < 0 ? kUnknown : in[1] * b * b, div(in[2]), div(in[3])});
}

}  // namespace

void register_tensor_schemas(SchemaRegistry& r) {
  r.add({.op_type = "Reshape", .max_opset = 4, .infer = [](InferenceContext& ctx) {
           if (!ctx.node().has_attr("shape")) ctx.fail("attribute 'shape' is required");
           infer_reshape(ctx, ctx.node().attr_ints("shape"), false);
         }});
  r.add({.op_type = "Reshape",
         .min_opset = 5,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = [](InferenceContext& ctx) {
           infer_reshape(ctx, *ctx.input_ints(1),
                         ctx.opset() >= 14 && ctx.node().attr_int("allowzero", 0) != 0);
         }});
  r.add({.op_type = "Flatten", .infer = infer_flatten});
  r.add({.op_type = "Squeeze", .max_opset = 12, .infer = infer_squeeze});
  r.add({.op_type = "Squeeze",
         .min_opset = 13,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_squeeze});
  r.add({.op_type = "Unsqueeze", .max_opset = 12, .infer = infer_unsqueeze});
  r.add({.op_type = "Unsqueeze",
         .min_opset = 13,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_unsqueeze});
  r.add({.op_type = "Identity", .infer = infer_same_as_input0});
  r.add({.op_type = "Dropout", .max_opset = 11, .max_outputs = 2, .infer = infer_dropout});
  r.add({.op_type = "Dropout",
         .min_opset = 12,
         .max_inputs = 3,
         .max_outputs = 2,
         .infer = infer_dropout});
  r.add({.op_type = "Transpose", .infer = infer_transpose});
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
  r.add({.op_type = "Shape", .infer = infer_shape});
  r.add({.op_type = "Size", .infer = [](InferenceContext& ctx) {
           ctx.input_shape(0);
           ctx.set_output(0, DType::Int64, {});
         }});
  r.add({.op_type = "DepthToSpace", .infer = infer_depth_to_space});
  r.add({.op_type = "SpaceToDepth", .infer = infer_space_to_depth});
  register_tensor_index_schemas(r);
  register_tensor_make_schemas(r);
}

}  // namespace quilt
