// Schemas and shape inference of the tensor op family: ops that only move, select or describe
// elements. This file has the reshapes, Transpose, Shape and the like; Concat, Split, Slice,
// Expand, Tile and Pad are in tensor_select.cpp, the indexing ops (Gather, Scatter, NonZero, ...)
// in tensor_index.cpp, the generators (Constant, Range, ...) in tensor_make.cpp.
#include <algorithm>
#include <numeric>
#include <set>

#include "core/checked.hpp"
#include "core/op_schema.hpp"

namespace quilt {

void register_tensor_index_schemas(SchemaRegistry& r);
void register_tensor_select_schemas(SchemaRegistry& r);
void register_tensor_make_schemas(SchemaRegistry& r);

namespace {

constexpr int64_t kUnknown = -1;

std::string str(int64_t v) {
  return std::to_string(v);
}

// Product of dims[begin, end); -1 when one of them is unknown (0 wins over unknown).
int64_t product(const InferenceContext& ctx, const std::vector<int64_t>& dims, size_t begin,
                size_t end) {
  std::vector<int64_t> known;
  for (size_t i = begin; i < end; ++i)
    if (dims[i] >= 0) known.push_back(dims[i]);
  const int64_t p = Checked(ctx.node(), "element count").product(known);
  return p == 0 || known.size() == end - begin ? p : kUnknown;
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
  int64_t infer_at = -1;
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
    if (out[i] < 0) unknown = true;
  }
  if (allowzero && has_zero && infer_at >= 0)
    ctx.fail("shape " + to_string(target) + " has both 0 and -1, which allowzero=1 forbids");
  const int64_t total = product(ctx, in, 0, in.size());
  // The product of the other dims (used when they are all known): the -1 dim counts as 1.
  if (infer_at >= 0) out[static_cast<size_t>(infer_at)] = 1;
  const int64_t known = product(ctx, out, 0, out.size());
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
  ctx.set_output(0, ctx.input_dtype(0), {product(ctx, in, 0, a), product(ctx, in, a, in.size())});
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
  const Checked c(ctx.node(), "output size");
  const int64_t b2 = c.mul(b, b);
  if (in[1] >= 0 && in[1] % b2 != 0)
    ctx.fail("input channels " + str(in[1]) + " are not divisible by blocksize^2 = " + str(b2));
  auto scale = [&c](int64_t d, int64_t f) { return d < 0 ? kUnknown : c.mul(d, f); };
  ctx.set_output(0, ctx.input_dtype(0),
                 {in[0], in[1] < 0 ? kUnknown : in[1] / b2, scale(in[2], b), scale(in[3], b)});
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
  const Checked c(ctx.node(), "output channel count");
  ctx.set_output(0, ctx.input_dtype(0),
                 {in[0], in[1] < 0 ? kUnknown : c.mul(c.mul(in[1], b), b), div(in[2]), div(in[3])});
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
  r.add({.op_type = "Identity", .infer = infer_same_as_input0, .takes_values = true});
  r.add({.op_type = "Dropout", .max_opset = 11, .max_outputs = 2, .infer = infer_dropout});
  r.add({.op_type = "Dropout",
         .min_opset = 12,
         .max_inputs = 3,
         .max_outputs = 2,
         .infer = infer_dropout});
  r.add({.op_type = "Transpose", .infer = infer_transpose});
  register_tensor_select_schemas(r);
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
