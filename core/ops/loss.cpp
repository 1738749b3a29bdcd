// Schemas and shape inference of the loss op family: SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss, and the small ops that ride along with it: Hardmax, LRN, CumProd,
// EyeLike, ReverseSequence, Compress.
#include <algorithm>

#include "core/checked.hpp"
#include "core/op_schema.hpp"

namespace quilt {
namespace {

constexpr int64_t kUnknown = -1;

std::string str(int64_t v) {
  return std::to_string(v);
}

bool is_float(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16;
}

void require_float(const InferenceContext& ctx, size_t i, const char* what) {
  const DType d = ctx.input_dtype(i);
  if (d != DType::Undefined && !is_float(d))
    ctx.fail(std::string(what) + " must be float16, float32 or float64, got " + dtype_name(d));
}

// Merges a dim known from two places; fails when both are known and differ.
int64_t merge_dim(const InferenceContext& ctx, int64_t a, int64_t b, const std::string& what) {
  if (a < 0) return b;
  if (b >= 0 && a != b) ctx.fail(what + ": " + str(a) + " vs " + str(b));
  return a;
}

// ---- SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss ----

// Both take scores/log-probabilities [N, C, d1, ..., dk], targets [N, d1, ..., dk] and optional
// per-class weights [C]; the loss is [N, d1, ..., dk] for reduction "none", else a scalar.
void infer_loss(InferenceContext& ctx) {
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("reduction is '" + reduction + "', expected 'none', 'sum' or 'mean'");
  require_float(ctx, 0, "input 0 (scores)");
  const DType dtype = ctx.input_dtype(0);
  const DType target_type = ctx.input_dtype(1);
  if (target_type != DType::Undefined && target_type != DType::Int32 && target_type != DType::Int64)
    ctx.fail(std::string("input 1 (target) must be int32 or int64, got ") +
             dtype_name(target_type));
  const auto& x = ctx.input_shape(0);
  const auto& t = ctx.input_shape(1);
  if (x.size() < 2)
    ctx.fail("input 0 has shape " + to_string(x) + ", expected rank >= 2 [N, C, ...]");
  if (t.size() + 1 != x.size())
    ctx.fail("target has shape " + to_string(t) + ", expected rank " + str(x.size() - 1) +
             " [N, d1, ...] to match input " + to_string(x));
  std::vector<int64_t> loss_shape(t.size());
  for (size_t i = 0; i < t.size(); ++i)
    loss_shape[i] = merge_dim(
        ctx, x[i == 0 ? 0 : i + 1], t[i],
        "input " + to_string(x) + " and target " + to_string(t) + " disagree in dim " + str(i));
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != DType::Undefined && ctx.input_dtype(2) != dtype)
      ctx.fail(std::string("weight is ") + dtype_name(ctx.input_dtype(2)) + ", expected " +
               dtype_name(dtype) + " like input 0");
    const auto& w = ctx.input_shape(2);
    if (w.size() != 1) ctx.fail("weight has shape " + to_string(w) + ", expected [C]");
    merge_dim(ctx, x[1], w[0], "weight has " + str(w[0]) + " classes but input has " + str(x[1]));
  }
  if (reduction == "none")
    ctx.set_output(0, dtype, loss_shape);
  else
    ctx.set_output(0, dtype, {});
  if (ctx.num_outputs() > 1) ctx.set_output(1, dtype, x);
}

// ---- Hardmax ----

void infer_hardmax(InferenceContext& ctx) {
  require_float(ctx, 0, "input");
  const auto& x = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(x.size());
  if (ctx.opset() < 13) {
    // Coerced to a matrix [prod(dims[:axis]), prod(dims[axis:])]: axis == rank is allowed.
    const int64_t axis = ctx.node().attr_int("axis", 1);
    if (axis < -rank || axis > rank)
      ctx.fail("axis " + str(axis) + " is out of range for rank " + str(rank));
  } else {
    if (rank == 0) ctx.fail("input must have rank >= 1, got a scalar");
    normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  }
  infer_same_as_input0(ctx);
}

// ---- LRN ----

void infer_lrn(InferenceContext& ctx) {
  require_float(ctx, 0, "input");
  if (!ctx.node().has_attr("size")) ctx.fail("attribute 'size' is required");
  const int64_t size = ctx.node().attr_int("size", 0);
  if (size < 1) ctx.fail("size is " + str(size) + ", expected >= 1");
  const auto& x = ctx.input_shape(0);
  if (x.size() < 2) ctx.fail("input has shape " + to_string(x) + ", expected [N, C, ...]");
  infer_same_as_input0(ctx);
}

// ---- CumProd ----

void infer_cumprod(InferenceContext& ctx) {
  if (ctx.input_rank(0) == 0) ctx.fail("input must have rank >= 1, got a scalar");
  if (ctx.input_rank(1) > 1) ctx.fail("axis must be a scalar (or a 1-element 1-D tensor)");
  const DType axis_type = ctx.input_dtype(1);
  if (axis_type != DType::Int32 && axis_type != DType::Int64)
    ctx.fail(std::string("axis must be int32 or int64, got ") + dtype_name(axis_type));
  if (auto v = ctx.input_ints(1)) {
    if (v->size() != 1) ctx.fail("axis must hold exactly one value");
    normalize_axis(ctx, (*v)[0], ctx.input_rank(0));
  }
  infer_same_as_input0(ctx);
}

