// Schemas and shape inference of the indexing ops of the tensor family: Gather*, Scatter*,
// NonZero, OneHot.
#include <cmath>
#include <cstring>

#include "core/checked.hpp"
#include "core/half.hpp"
#include "core/op_schema.hpp"

namespace quilt {

void register_tensor_index_schemas(SchemaRegistry& r);

namespace {

constexpr int64_t kUnknown = -1;

std::string str(int64_t v) {
  return std::to_string(v);
}

bool is_index_dtype(DType d) {
  return d == DType::Int32 || d == DType::Int64;
}

void require_index_dtype(const InferenceContext& ctx, size_t i) {
  if (!is_index_dtype(ctx.input_dtype(i)))
    ctx.fail("input '" + ctx.node().inputs[i] + "' is " + dtype_name(ctx.input_dtype(i)) +
             ", expected int32 or int64 indices");
}

// True if two dims may be equal (unknown matches anything).
bool dims_compatible(int64_t a, int64_t b) {
  return a < 0 || b < 0 || a == b;
}

void infer_gather(InferenceContext& ctx) {
  const auto& data = ctx.input_shape(0);
  const auto& idx = ctx.input_shape(1);
  require_index_dtype(ctx, 1);
  const auto rank = static_cast<int64_t>(data.size());
  if (rank == 0) ctx.fail("data must have rank >= 1, got a scalar");
  const auto axis = static_cast<size_t>(normalize_axis(ctx, ctx.node().attr_int("axis", 0), rank));
  std::vector<int64_t> out(data.begin(), data.begin() + static_cast<ptrdiff_t>(axis));
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + static_cast<ptrdiff_t>(axis) + 1, data.end());
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_gather_elements(InferenceContext& ctx) {
  const auto& data = ctx.input_shape(0);
  const auto& idx = ctx.input_shape(1);
  require_index_dtype(ctx, 1);
  const auto rank = static_cast<int64_t>(data.size());
  if (rank == 0) ctx.fail("data must have rank >= 1, got a scalar");
  if (idx.size() != data.size())
    ctx.fail("indices have shape " + to_string(idx) + " but data has " + to_string(data) +
             ": the ranks must match");
  normalize_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  ctx.set_output(0, ctx.input_dtype(0), idx);
}

void infer_gather_nd(InferenceContext& ctx) {
  const auto& data = ctx.input_shape(0);
  const auto& idx = ctx.input_shape(1);
  if (ctx.input_dtype(1) != DType::Int64)
    ctx.fail(std::string("indices are ") + dtype_name(ctx.input_dtype(1)) + ", expected int64");
  const auto r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
  const int64_t b = ctx.opset() >= 12 ? ctx.node().attr_int("batch_dims", 0) : 0;
  if (r < 1 || q < 1) ctx.fail("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q))
    ctx.fail("batch_dims " + str(b) +
             " must be in [0, min(rank(data), rank(indices)) = " + str(std::min(r, q)) + ")");
  for (int64_t i = 0; i < b; ++i)
    if (!dims_compatible(data[static_cast<size_t>(i)], idx[static_cast<size_t>(i)]))
      ctx.fail("data " + to_string(data) + " and indices " + to_string(idx) +
               " differ in the first batch_dims dims");
  const int64_t k = idx.back();
  if (k < 0) return ctx.set_output_unknown_shape(0, ctx.input_dtype(0));
  if (k < 1 || k > r - b)
    ctx.fail("indices' last dim is " + str(k) + ", expected 1.." + str(r - b) +
             " (rank(data) - batch_dims)");
  std::vector<int64_t> out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + k, data.end());
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void check_reduction(const InferenceContext& ctx) {
  const std::string red = ctx.node().attr_string("reduction", "none");
  const bool ok = red == "none" || (ctx.opset() >= 16 && (red == "add" || red == "mul")) ||
                  (ctx.opset() >= 18 && (red == "max" || red == "min"));
  if (!ok)
    ctx.fail("reduction '" + red + "' is not valid at opset " + str(ctx.opset()) +
             " (none; add, mul since 16; max, min since 18)");
}

void infer_scatter_nd(InferenceContext& ctx) {
  const auto& data = ctx.input_shape(0);
  const auto& idx = ctx.input_shape(1);
  const auto& upd = ctx.input_shape(2);
  check_reduction(ctx);
  if (ctx.input_dtype(1) != DType::Int64)
    ctx.fail(std::string("indices are ") + dtype_name(ctx.input_dtype(1)) + ", expected int64");
  if (ctx.input_dtype(2) != ctx.input_dtype(0))
    ctx.fail("updates and data must have the same dtype");
  if (idx.empty() || data.empty()) ctx.fail("data and indices must have rank >= 1");
  const int64_t k = idx.back();
  if (k >= 0) {
    if (k > static_cast<int64_t>(data.size()))
      ctx.fail("indices' last dim " + str(k) + " exceeds the rank of data " + to_string(data));
    std::vector<int64_t> want(idx.begin(), idx.end() - 1);
    want.insert(want.end(), data.begin() + k, data.end());
    bool ok = want.size() == upd.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = dims_compatible(want[i], upd[i]);
    if (!ok)
      ctx.fail("updates have shape " + to_string(upd) + ", expected " + to_string(want) +
               " (indices.shape[:-1] + data.shape[k:])");
  }
  ctx.set_output(0, ctx.input_dtype(0), data);
}

void infer_scatter_elements(InferenceContext& ctx) {
  const auto& data = ctx.input_shape(0);
  const auto& idx = ctx.input_shape(1);
  const auto& upd = ctx.input_shape(2);
  check_reduction(ctx);
  require_index_dtype(ctx, 1);
  if (ctx.input_dtype(2) != ctx.input_dtype(0))
    ctx.fail("updates and data must have the same dtype");
  if (data.empty()) ctx.fail("data must have rank >= 1");
  if (idx.size() != data.size() || upd.size() != idx.size())
    ctx.fail("data " + to_string(data) + ", indices " + to_string(idx) + " and updates " +
             to_string(upd) + " must have the same rank");
  for (size_t i = 0; i < idx.size(); ++i)
    if (!dims_compatible(idx[i], upd[i]))
      ctx.fail("indices " + to_string(idx) + " and updates " + to_string(upd) +
               " must have the same shape");
  normalize_axis(ctx, ctx.node().attr_int("axis", 0), static_cast<int64_t>(data.size()));
  ctx.set_output(0, ctx.input_dtype(0), data);
}

// Whether element i of t is not zero (for floats: -0 is zero, NaN is not).
bool nonzero_at(const Tensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  switch (t.dtype()) {
    case DType::Float32:
      return t.data<float>()[i] != 0.0f;
    case DType::Float64:
      return t.data<double>()[i] != 0.0;
    case DType::Float16:
      return (t.data<uint16_t>()[i] & 0x7fff) != 0;
    default: {
      const size_t es = dtype_size(t.dtype());
      for (size_t b = 0; b < es; ++b)
        if (p[static_cast<size_t>(i) * es + b]) return true;
      return false;
    }
  }
}

void infer_nonzero(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  // A scalar counts as a 1-element vector, as in onnxruntime.
  const int64_t rank = in.empty() ? 1 : static_cast<int64_t>(in.size());
  const Tensor* v = ctx.input_value(0);
  if (!v) return ctx.set_output(0, DType::Int64, {rank, kUnknown});
  int64_t nnz = 0;
  for (int64_t i = 0; i < v->numel(); ++i) nnz += nonzero_at(*v, i);
  ctx.set_output(0, DType::Int64, {rank, nnz});
}

// The single value of a numeric tensor as a double.
double scalar_value(const InferenceContext& ctx, const Tensor& t, const std::string& what) {
  if (t.numel() != 1)
    ctx.fail(what + " has shape " + to_string(t.shape()) + ", expected exactly one element");
  switch (t.dtype()) {
    case DType::Float32:
      return t.data<float>()[0];
    case DType::Float64:
      return t.data<double>()[0];
    case DType::Float16:
      return half_to_float(t.data<uint16_t>()[0]);
    case DType::Int8:
      return t.data<int8_t>()[0];
    case DType::Int16:
      return t.data<int16_t>()[0];
    case DType::Int32:
      return t.data<int32_t>()[0];
    case DType::Int64:
      return static_cast<double>(t.data<int64_t>()[0]);
    case DType::UInt8:
      return t.data<uint8_t>()[0];
    case DType::UInt16:
      return t.data<uint16_t>()[0];
    case DType::UInt32:
      return t.data<uint32_t>()[0];
    case DType::UInt64:
      return static_cast<double>(t.data<uint64_t>()[0]);
    default:
      ctx.fail(what + " has dtype " + dtype_name(t.dtype()) + ", expected a number");
  }
}

void infer_one_hot(InferenceContext& ctx) {
  const auto& idx = ctx.input_shape(0);
  const auto& values = ctx.input_shape(2);
  if (values.size() != 1 || (values[0] >= 0 && values[0] != 2))
    ctx.fail("values have shape " + to_string(values) + ", expected [2] ([off, on])");
  const auto out_rank = static_cast<int64_t>(idx.size()) + 1;
  const auto axis = normalize_axis(ctx, ctx.node().attr_int("axis", -1), out_rank);
  int64_t depth = kUnknown;
  if (const Tensor* d = ctx.input_value(1)) {
    const double v = scalar_value(ctx, *d, "depth");
    if (!(v >= 1)) ctx.fail("depth is " + std::to_string(v) + ", expected >= 1");
    depth = Checked(ctx.node(), "depth").to_int64(v);
  }
  std::vector<int64_t> out(idx);
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, ctx.input_dtype(2), out);
}

}  // namespace

void register_tensor_index_schemas(SchemaRegistry& r) {
  r.add({.op_type = "Gather", .min_inputs = 2, .max_inputs = 2, .infer = infer_gather});
  r.add({.op_type = "GatherElements",
         .min_opset = 11,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_gather_elements});
  r.add({.op_type = "GatherND",
         .min_opset = 11,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_gather_nd});
  r.add({.op_type = "ScatterND",
         .min_opset = 11,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_scatter_nd});
  r.add({.op_type = "ScatterElements",
         .min_opset = 11,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_scatter_elements});
  // Scatter (9, 10) is ScatterElements under its old name.
  r.add({.op_type = "Scatter",
         .min_opset = 9,
         .max_opset = 10,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_scatter_elements});
  r.add({.op_type = "NonZero", .min_opset = 9, .value_inputs = {0}, .infer = infer_nonzero});
  r.add({.op_type = "OneHot",
         .min_opset = 9,
         .min_inputs = 3,
         .max_inputs = 3,
         .value_inputs = {1},
         .infer = infer_one_hot});
}

}  // namespace quilt