// ---- EyeLike ----

void infer_eyelike(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() != 2) ctx.fail("input has shape " + to_string(x) + ", expected a 2-D tensor");
  DType dtype = ctx.input_dtype(0);
  if (ctx.node().has_attr("dtype")) {
    const int64_t d = ctx.node().attr_int("dtype", 0);
    dtype = static_cast<DType>(d);
    if (d <= 0 || d > 26 || dtype == DType::String)
      ctx.fail("dtype " + str(d) + " is not a numeric or bool TensorProto.DataType");
    if (!dtype_supported(dtype))  // bfloat16 and the 8/4-bit types: valid, but not held
      ctx.node().fail("dtype " + str(d) +
                          " is not supported (supported: float32, float64, float16, int8..int64, "
                          "uint8..uint64, bool)",
                      ErrorCode::NotImplemented);
  }
  ctx.set_output(0, dtype, x);
}

// ---- ReverseSequence ----

void infer_reverse_sequence(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() < 2) ctx.fail("input has shape " + to_string(x) + ", expected rank >= 2");
  const int64_t batch_axis = ctx.node().attr_int("batch_axis", 1);
  const int64_t time_axis = ctx.node().attr_int("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) ||
      batch_axis == time_axis)
    ctx.fail("batch_axis " + str(batch_axis) + " and time_axis " + str(time_axis) +
             " must be 0 and 1 in some order");
  if (ctx.input_dtype(1) != DType::Int64)
    ctx.fail(std::string("sequence_lens must be int64, got ") + dtype_name(ctx.input_dtype(1)));
  const auto& lens = ctx.input_shape(1);
  if (lens.size() != 1)
    ctx.fail("sequence_lens has shape " + to_string(lens) + ", expected [batch_size]");
  merge_dim(ctx, x[static_cast<size_t>(batch_axis)], lens[0],
            "sequence_lens has " + str(lens[0]) + " entries but the batch dim of input " +
                to_string(x) + " is " + str(x[static_cast<size_t>(batch_axis)]));
  infer_same_as_input0(ctx);
}

// ---- Compress ----

void infer_compress(InferenceContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  const auto& x = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(x.size());
  if (ctx.input_dtype(1) != DType::Bool)
    ctx.fail(std::string("condition must be bool, got ") + dtype_name(ctx.input_dtype(1)));
  if (ctx.input_rank(1) != 1)
    ctx.fail("condition has shape " + to_string(ctx.input_shape(1)) + ", expected 1-D");
  const bool has_axis = ctx.node().has_attr("axis");
  int64_t axis = 0, len = 1;
  if (has_axis) {
    if (rank == 0) ctx.fail("input is a scalar, which has no axis to compress");
    const int64_t a = ctx.node().attr_int("axis", 0);
    if (a < 0 && ctx.opset() < 11)
      ctx.fail("axis " + str(a) + " is negative, which needs opset >= 11");
    axis = normalize_axis(ctx, a, rank);
    len = x[static_cast<size_t>(axis)];
  } else {
    const Checked c(ctx.node(), "element count");
    for (int64_t d : x) len = c.mul_dims(len, d);
  }
  int64_t kept = kUnknown;
  if (const Tensor* c = ctx.input_value(1); c && len >= 0) {
    // Elements past the end of the axis are ignored when false, like numpy.compress.
    const bool* cond = c->data<bool>();
    kept = 0;
    for (int64_t i = 0; i < c->numel(); ++i) {
      if (!cond[i]) continue;
      if (i >= len)
        ctx.fail("condition selects index " + str(i) + " but the " +
                 (has_axis ? "axis" : "flattened input") + " has only " + str(len) + " elements");
      ++kept;
    }
  }
  if (!has_axis) return ctx.set_output(0, dtype, {kept});
  std::vector<int64_t> out = x;
  out[static_cast<size_t>(axis)] = kept;
  ctx.set_output(0, dtype, out);
}

}  // namespace

void register_loss_schemas(SchemaRegistry& r) {
  r.add({.op_type = "SoftmaxCrossEntropyLoss",
         .min_opset = 12,
         .min_inputs = 2,
         .max_inputs = 3,
         .max_outputs = 2,
         .infer = infer_loss});
  r.add({.op_type = "NegativeLogLikelihoodLoss",
         .min_opset = 12,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_loss});
  // Opsets 1-12 coerce the input to 2-D at axis (default 1); 13 works along one axis (default -1).
  r.add({.op_type = "Hardmax", .max_opset = 12, .infer = infer_hardmax});
  r.add({.op_type = "Hardmax", .min_opset = 13, .infer = infer_hardmax});
  r.add({.op_type = "LRN", .infer = infer_lrn});
  r.add({.op_type = "CumProd",
         .min_opset = 26,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_cumprod});
  r.add({.op_type = "EyeLike", .min_opset = 9, .infer = infer_eyelike});
  r.add({.op_type = "ReverseSequence",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_reverse_sequence});
  r.add({.op_type = "Compress",
         .min_opset = 9,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_compress});
}

}  // namespace quilt
